"""The invariants of a whole stream, which no single line can break on its own (docs/events.md §4):
exactly one ``runner_exit`` and it is the last line, ``run_started`` (when present) is the first
line, and at most one ending event."""

from __future__ import annotations

from .reader import Line

ENDINGS = frozenset({"root_exited", "timeout", "output_overflow", "cancelled", "killed"})


class StreamChecks:
    """Fed every line in order; ``problems()`` names what the whole stream got wrong."""

    def __init__(self) -> None:
        self._first: int | None = None
        self._last: int | None = None
        self._named: dict[str, list[int]] = {}

    def add(self, line: Line) -> None:
        if self._first is None:
            self._first = line.number
        self._last = line.number
        event = line.event
        name = event.get("event") if event is not None else None
        if isinstance(name, str):
            self._named.setdefault(name, []).append(line.number)

    def problems(self) -> list[str]:
        problems = []
        exits = self._named.get("runner_exit", [])
        if len(exits) != 1:
            problems.append(f"{len(exits)} runner_exit events{_at(exits)}, expected exactly one")
        if exits and exits[-1] != self._last:
            problems.append(f"runner_exit (line {exits[-1]}) is not the last line (line {self._last})")
        misplaced = [number for number in self._named.get("run_started", []) if number != self._first]
        if misplaced:
            problems.append(f"run_started is not the first line{_at(misplaced)}")
        endings = sorted((number, name) for name in ENDINGS for number in self._named.get(name, []))
        if len(endings) > 1:
            listed = ", ".join(f"{name} on line {number}" for number, name in endings)
            problems.append(f"{len(endings)} ending events ({listed}), expected at most one")
        return problems


def _at(numbers: list[int]) -> str:
    if not numbers:
        return ""
    return f" (line{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))})"

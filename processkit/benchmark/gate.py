"""``--fail-if-slower PCT``: whether a command got slower than its ``--baseline``, decided on a
figure the machine's load does not move, or said to be inconclusive when none is at hand.

A CI runner is busy: other jobs share its CPUs, each in a group of its own, and a CPU-bound
command's wall time doubles beside them while the work it does is the same. A gate on wall time
then fails an unchanged command. So each command is judged on the best figure both sides hold:

1. ``instructions`` (a hardware counter, per run: ``counters.py``) where both have them: the
   work done, whatever the load.
2. Else, when either side was measured on a busy host (other processes took ``BUSY_SHARE`` of
   the CPUs or more, ``host_load.py``), CPU time (user+system of the whole tree, per run):
   load barely moves it for a CPU-bound command, but contention for caches and cores adds to
   each run's (measured beside four CPU-bound neighbours on two cores: the mean up to 17 %,
   the fastest run up to 5 %). So the change is the fastest runs' (the ones the load disturbed
   least: minimum against minimum), and it counts only beyond ``CONTENTION_ALLOWANCE`` as well
   as PCT; one between the two is inconclusive. A baseline without CPU time per run (hyperfine's) leaves only wall time,
   which a busy host makes inconclusive.
3. Else (both quiet) the benchmark's ``--metric`` (wall time by default): what the user asked.
   On a busy host with nothing better, a wall-time slowdown within what the others' load can
   explain (``_explained``) is inconclusive; one beyond it still fails.

A slowdown counts only when it is also significant (Mann-Whitney U, ``baseline._entry``), as
criterion and pytest-benchmark gate. "Inconclusive" never fails the build: it says why.
"""

from __future__ import annotations

from ..plain import Plain
from ..text import sanitize
from .baseline import SLOWER, _entry, match
from .stats import summarize

BUSY_SHARE = 0.25  # other processes took a quarter of all CPUs' time or more: the machine was busy
CONTENTION_ALLOWANCE = 15.0  # % of CPU time that sharing caches and cores with busy neighbours can add
WHY = {
    "instructions": "instructions retired (a hardware counter: load does not move it)",
    "cpu": "CPU time (user+system of the whole tree, which load barely moves for a CPU-bound command; "
    "on a busy machine the fastest runs')",
    "wall": "wall time",
}
REGRESSED, PASSED, INCONCLUSIVE = "regressed", "passed", "inconclusive"


class Decision(Plain):
    """The gate's word on one command: the figure it used, the change, and why."""

    command: str
    figure: str  # instructions, cpu or wall
    outcome: str  # regressed, passed or inconclusive
    change_percent: float | None
    p_value: float | None
    reason: str


def _figure_of(source, figure: str) -> list | None:
    """A command's per-run values of ``figure`` (a live result or a recorded one), or None."""
    if figure == "wall":
        return source.times or None
    if figure == "cpu":
        return source.cpu_times or None
    values = source.instructions
    return values if values and all(value is not None for value in values) else None


def _busy_words(now: float | None, then: float | None) -> str:
    """``other processes took 95 % of the CPUs' time during these runs, 66 % during the baseline's``."""
    shares = [(share, when) for share, when in ((now, "these runs"), (then, "the baseline's")) if share is not None]
    said = [
        f"{share * 100:.0f} %" + (" of the CPUs' time" if not index else "") + f" during {when}"
        for index, (share, when) in enumerate(shares)
    ]
    return "other processes took " + ", ".join(said)


def decide(result, earlier, threshold: float, flag: str) -> list[Decision]:
    """Each of ``result``'s commands (a BenchResult) against ``earlier`` (a RecordedBench) at
    ``threshold`` %; ``flag``: how the gate's option is named in a message."""
    load = result.settings.get("host_load") or {}
    now, then = load.get("others_cpu_share"), earlier.others_cpu_share
    busy = any(share is not None and share >= BUSY_SHARE for share in (now, then))
    current = [r for r in result.results if r.summary is not None]
    old = [c for c in earlier.commands if c.summary is not None]
    found = match([(r.command.name, r.command.text) for r in current], [(c.name, c.text) for c in old])
    decisions = []
    for new, hit in zip(current, found):
        if hit is None:
            continue
        decisions.append(_decide(new, old[hit], threshold, flag, busy, now, then, earlier.metric_for(result.metric)))
    return decisions


def _decide(new, old, threshold: float, flag: str, busy: bool, now, then, metric: str) -> Decision:
    name = new.command.name
    if _figure_of(new, "instructions") and _figure_of(old, "instructions"):
        figure, limit = "instructions", threshold
    elif busy and _figure_of(new, "cpu") and _figure_of(old, "cpu"):
        figure, limit = "cpu", max(threshold, CONTENTION_ALLOWANCE)
    else:
        figure, limit = ("wall", threshold) if busy else (metric, threshold)
    values, old_values = _figure_of(new, figure) or [], _figure_of(old, figure) or []
    entry = _entry(name, summarize(values, [], [], []), values, old.name, summarize(old_values, [], [], []), old_values)
    change, p_value = entry.change_percent, entry.p_value
    if figure == "cpu" and busy and values and old_values and min(old_values) > 0:
        change = (min(values) / min(old_values) - 1) * 100  # the runs the load disturbed least
    slower = entry.verdict == SLOWER and change is not None and change > threshold
    shown = f"{change:.1f} %" if change is not None else "no ratio"
    test = f"Mann-Whitney U p = {p_value:.2g}" if p_value is not None else "too few runs to test"
    if slower and figure == "wall" and busy and change is not None and change <= _explained(now, then):
        reason = (
            f"the machine was busy ({_busy_words(now, then)}): wall time {shown} slower ({test}) "
            f"is within what that load can explain ({_explained(now, then):.0f} %), and no figure load does not "
            "move is on both sides (a baseline with CPU time per run, ours, has one)"
        )
        return Decision(name, figure, INCONCLUSIVE, change, p_value, reason)
    if slower and change is not None and change <= limit:
        reason = (
            f"the machine was busy ({_busy_words(now, then)}); by {WHY[figure]} it is {shown} slower "
            f"({test}), beyond {flag} % but within the {CONTENTION_ALLOWANCE:g} % that contention can add"
        )
        return Decision(name, figure, INCONCLUSIVE, change, p_value, reason)
    if slower:
        context = f" on a busy machine ({_busy_words(now, then)})" if busy else ""
        reason = f"by {WHY[figure]}{context} ({test}), beyond {flag} %"
        return Decision(name, figure, REGRESSED, change, p_value, reason)
    context = f"; the machine was busy ({_busy_words(now, then)})" if busy else ""
    reason = f"{entry.verdict} by {WHY[figure]}" + (f", {shown}" if change is not None else "") + f" ({test}){context}"
    return Decision(name, figure, PASSED, change, p_value, reason)


def _explained(now: float | None, then: float | None) -> float:
    """The wall-time slowdown (%) that the others' load can explain: a command given what the
    others left, ``1 - share`` of the machine, takes up to ``1 / (1 - share)`` as long (the
    share taken at most 0.95, so a slowdown beyond 20x is never the load's alone)."""
    share = min(max(now or 0.0, then or 0.0), 0.95)
    return (1 / (1 - share) - 1) * 100


def said(decision: Decision, file: str) -> str:
    """A decision in words: ``'x' is 52.0 % slower than the baseline F by CPU time (...)``."""
    name = sanitize(decision.command)
    if decision.outcome == REGRESSED:
        return (
            f"'{name}' is {decision.change_percent:.1f} % slower than the baseline {sanitize(file)} {decision.reason}"
        )
    return f"'{name}': {decision.outcome}: {decision.reason}"


def lines(decisions: list[Decision], threshold: float, file: str) -> list[str]:
    """The terminal's block, after the baseline's."""
    if not decisions:
        return []
    return [f"Gate (slower by more than {threshold:g} % fails)"] + [f"  {said(d, file)}" for d in decisions]


def to_json(decisions: list[Decision], threshold: float) -> dict:
    return {
        "threshold_percent": threshold,
        "busy_share": BUSY_SHARE,
        "contention_allowance_percent": CONTENTION_ALLOWANCE,
        "commands": [d._asdict() for d in decisions],
    }

"""What ``reading`` derives from a stream's facts for the page: the members in tree order, and
how a forced ending's teardown went, in words."""

from __future__ import annotations

from ..events import render
from ..events.types import Shutdown
from ..text import plural
from .model import SeenProcess, shown


def stop_words(finished: dict | None, grace_ms: int | None) -> str:
    """How teardown went for a forced ending: "the tree was stopped gracefully in 1.2s"."""
    if finished is None:
        return ""
    shutdown = Shutdown.read(finished["shutdown"])
    left = finished["remaining"]
    tail = f"; {plural(left, 'process', 'processes')} remained after teardown" if left else ""
    if shutdown is None:
        return tail.lstrip("; ")
    elapsed = "" if shutdown.elapsed_ms is None else f" in {render.duration(shutdown.elapsed_ms)}"
    if shutdown.soft_signal != "sent":
        words = f"no soft stop was possible ({shown(shutdown.soft_signal)}), so the tree was killed{elapsed}"
    elif shutdown.drained_within_grace:
        words = f"the tree was stopped gracefully{elapsed}"
    elif shutdown.escalated and grace_ms is not None:
        words = f"the tree did not stop within its {render.duration(grace_ms)} grace and was killed{elapsed}"
    elif shutdown.escalated:
        words = f"the tree was signalled and, with no grace given, killed{elapsed}"
    else:
        words = f"the tree was stopped{elapsed}"
    return words + tail


def nested(members: list[SeenProcess]) -> list[SeenProcess]:
    """Members in tree order (each parent followed by its children), depth set; a member whose
    parent was never seen starts a tree of its own."""
    by_pid = {m.pid: m for m in members}
    children: dict[int | None, list[SeenProcess]] = {}
    for member in members:
        parent = member.ppid if member.ppid in by_pid and member.ppid != member.pid else None
        children.setdefault(parent, []).append(member)
    ordered: list[SeenProcess] = []
    visited: set[int] = set()

    def visit(member: SeenProcess, depth: int) -> None:
        if id(member) in visited:
            return
        visited.add(id(member))
        member.depth = depth
        ordered.append(member)
        for child in sorted(children.get(member.pid, []), key=lambda m: (m.first_ms, m.pid)):
            visit(child, depth + 1)

    for top in sorted(children.get(None, []), key=lambda m: (not m.is_root, m.first_ms, m.pid)):
        visit(top, 0)
    for member in members:  # a parent cycle (pid reuse in a damaged stream) still shows everyone
        visit(member, 0)
    return ordered

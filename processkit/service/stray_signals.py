"""The signals a child of the runner service, or of a process it starts (a batch's, a
benchmark's: ``spawned``), may send "its parent" (the caller it would have under subprocess):
caught and dropped, so one stray signal never ends that process and every run it carries. The
signals a fault raises are told apart from the same sent by ``kill`` (``guard_faults``): a sent
one is dropped, a real fault still ends the process (``engine.signals``, which the CLI's runner
shares)."""

from __future__ import annotations

from ..engine.signals import drop_strays, guard_faults


def absorb(also: tuple[str, ...] = ()) -> None:
    """Catch and drop ``engine.signals.STRAY_SIGNALS``, ``also`` and the real-time signals (each
    with its default action), and guard ``engine.signals.FAULTS``."""
    guard_faults()
    drop_strays(also)

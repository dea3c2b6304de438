"""A clock the tests move by hand, for a ``Loop(clock=...)``: deadlines, idle checks and pacing
are then driven in-process and deterministically (as trio's ``MockClock`` is), with ``run_once(0)``
as the turn that sees the new time."""

from __future__ import annotations


class ManualClock:
    def __init__(self, start: float = 1000.0):
        self.time = start

    def __call__(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds

"""Whether the runner service has descriptors for one more run (``fdlimit.no_room_for_a_run``),
asked before each run it starts.

Facts that shape it:
- The host admits every queued run in one pass before any of them begins (``Scheduler._fill``),
  so the descriptors open at each ask did not count the runs admitted just before it: a burst
  of calls under a low ``ulimit -n`` went past the limit, its runs failed at their set-up (the
  container's files, 102) or at their spawn as the program's own ``OSError`` (EMFILE), and
  the idle groups the failed set-ups left in the pool held so many files that every later call
  of the process was refused (111). Runs admitted and not yet begun are counted as the runs
  they will be (``unbegun``).
"""

from __future__ import annotations

from .. import fdlimit


class Admission:
    """The service's open-file limit, read once, and the runs admitted that have not begun."""

    def __init__(self, soft: int | None) -> None:
        self.soft = soft
        self.unbegun: set[int] = set()  # request ids admitted whose first step has not run yet

    def refusal(self, in_flight: int) -> str | None:
        """Why one more run does not fit beside the ``in_flight`` ones, those not begun among
        them; None when it fits."""
        return fdlimit.no_room_for_a_run(in_flight, self.soft, len(self.unbegun))

"""The API's runs and the escapee rules: a cgroup v2 run's process that wrote itself into another
group's ``cgroup.procs`` (root, or the owner of a delegated subtree) outlives the kill of the
run's group and comes to the service, its runs' subreaper, once orphaned, as to ``run``'s runner.

Facts that shape the look (``RunContext.escapees``, asked once the run's group's kill is
confirmed):
- The service carries many runs at once and starts each batch and benchmark as a process of its
  own: an orphan of its is a run's, but which run's cannot be told while another run is live or
  a batch or benchmark runs (it may have come from either). So a run looks only when it alone
  has been live since it began (no run live as its context was made, none begun since, none
  live but it at its teardown) and no batch or benchmark ran meanwhile; then every orphan that
  started after the run began is its own: ended and listed in ``cleanup_finished``'s
  ``remaining_pids``, as ``run`` lists its own (the service has no stderr to say it on: the
  stream says it). An orphan that started before (one a run that overlapped another left
  unlooked for) is ended too, and listed nowhere: it is no process of this run's.
- The service is started fresh by its caller: nothing below it is the caller's, and its own
  process group's members (a run's ``setpgid``) are runs' too. One in the service's own v2
  group (the caller's), and in no run's v1 group, is spared as ``run`` spares the caller's
  (``leftovers.v2_keeps``).
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..engine.host import Host

_BEGUN = [0]  # how many runs' contexts this service has made: one begun since a run's is its overlap


def sole_run(host: Host, others: dict) -> Callable[[Callable[[int], bool]], list[int]]:
    """The look for a run whose context is made now; ``others``: the batches and benchmarks the
    service runs (by pid), read again at the teardown."""
    _BEGUN[0] += 1
    mine, alone = _BEGUN[0], not host.runs and not others
    ticks = os.sysconf("SC_CLK_TCK")
    began = time.clock_gettime_ns(time.CLOCK_BOOTTIME) * ticks // 1_000_000_000  # a start time's clock

    def escapees(holds: Callable[[int], bool]) -> list[int]:
        from ..containment import has_children, prctl

        if not (alone and mine == _BEGUN[0] and len(host.runs) == 1 and not others):
            return []
        if not prctl.made_subreaper() or not has_children():
            return []  # the usual end
        from ..containment.leftovers import Tearing, descendants, end_descendants
        from ..containment.members import read_member

        started = {pid: read_member(pid) for pid in descendants(os.getpid())}
        tearing = Tearing(holds)
        refused: list[int] = []
        ended = end_descendants(refused=refused, own_group=True, tearing=tearing) + refused + tearing.met

        def its(pid: int) -> bool:
            member = started.get(pid)
            return member is None or member.start_time is None or int(member.start_time) >= began

        return [pid for pid in ended if its(pid)]

    return escapees

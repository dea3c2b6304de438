"""The API's runs and the escapee rules: a cgroup v2 run's process that wrote itself into another
group's ``cgroup.procs`` (root, or the owner of a delegated subtree) outlives the kill of the
run's group and comes to the service, its runs' subreaper, once orphaned, as to ``run``'s runner.

Facts that shape the look (``RunContext.escapees``, asked once the run's group's kill is
confirmed):
- The service carries many runs at once and starts each batch and benchmark as a process of its
  own: an orphan of its is a run's, but which run's cannot be told while another run is live or
  a batch or benchmark runs (it may have come from either). So a run looks only when it alone
  has been live since it began (no run live as its context was made, none begun since, none
  live but it at its teardown) and no batch or benchmark began or ran meanwhile (``spawned.launch``
  counts each begun); then every orphan is its own: ended and listed in ``cleanup_finished``'s
  ``remaining_pids``, as ``run`` lists its own (the service has no stderr to say it on: the
  stream says it).
- Unless the service had any child as the run began: a leftover of a run that overlapped
  another (left unlooked for), or of a batch's process that died. Such a process may fork
  meanwhile, and its child, orphaned, comes to the service beside the run's with nothing that
  tells whose it is (a start time says when, not whose; the subtree it was forked in is gone
  once its parent is). So that run's look ends every orphan all the same and lists none of
  them (one still in the run's own group is its own, listed as ever): nothing listed is another's.
- The service is started fresh by its caller: nothing below it is the caller's, and its own
  process group's members (a run's ``setpgid``) are runs' too. One in the service's own v2
  group (the caller's), and in no run's v1 group, is spared as ``run`` spares the caller's
  (``leftovers.v2_keeps``).
"""

from __future__ import annotations

from ..containment import has_children, may_have_escapees

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    from ..engine.host import Host

_BEGUN = [0]  # runs' contexts, batches and benchmarks this service began: one begun since a run's is its overlap


def begun() -> None:
    """Count a batch or benchmark begun (``spawned.launch``): a run live meanwhile is no sole run."""
    _BEGUN[0] += 1


def sole_run(host: Host, others: dict) -> Callable[[Callable[[int], bool]], list[int]]:
    """The look for a run whose context is made now; ``others``: the batches and benchmarks the
    service runs (by pid), read again at the teardown."""
    _BEGUN[0] += 1
    mine, alone = _BEGUN[0], not host.runs and not others
    clean = alone and not has_children()  # nothing left below the service: what it finds is the run's

    def escapees(holds: Callable[[int], bool]) -> list[int]:
        if not (alone and mine == _BEGUN[0] and len(host.runs) == 1 and not others):
            return []
        if not may_have_escapees():
            return []  # the usual end
        from ..containment.leftovers import Tearing, end_descendants

        tearing = Tearing(holds)
        refused: list[int] = []
        ended = end_descendants(refused=refused, own_group=True, tearing=tearing) + refused
        return (ended if clean else []) + tearing.met  # those still in its group are its own all the same

    return escapees

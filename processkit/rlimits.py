"""The resource limits (``ulimit``) a run's child takes: its caller's, where the run is carried
for another process (``RunContext.limits``: the API's runner service), as a ``subprocess``
child takes its parent's.

Facts that shape it:
- Limits are inherited across fork and exec. The service was started with its caller's limits
  of that moment, so a caller that lowered its own afterwards (``resource.setrlimit`` of a CPU,
  file-size or address-space cap before running untrusted code) had its children run under
  none of it: the service's own, inherited by every child.
- The service reads its caller's at each request as it reads it (``of_process``: ``prlimit``
  on the caller's pid, alive while its request is read), and the child sets them just before
  its exec, after the open-file limit ``fdlimit`` gives back, on both spawn paths
  (processkit/engine/spawn.py, csrc/spawn_child.c). A limit the child cannot set (above a hard
  limit this process lowered) leaves it this process's, the lower.
- The spawn reads them as it reads the caller's umask (``callers_umask.under``): set for that
  one call, which never yields, so no other run sees them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, TypeVar

    T = TypeVar("T")

    Limits = tuple[tuple[int, int, int], ...]

_KINDS: list[int] = []  # filled by the first ``of_process``
_given: list[Limits] = []  # the limits of the spawn under way (``given``)


def of_process(pid: int) -> Limits | None:
    """Process ``pid``'s limits, each as (kind, soft, hard) (``RLIM_INFINITY`` as -1); None
    when they cannot be read (the process gone, or not this user's)."""
    import resource  # here: a run carried in its own process (the CLI's) never imports it

    if not _KINDS:  # every limit this Python names, once each (RLIMIT_OFILE is RLIMIT_NOFILE)
        _KINDS.extend(sorted({getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_")}))
    prlimit = resource.prlimit
    try:
        return tuple((kind, *prlimit(pid, kind)) for kind in _KINDS)
    except (OSError, ValueError):
        return None


def given(limits: Limits | None, make: Callable[..., T], /, *args, **kwargs) -> T:
    """``make(*args, **kwargs)`` (a spawn) with ``limits`` the child's (None: this process's own)."""
    if limits is None:
        return make(*args, **kwargs)
    _given.append(limits)
    try:
        return make(*args, **kwargs)
    finally:
        _given.pop()


def for_child() -> Limits:
    """What the child of the spawn under way sets before its exec: its caller's limits, or none."""
    return _given[-1] if _given else ()


def set_own(limits: Limits | tuple[tuple[int, ...], ...]) -> None:
    """``limits`` set as this process's own, each best effort: in the forked child of the Python
    spawn path (``resource`` imported before the fork, by ``of_process`` or by the spawn for the
    open-file limit), and in a batch's or a benchmark's process (``service.spawned``)."""
    if not limits:
        return
    import resource

    for kind, soft, hard in limits:
        try:
            resource.setrlimit(kind, (soft, hard))
        except (OSError, ValueError):  # above a hard limit this process lowered: the lower stays
            pass

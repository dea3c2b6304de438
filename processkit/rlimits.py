"""The resource limits (``ulimit``) a run's child takes: its caller's, where the run is carried
for another process (the API's runner service, a batch's or a benchmark's process it starts),
as a ``subprocess`` child takes its parent's.

Facts that shape it:
- Limits are inherited across fork and exec. The service was started with its caller's limits
  of that moment, so a caller that lowered its own afterwards (``resource.setrlimit`` of a CPU,
  file-size or address-space cap before running untrusted code) had its children run under
  none of it: the service's own, inherited by every child.
- The caller reads its own (``now``: ``getrlimit``, which nothing refuses; ``prlimit`` on
  another process is refused unless all its user and group ids are the reader's real ones, so
  a setgid caller's were lost) and sends them only when they changed since it last sent them,
  as its environment (``api.caller_env.CallerEnv``); the service keeps the last ones.
- A child sets only those that differ from what it inherits anyway (``differing``: the
  carrying process's own as it started, ``note_own``), usually none: a run pays for no
  system call. It sets them just before its exec, after the open-file limit ``fdlimit`` gives
  back, on both spawn paths (processkit/engine/spawn_popen.py, csrc/spawn_child.c). A batch's or a
  benchmark's process gives them to every child it starts (``for_every_child``), never takes
  them itself: its own CPU or file-size cap would end or cut the batch, not its jobs.
- ``RLIMIT_RSS`` is left out: Linux ignores it.
- The spawn reads them as it reads the caller's umask (``callers_umask.under``): set for that
  one call, which never yields, so no other run sees them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, TypeVar

    T = TypeVar("T")

    Limits = tuple[tuple[int, int, int], ...]

_KINDS: list[int] = []  # every limit this Python names but RLIMIT_RSS, once each (``kinds``)
_given: list[Limits] = []  # the limits of the spawn under way (``given``), or of every one (``for_every_child``)
_own: frozenset = frozenset()  # this process's limits as it started (``note_own``)
_last: tuple = ((), ())  # the last ``differing`` asked and its answer


def kinds() -> list[int]:
    """The limits a caller sends (RLIMIT_OFILE is RLIMIT_NOFILE; RLIMIT_RSS is ignored by Linux)."""
    if not _KINDS:
        import resource

        named = {getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_")}
        _KINDS.extend(sorted(named - {getattr(resource, "RLIMIT_RSS", -1)}))
    return _KINDS


def now() -> tuple[tuple[int, int], ...]:
    """This process's limits, (soft, hard) for each of ``kinds`` in its order (-1: unlimited)."""
    import resource

    return tuple(map(resource.getrlimit, kinds()))


def as_sent(limits: tuple[tuple[int, int], ...]) -> Limits:
    """``now``'s limits as a request carries them: (kind, soft, hard) each."""
    return tuple((kind, soft, hard) for kind, (soft, hard) in zip(kinds(), limits))


def note_own() -> None:
    """Record this process's limits as its children would inherit them (before ``fdlimit``
    raises its open-file limit, whose soft one the children get back)."""
    global _own
    _own = frozenset(as_sent(now()))


def differing(sent: Limits | None) -> Limits:
    """Of the caller's limits ``sent``, those a child does not inherit from this process."""
    global _last
    if not sent:
        return ()
    if _last[0] is not sent:  # the service keeps the tuple it read: one comparison a run
        _last = (sent, tuple(triple for triple in sent if triple not in _own))
    return _last[1]


def given(limits: Limits | None, make: Callable[..., T], /, *args, **kwargs) -> T:
    """``make(*args, **kwargs)`` (a spawn) with ``limits`` set in the child (None or (): none)."""
    if not limits:
        return make(*args, **kwargs)
    _given.append(limits)
    try:
        return make(*args, **kwargs)
    finally:
        _given.pop()


def for_every_child(limits: Limits) -> None:
    """``limits`` set in every child this process starts (a batch's or a benchmark's)."""
    if limits:
        _given[:0] = [limits]


def for_child() -> Limits:
    """What the child of the spawn under way sets before its exec: its caller's limits, or none."""
    return _given[-1] if _given else ()


def set_own(limits: Limits) -> None:
    """``limits`` set as this process's own, each best effort (the forked child of the Python
    spawn path, ``resource`` imported before the fork by the spawn)."""
    if not limits:
        return
    import resource

    for kind, soft, hard in limits:
        try:
            resource.setrlimit(kind, (soft, hard))
        except (OSError, ValueError):  # above a hard limit this process lowered: the lower stays
            pass

"""What of the caller's environment its runner service sees: the variables a service reads once
when it starts and the caller's user and groups (a change of either starts a fresh service,
``fingerprint``, ``credentials``), the environment, umask and resource limits a request
carries (``CallerEnv``: a run's only what changed since the last one sent,
``changed``; a batch's and a benchmark's whole, ``whole``), and the service's own start-up
environment (``service_environment``)."""

from __future__ import annotations

import os

from .. import rlimits
from ..containment.cgroupfs import read_bytes
from ..containment.members import status_fields
from ..native import module as native_module
from ..plain import Frozen

# What the service reads from its environment once, when it starts (the registry, its lodging
# and scratch directory, the containment): a change starts a fresh service.
PLACES = ("HOME", "TMPDIR", "XDG_RUNTIME_DIR")


def fingerprint() -> tuple:
    """The variables a service reads once (``PLACES``, ``PROCESSKIT_*``), as they are now: asked
    at every call, and made again only when the environment changed since the last time (its
    bytes mapping compared whole is a tenth of picking and sorting these out of it)."""
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict):  # CPython's bytes mapping: no entry decoded
        kept = _KEPT[0]
        if data == kept[0]:
            return kept[1]
        found = tuple(sorted(item for item in data.items() if item[0] in _PLACES or item[0].startswith(b"PROCESSKIT_")))
        _KEPT[0] = (dict(data), found)  # one store: a thread sees the old pair or the new
        return found
    return tuple(sorted(item for item in os.environ.items() if item[0] in PLACES or item[0].startswith("PROCESSKIT_")))


def credentials() -> tuple:
    """Who the caller is now (its user and group ids, real, effective and saved, and its
    supplementary groups): a service started as another (a root daemon's, before it dropped to
    an unprivileged user) would run its children as that one, so a change starts a fresh service."""
    return os.getresuid(), os.getresgid(), os.getgroups()


_PLACES = tuple(os.fsencode(name) for name in PLACES)
_KEPT: list[tuple[dict | None, tuple]] = [(None, ())]  # (os.environ's bytes when last asked, their fingerprint)


class CallerEnv(Frozen):
    """The caller's environment (text to text), umask and resource limits (``rlimits``) as a request carries them to its service,
    in the one shape a run's, a batch's and a benchmark's request take, checked in one place
    (``service.inbound``). A run's carries what changed since the last run request sent (a
    field None: as sent then, ``changed``), which the service keeps (``updated``); a batch's and
    a benchmark's process takes it whole as its own (``whole``, ``service.spawned.take_place``).
    The umask is sent as the environment is, not read by the service at its start: a run is
    made under its caller's of its own call, as ``subprocess``'s child would be."""

    env: dict[str, str] | None = None
    umask: int | None = None
    limits: tuple | None = None  # its resource limits, (kind, soft, hard) each (``rlimits``)

    def updated(self, sent: CallerEnv) -> CallerEnv:
        """This one with what ``sent`` changed."""
        return CallerEnv(
            self.env if sent.env is None else sent.env,
            self.umask if sent.umask is None else sent.umask,
            self.limits if sent.limits is None else sent.limits,
        )

    def __reduce__(self):  # limits unchanged (None) left out: an older install's service has no such field
        return CallerEnv, (self.env, self.umask) if self.limits is None else (self.env, self.umask, self.limits)


def inherited() -> tuple:
    """What a service started now takes from its caller without a word (``changed``'s ``last``):
    the limits, as every child inherits them; the first run request carries none unless they
    changed since, so a service of an older install (``bench/api_overhead.py --against``) reads it."""
    return None, None, rlimits.now()


def changed(last: tuple) -> tuple[CallerEnv | None, tuple]:
    """What a run request carries (``api.service.Connection.send``): the environment, the umask
    and the resource limits each only where it differs from ``last`` (what the last run request
    sent, as this returned it; first what the service inherited, ``inherited``), None when none does; and what to record
    as sent once it was. The environment is compared as os.environ's own bytes mapping where
    CPython has one (no entry decoded, nothing copied unless it changed); a umask or limits
    changed alone send no environment."""
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):
        data = dict(os.environ)
    mask = umask_now()
    limits = rlimits.now()
    if data == last[0] and mask == last[1] and limits == last[2]:
        return None, last
    env = last[0] if data == last[0] else dict(data)
    sent = CallerEnv(
        None if env is last[0] else as_text(env),
        None if mask == last[1] else mask,
        None if limits == last[2] else rlimits.as_sent(limits),
    )
    return sent, (env, mask, limits)


def whole() -> CallerEnv:
    """This process's environment, umask and resource limits as they are now, whole (a batch's or
    a benchmark's request: its process takes them as its own, and its children the limits)."""
    return CallerEnv(dict(os.environ), umask_now(), rlimits.as_sent(rlimits.now()))


def as_text(environment: dict) -> dict[str, str]:
    """A ``changed`` copy of os.environ's mapping as ``os.environ`` shows it (text)."""
    if all(isinstance(key, str) for key in environment):
        return environment
    return {os.fsdecode(key): os.fsdecode(value) for key, value in environment.items()}


def umask_now() -> int:
    """This process's umask, read without leaving it changed. POSIX reads it only by setting it,
    and two Python calls (set a placeholder, put it back) can be split: a second thread reading
    between them, or a signal handler raising there, left the whole process at the placeholder
    for good. So: one C call that sets and restores under a mutex (``csrc/umask.c``, under 1 µs;
    for that instant the whole process's umask is ``077``), and without the C module
    ``/proc/self/status``'s ``Umask:`` line, which only reads (~15 µs; a lock would keep out
    threads, not a handler's exception between the two calls)."""
    native = native_module()
    if native is not None:
        return native.lib.pk_umask_now()
    return _status_umask()


def _status_field(name: bytes) -> bytes | None:
    """The value of ``/proc/self/status``'s ``name:`` line, None when the kernel shows none. The
    file is read whole, as every kernel file is (``cgroupfs.read_bytes``: one read of its 1.5 KB,
    refused past its bound): a head would miss a line after a long ``Groups:`` one."""
    return status_fields(read_bytes("/proc/self/status"), (name,)).get(name)


def _status_umask() -> int:
    """The ``Umask:`` line of ``/proc/self/status``."""
    found = _status_field(b"Umask")
    if found is None:  # a kernel before 4.7 shows no Umask: line; the two calls are the read left
        mask = os.umask(0o077)
        os.umask(mask)
        return mask
    return int(found, 8)


def reads_any_file() -> bool:
    """Whether this process reads a file whatever its mode says: ``CAP_DAC_OVERRIDE`` or
    ``CAP_DAC_READ_SEARCH`` in its effective set (``/proc/self/status``'s ``CapEff:``), as root
    has them, and root under ``setpriv --bounding-set=-dac_override,...`` has not."""
    try:
        effective = int(_status_field(b"CapEff") or b"0", 16)
    except (OSError, ValueError):
        return os.geteuid() == 0
    return bool(effective & (1 << 1 | 1 << 2))  # capability(7): DAC_OVERRIDE 1, DAC_READ_SEARCH 2


def service_environment() -> dict[str, str]:
    """The caller's environment, with this processkit first on the service's import path (a
    caller may have found it through its own ``sys.path``). The runs' own environment is the
    caller's, sent with the requests."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env

"""What of the caller's environment its runner service sees: the variables a service reads once
when it starts (a change of them starts a fresh service, ``fingerprint``), the environment each
request carries (sent again only when it changed, ``environment_now``/``as_text``), and the
service's own start-up environment (``service_environment``)."""

from __future__ import annotations

import os

from ..native import module as native_module

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


_PLACES = tuple(os.fsencode(name) for name in PLACES)
STATUS_HEAD = 512  # bytes of /proc/self/status read for its Umask: line (Name: is at most 64 bytes)
_KEPT: list[tuple[dict | None, tuple]] = [(None, ())]  # (os.environ's bytes when last asked, their fingerprint)


def environment_now() -> tuple[dict, int]:
    """This process's environment as it is now, to compare with the last one sent: os.environ's
    own bytes mapping where CPython has one (copied without decoding every entry), and its
    umask (``umask_now``): the service was started under the umask of the first call, and a run
    is made under its caller's of its own call, as ``subprocess``'s child would be."""
    data = getattr(os.environ, "_data", None)
    return (dict(data) if isinstance(data, dict) else dict(os.environ)), umask_now()


def as_text(now: tuple[dict, int]) -> tuple[dict[str, str], int]:
    """An ``environment_now`` copy as ``os.environ`` shows it (text): the one snapshot both
    compared and sent, so what is recorded as sent is what was sent."""
    environment, mask = now
    if all(isinstance(key, str) for key in environment):
        return environment, mask
    return {os.fsdecode(key): os.fsdecode(value) for key, value in environment.items()}, mask


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


def _status_umask() -> int:
    """The ``Umask:`` line of ``/proc/self/status`` (the second line: its first ``STATUS_HEAD``
    bytes hold it)."""
    fd = os.open("/proc/self/status", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        head = os.read(fd, STATUS_HEAD)
    finally:
        os.close(fd)
    start = head.find(b"\nUmask:") + 7
    if start < 7:  # a kernel before 4.7 shows no Umask: line; the two calls are the read left
        mask = os.umask(0o077)
        os.umask(mask)
        return mask
    return int(head[start : head.index(b"\n", start)], 8)


def service_environment() -> dict[str, str]:
    """The caller's environment, with this processkit first on the service's import path (a
    caller may have found it through its own ``sys.path``). The runs' own environment is the
    caller's, sent with the requests."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env

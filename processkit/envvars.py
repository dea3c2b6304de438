"""processkit's own settings read from the environment (``PROCESSKIT_*``) as ``os.environ.get``
reads them, at a fraction of its cost: a run asks several (accounting, containment, the cgroup
roots), most of them not set, and ``Mapping.get`` answers a name that is not set by raising and
catching a KeyError inside ``os.environ`` (about 2.3 µs each, against 0.3 here)."""

from __future__ import annotations

import os


def get(name: str) -> str | None:
    """``os.environ.get(name)`` for an ASCII ``name``: read live (a caller's or a test's change
    shows at once) from ``os.environ``'s own mapping where it has one (CPython's POSIX
    ``os.environ`` keeps bytes, encoded and decoded by the file system's encoding, as here)."""
    raw = getattr(os.environ, "_data", None)
    if type(raw) is not dict:
        return os.environ.get(name)
    value = raw.get(name.encode())
    return None if value is None else os.fsdecode(value)


WHOLE_NUMBER_DIGITS = 9  # a setting past this many digits is no setting (int() refuses past 4,300)


def whole_number(name: str, default: int) -> int:
    """A setting of whole units (``[0-9]+``, at most WHOLE_NUMBER_DIGITS digits), else ``default``:
    for the knobs tests set, which read nothing else and refuse nothing (an environment's value of
    thousands of digits made every run an internal error)."""
    value = get(name) or ""
    return int(value) if value.isascii() and value.isdigit() and len(value) <= WHOLE_NUMBER_DIGITS else default

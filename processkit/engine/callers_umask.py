"""The caller's umask, where a run is carried for another process (``RunContext.umask``: the API's
runner service, which carries the runs of every thread of its caller): what the run makes for
its caller is made under it, as ``processkit-cli`` started by the caller then would make it,
and nothing else is.

- The child takes it (as ``subprocess``'s does): the spawn is made under it, and the clone copies
  it (no ``CLONE_FS``: the native child has its own copy, as Popen's forked one has).
- The files at the paths the spec names (its capture directory and files, its stream) take it;
  a stand-in's place (``RunContext.places``: the carrier's own scratch and memory) is the
  carrier's own file and keeps the carrier's umask, so a caller's ``0o277`` or ``0o777`` never
  refuses the carrier its own files.
- Each is one call with no step of another run between its set and its restore (the carrier
  has one thread, and these calls never yield), so no other run sees it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, TypeVar

    from ..context import RunContext

    T = TypeVar("T")


def made(context: RunContext, named: str | None, make: Callable[..., T], /, *args, **kwargs) -> T:
    """``make(*args, **kwargs)``, which makes the file the spec names at ``named`` (None: the spec
    names none), under the caller's umask unless ``named`` is a stand-in (the carrier's own)."""
    if named is None or (context.places is not None and named in context.places):
        return make(*args, **kwargs)
    return under(context.umask, make, *args, **kwargs)


def under(mask: int | None, make: Callable[..., T], /, *args, **kwargs) -> T:
    """``make(*args, **kwargs)`` under ``mask`` (None: this process's own), then this process's
    own umask back: the child's spawn takes the caller's this way."""
    if mask is None:
        return make(*args, **kwargs)
    before = os.umask(mask)
    try:
        return make(*args, **kwargs)
    finally:
        os.umask(before)

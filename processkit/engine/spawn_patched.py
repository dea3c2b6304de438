"""A spawn's envp made from the last spawn's whole one, with the entries whose values changed put
in (``engine/spawn_native.py`` keeps the whole one; this module is its patching).

A ``bench`` session's runs differ from the first in one variable (its iteration): each one's
envp is the whole one's pointers with that entry's own string put in, not every string joined
and pointed at again (~20 us a spawn). Apart from ``spawn_native`` because a CLI ``run`` spawns
once and never patches: its byte-code bundle is without this class and code (bench/README.md,
"Start-up (issue 49, start56)"); a session imports it at its second spawn.
"""

from __future__ import annotations

import os

PATCHED_MOST = 4  # past this many values changed from the whole envp's, one is made whole again


def patched(whole, ffi, env) -> Patched | None:
    """The envp of ``env``, whose keys are those of ``whole`` (``spawn_native._Whole``) in their
    order, from its pointers (read out on the first patch: a one-spawn run never patches, ~3.5 us
    spared); None where more than PATCHED_MOST values differ."""
    values = list(env.values())
    changed = [index for index, (value, was) in enumerate(zip(values, whole.values)) if value != was]
    if len(changed) > PATCHED_MOST:
        return None
    if whole.pointers is None:
        whole.pointers = [whole.strings.array[index] for index in range(whole.strings.count)]
    return Patched(ffi, whole, [(index, whole.keys[index], values[index]) for index in changed])


class Patched:
    """A whole envp with some entries' strings of its own: a pointer array of its own, and the
    whole one's strings and its own held while a child may read them."""

    __slots__ = ("array", "count", "_held")

    def __init__(self, ffi, whole, changes: list[tuple[int, str, str]]) -> None:
        pointers = [*(whole.pointers or ()), ffi.NULL]
        held: list = [whole.strings]
        for index, key, value in changes:
            held.append(ffi.new("char[]", os.fsencode(key) + b"=" + os.fsencode(value)))
            pointers[index] = held[-1]
        self.array = ffi.new("char *[]", pointers)
        self.count = whole.strings.count
        self._held = held

"""The descriptors a caller hands a run's child: its own standard streams, and the API's.

A run that is not this process's own (the API's runner service) gives the child copies of the
caller's standard streams where the spawn made no end of its own (``RunContext.stdio``), and a
call may give descriptors of its own for any of 0-2 (``RunContext.child_fds``) or merge stderr into
stdout (``stderr=STDOUT``). Apart from ``spawn`` as a job of its own, and imported only by a
spawn that has such a caller: a plain ``run`` gives neither and does not load it. ``wire``
writes into the two lists the spawn holds, so whatever it made before a failure is closed by
the spawn's one cleanup.
"""

from __future__ import annotations

import os


def wire(
    child_ends: list[int],
    runner_ends: list[int | None],
    inherit: tuple[int, int, int] | None,
    given: tuple[int | None, int | None, int | None] | None,
    merged: bool,
    terminal: bool,
) -> None:
    """``inherit``'s copies into the child's ends still -1, then (without a terminal) the given
    descriptors and the merge in place of the ends the spawn made."""
    if inherit is not None:  # a copy each, closed by the spawn as every child end
        for index in (0, 1, 2):
            if child_ends[index] < 0:
                child_ends[index] = os.dup(inherit[index])
    if (given is not None or merged) and not terminal:
        _given_ends(given, merged, child_ends, runner_ends)


def _given_ends(given, merged: bool, child_ends: list[int], runner_ends: list[int | None]) -> None:
    """The API's own descriptors in place of the ends made above (``RunContext.child_fds``), and
    ``stderr=STDOUT`` (``merged``): the child's 2 a copy of whatever its 1 is, and no stderr
    pipe for the runner to read. Each replaced end is closed here, each new one is the spawn's
    copy (non-inheritable, closed once the child has its own)."""
    replaced = [index for index, fd in enumerate(given or (None, None, None)) if fd is not None]
    for index in [*replaced, 2] if merged else replaced:
        runner_end, runner_ends[index] = runner_ends[index], None
        for fd in (child_ends[index], runner_end):
            if fd is not None and fd >= 0:
                os.close(fd)
        child_ends[index] = -1
    for index in replaced:
        child_ends[index] = os.dup(given[index])
    if merged:
        child_ends[2] = os.dup(child_ends[1] if child_ends[1] >= 0 else 1)

"""The launcher's descriptors that input paths name (``--stdin-file``, ``--env-file``:
``/dev/stdin``, ``/dev/fd/N``, ``options.named_fd``), as ``run --detach`` hands them to its copy
(cli/detach.py)."""

from __future__ import annotations

import os

from ..errors import Failure, Kind

# what the launcher's standard output and error are named in a refusal: the copy's are /dev/null
_STANDARD = {1: "standard output", 2: "standard error"}


def handed_inputs(named: set[int]) -> set[int]:
    """The launcher's own open descriptors among those input paths (``--stdin-file``,
    ``--env-file``) name (``options.named_fd``), which the copy must be handed under the same
    numbers: with null stdio it would read ``/dev/null`` there, the caller's input lost without a
    word. Descriptors that are not open, and a terminal (a detached run would read the caller's
    keys from under its shell), are left to the copy. A named 1 or 2 (``/dev/fd/1`` on a pipe)
    is refused, a usage error: the copy's stdout and stderr are /dev/null, which it would read."""
    handed = set()
    for fd in named:
        if fd in _STANDARD:
            raise Failure(
                Kind.USAGE,
                f"--detach cannot hand on /dev/fd/{fd}, the launcher's {_STANDARD[fd]} (the detached "
                "run's is /dev/null): give --stdin-file or --env-file another descriptor (3<FILE, /dev/fd/3)",
            )
        try:
            os.fstat(fd)
        except OSError:
            continue
        if not os.isatty(fd):
            handed.add(fd)
    return handed


def unnamed(fd: int, named: set[int]) -> int:
    """``fd`` (the copy's end of the readiness pipe, which it keeps under its number) moved to a
    number no input path names: an unopened ``/dev/fd/N`` is the copy's to refuse, never its pipe."""
    import fcntl

    while fd in named:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, fd + 1)
        os.close(fd)
        fd = moved
    return fd

"""Why a run's boundary could not be made: the two containment failures (both exit 102).

They live apart from ``base`` so that the cap layer (``limits``) can raise them without
importing the container it is layered on.
"""

from __future__ import annotations

import errno


class ContainerError(Exception):
    """The container could not be created or joined (exit 102)."""


class LimitUnavailable(ContainerError):
    """A requested resource cap cannot be enforced here (``limit_hit``, then exit 102)."""

    def __init__(self, limit: str, detail: str):
        super().__init__(f"cannot enforce the {limit} limit: {detail}")
        self.limit = limit
        self.detail = detail


def failed(message: str, exc: OSError) -> Exception:
    """What a step of the boundary that failed with ``exc`` raises: a ``ContainerError`` saying
    ``message``, but where the runner is out of descriptors (``EMFILE``, ``ENFILE``) ``exc``
    itself, which the run's failure names as the open-file limit (``fdlimit.unexpected``):
    a 102 quoting ``[Errno 24] Too many open files`` of a ``cpu.stat`` blamed the container."""
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return exc
    return ContainerError(message)

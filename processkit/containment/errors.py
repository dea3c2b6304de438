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


class OutOfDescriptors(ContainerError):
    """A step of the boundary met ``EMFILE``/``ENFILE``: the runner's open-file limit, not the
    boundary's failure; a run says it as the limit's set-up failure (``engine.launch``), where a
    102 quoting ``[Errno 24] Too many open files`` of a ``cpu.stat`` blamed the container."""


def failed(message: str, exc: Exception) -> ContainerError:
    """What a step of the boundary that failed with ``exc`` raises, saying ``message``."""
    out = getattr(exc, "errno", None) in (errno.EMFILE, errno.ENFILE)
    return (OutOfDescriptors if out else ContainerError)(message)

"""Why a run's boundary could not be made: the two containment failures (both exit 102).

They live apart from ``base`` so that the cap layer (``limits``) can raise them without
importing the container it is layered on.
"""

from __future__ import annotations


class ContainerError(Exception):
    """The container could not be created or joined (exit 102)."""


class LimitUnavailable(ContainerError):
    """A requested resource cap cannot be enforced here (``limit_hit``, then exit 102)."""

    def __init__(self, limit: str, detail: str):
        super().__init__(f"cannot enforce the {limit} limit: {detail}")
        self.limit = limit
        self.detail = detail

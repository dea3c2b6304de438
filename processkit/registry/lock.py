"""A run's registry lock: the ``<stem>.lock`` a live runner holds (docs/control-plane.md §2.2, §2.4).

The liveness rules themselves (``Health``, ``probe``) are ``processkit.liveness``'s; they are
named here too because every registry reader asks them of a registry lock.
"""

from __future__ import annotations

import os
import time

from ..liveness import Health, probe, take
from ..errors import os_error_words
from ..plain import counter
from .location import RegistryError

__all__ = ["CREATE_ATTEMPTS", "Health", "create", "probe"]

CREATE_ATTEMPTS = 128
_sequence = counter()


def create(directory: str) -> tuple[str, int]:
    """A fresh ``<stem>.lock`` held exclusively: returns the stem and the held descriptor."""
    for _ in range(CREATE_ATTEMPTS):
        stem = f"run-{time.time_ns():032x}-{next(_sequence):016x}"
        try:
            fd = take(os.path.join(directory, stem + ".lock"), 0o666)
        except OSError as exc:
            raise RegistryError(os_error_words(exc)) from None  # the reference says the error alone
        if fd is not None:
            return stem, fd
    raise RegistryError("could not allocate a unique registry entry after many attempts")  # the reference's words

"""At the caller's exit, each connection of this process's with no request open is closed (its
service ends as at the exit) and, as a fork's, never waited for here, so neither its socket nor
its Popen is left to the interpreter's last collection to warn of (``-X dev``, a pytest run). One
a call still uses (a daemon thread's, mid-call) is left. Registered as ``service`` is loaded, so it
runs before the exit hooks its caller registered before its first call."""

from __future__ import annotations

import atexit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


def watch(live: Iterable) -> None:
    """Look at ``live`` (``service.Connection``'s weak set of this process's) at the exit."""
    atexit.register(_closed_at_exit, live)


def _closed_at_exit(live: Iterable) -> None:
    for found in list(live):
        if not found.gone and found.closed_if_idle():  # a fork's child's are gone (``Connection.forked``)
            found.process.returncode = 0

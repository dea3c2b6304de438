"""A batch of ``processkit.batch``, in the process the runner service forks for it.

The batch engine takes the stop signals and, for a process-group job, the subreaper flag of the
process it runs in: here that is this process, never the caller's. It talks to the caller over a
connection of its own (passed through the service): a stop is a word written to it, and its
end of file (the caller gone) stops the batch as a stop signal would; the summary lines, or the
failure that kept the batch from starting, are the one frame written back.
"""

from __future__ import annotations

import os
import socket

from ..batching.on_host import run_batch
from ..batching.index import PageProcess
from ..containment import prctl
from ..errors import Failure
from ..api import wire


def serve(connection: int, jobs, settings, cwd: str, env: dict) -> int:
    """Run the batch from the caller's working directory and environment; returns this
    process's exit status."""
    prctl.set_parent_death_signal(15)  # SIGTERM: a stop signal, so the jobs still release
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sock = socket.socket(fileno=connection)
    page = PageProcess(settings.out)
    try:
        lines, _ = run_batch(jobs, settings, signals=True, stop_fd=connection)
    except Failure as failure:
        page.abandon()
        reply: tuple = ("failure", 0, failure.kind.label, failure.message, failure.code)
    except BaseException as exc:  # noqa: BLE001 - the caller learns of it, then it goes on
        page.abandon()
        reply = ("error", 0, f"{type(exc).__name__}: {exc}")
    else:
        page.draw()
        reply = ("lines", 0, lines)
    try:
        sock.setblocking(True)
        wire.send(sock, reply)
    except OSError:
        pass  # the caller is gone
    sock.close()
    return 0

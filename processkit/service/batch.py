"""A batch of ``processkit.batch``, in a process the runner service starts for it by exec.

Facts that shape it:
- The batch engine takes the stop signals and, for a process-group job, the subreaper flag of
  the process it runs in: here that is this process, never the caller's nor the service's.
- It is started by exec (``start``), as the service itself is: a fork of the service would
  carry its live runs, its reaper's table of roots, its C hash threads and objects whose
  finalisers close descriptors into the batch. The request (jobs, settings, the caller's
  working directory and environment) reaches it in a memfd, written whole before the exec, so
  no pipe write holds up the service's loop.
- It talks to the caller over a connection of its own (passed through the service): a stop is
  a word written to it, and its end of file (the caller gone) stops the batch as a hang-up
  would; the summary lines, or the failure that kept the batch from starting, are the one frame
  written back.
- The caller's soft open-file limit comes back before the batch begins (the service raised its
  own), so the batch's jobs get the caller's, as ``run``'s child does.
- Its parent-death signal (SIGTERM, a stop signal: the jobs still release) is armed first
  thing, and its parent checked after, so a service that died before is not missed.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys

from .. import fdlimit
from ..api import wire
from ..writeall import write_all


def start(connection: int, request: tuple) -> int:
    """Start the batch's process for ``request`` on ``connection``; its pid. Raises OSError
    when it cannot be started (the caller is then told by ``refuse``)."""
    payload = os.memfd_create("processkit-batch", os.MFD_CLOEXEC)
    try:
        write_all(payload, pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))
        os.lseek(payload, 0, os.SEEK_SET)  # the batch reads it from its start
        argv = [
            sys.executable,
            "-c",
            "from processkit.service.batch import main; main()",
            str(connection),
            str(payload),
            str(os.getpid()),
            str(fdlimit.child_soft_limit() or 0),
        ]
        for fd in (connection, payload):
            os.set_inheritable(fd, True)
        try:
            return os.posix_spawn(sys.executable, argv, os.environ)
        finally:
            os.set_inheritable(connection, False)
    finally:
        os.close(payload)


def refuse(connection: int, problem: OSError) -> None:
    """Tell the caller its batch could not be started (one frame, best effort)."""
    message = f"cannot start the batch's process: {problem.strerror or problem}"
    try:
        sock = socket.socket(fileno=os.dup(connection))
    except OSError:
        return
    try:
        sock.setblocking(True)
        wire.send(sock, ("failure", 0, "setup", message, 111))
    except OSError:
        pass
    finally:
        sock.close()


def main() -> int:
    """The batch's process: its request read, the batch run from the caller's working
    directory and environment, the one reply written."""
    from ..containment import prctl

    connection, payload, parent, caller_soft = (int(arg) for arg in sys.argv[1:5])
    prctl.set_parent_death_signal(15)  # SIGTERM: a stop signal, so the jobs still release
    if os.getppid() != parent:
        return 0
    if caller_soft:  # the service raised its open-file limit: the caller's back, so the batch
        import resource  # raises it again and gives its jobs the caller's (``fdlimit``)

        resource.setrlimit(resource.RLIMIT_NOFILE, (caller_soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    with os.fdopen(payload, "rb") as handle:
        jobs, settings, cwd, env = pickle.load(handle)
    return serve(connection, jobs, settings, cwd, env)


def serve(connection: int, jobs, settings, cwd: str, env: dict) -> int:
    """Run the batch; returns this process's exit status."""
    from ..batching.index import PageProcess
    from ..batching.on_host import run_batch
    from ..errors import Failure

    sock = socket.socket(fileno=connection)
    page = None
    try:
        os.chdir(cwd)
        os.environ.clear()  # this process's own: it carries this one caller's batch and no other
        os.environ.update(env)
        page = PageProcess(settings.out)
        lines, _ = run_batch(jobs, settings, signals=True, stop_fd=connection)
    except Failure as failure:
        reply: tuple = ("failure", 0, failure.kind.label, failure.message, failure.code)
    except OSError as exc:
        reply = ("failure", 0, "setup", f"cannot run the batch: {exc.strerror or exc}", 111)
    except BaseException as exc:  # noqa: BLE001 - the caller learns of it, then it goes on
        reply = ("error", 0, f"{type(exc).__name__}: {exc}")
    else:
        page.draw()
        reply = ("lines", 0, lines)
    if reply[0] != "lines" and page is not None:
        page.abandon()
    try:
        sock.setblocking(True)
        wire.send(sock, reply)
    except OSError:
        pass  # the caller is gone
    sock.close()
    return 0

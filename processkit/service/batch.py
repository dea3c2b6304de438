"""A batch of ``processkit.batch``, in a process the runner service starts for it by exec
(``spawned``: why exec, how its request arrives, its limit and its parent-death signal).

Facts that shape it:
- The batch engine takes the stop signals and, for any job, the subreaper flag of the process
  it runs in: here that is this process, never the caller's nor the service's.
- It talks to the caller over a connection of its own (passed through the service): a stop is
  a word written to it, and its end of file (the caller gone) stops the batch as a hang-up
  would; the summary lines, or the failure that kept the batch from starting, are the one frame
  written back, with the batch's warnings (``said``): its stderr is the service's, which nobody
  reads, so the caller warns them (``processkit.BatchWarning``), as the CLI's batch prints them.
"""

from __future__ import annotations

import socket

from . import spawned

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..api.caller_env import CallerEnv


def main() -> int:
    """The batch's process: its request read, the batch run from the caller's working
    directory and environment, the one reply written."""
    begun = spawned.begin()
    if begun is None:
        return 0
    (jobs, settings, cwd, caller), connection, _ = begun
    return serve(connection, jobs, settings, cwd, caller)


def serve(connection: int, jobs, settings, cwd: str, caller: CallerEnv) -> int:
    """Run the batch; returns this process's exit status."""
    from ..batching.index import PageProcess
    from ..batching.on_host import run_batch
    from ..engine.stop_raise import Stopped
    from ..errors import Failure, Kind
    from ..mountinfo import refuse_foreign_proc

    sock = socket.socket(fileno=connection)
    said = warnings_kept()
    page = None
    try:
        refuse_foreign_proc()  # 102 before any job, as the CLI's batch, not one 102 row a job
        spawned.take_place(cwd, caller)  # its --out's files and jobs as under the CLI
        page = PageProcess(settings.out)
        lines, counts = run_batch(jobs, settings, signals=True, stop_fd=connection)
    except (Failure, Stopped) as exc:  # Stopped: a stop while its --out was set up, no job started
        failure = exc if isinstance(exc, Failure) else Failure(Kind.CANCELLED, exc.sentence())
        reply: tuple = ("failure", 0, failure.kind.label, failure.message, failure.code)
    except OSError as exc:
        reply = ("failure", 0, "setup", f"cannot run the batch: {exc.strerror or exc}", 111)
    except BaseException as exc:  # noqa: BLE001 - the caller learns of it, then it goes on
        reply = ("error", 0, f"{type(exc).__name__}: {exc}")
    else:
        page.draw(counts.gone)
        reply = ("lines", 0, lines)
    if reply[0] != "lines" and page is not None:
        page.abandon()
    spawned.reply(sock, (*reply, tuple(said)))
    return 0


def warnings_kept() -> list[str]:
    """From now on, this process's warnings (``diagnostics.warn``) kept in the list returned, each
    without its program's prefix, for the reply; any other line of its own stays unread."""
    from .. import diagnostics

    said: list[str] = []
    warning = diagnostics.shown("warning: ")  # the prefix ``warn`` gives each of its lines

    def kept(text: str) -> None:
        for line in text.splitlines():
            if line.startswith(warning):
                said.append(line[len(warning) :])

    diagnostics.route(kept)
    return said

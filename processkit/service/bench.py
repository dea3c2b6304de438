"""A benchmark of ``processkit.bench``, in a process the runner service starts for it by exec
(``spawned``), given the caller's typed request (``api.bench.Benchmark``: the commands expanded,
``benchmark.plan.Options`` naming options by keyword) and answering with a typed frame.

Why a process of its own, not a group on the service's host: a benchmark owns the process it
runs in, for its whole length, in ways a host shared with the caller's other calls cannot give.
- It pins that process to ``cpus`` (``sched_setaffinity``), and every run inherits the pinning.
- After each run it ends whatever descendant is left (``ends_descendants``: a process group run's
  ``setsid`` daemon, a cgroup v2 run's process that moved itself to another group), which is
  only right where every child is the benchmark's.
- Its session is synchronous over the ``Executor`` seam (each ``measure`` carries one run to its
  end), so on the service's host it would hold up every other call of its caller for the
  benchmark's length; and the perf counters and the exit clock are opened around each run on
  this thread, measuring a loop no other run shares.
- A stop signal (Ctrl-C to the terminal) stops it through each run's release, as the CLI's.
So it is started by exec, as the batch's process is, with the request and the answer as values
(no command line, no export file read back, no environment variable saying who asked).

Facts that shape it:
- The caller's working directory and environment are this process's own (it carries this one
  benchmark): relative paths (``jsonl_dir``, ``output``, ``input_file``, ``baseline``) are the
  caller's, and every run's environment is the caller's, as the session reads it.
- Its standard output and error are the caller's when the request asks for them
  (``show_output``, an ``inherit`` output), else /dev/null: the service's own.
- It is stopped over its connection (a stop's source written to it, ``engine.stopfd``; its end of
  file, the caller gone, as a hang-up), or by a stop signal of its own.
- Its one frame back: ``("result", 0, BenchResult)``, ``("failure", 0, kind, message, code)``
  (a ``Kind``, pickled as itself), ``("stopped", 0, source, message)``, or ``("error", 0, text)``.
"""

from __future__ import annotations

import os
import socket

from . import spawned

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..api.bench import Benchmark


def main() -> int:
    """The benchmark's process: its request read, the benchmark run, the one reply written."""
    begun = spawned.begin()
    if begun is None:
        return 0
    request, connection, stdio = begun
    from ..diagnostics import envelope_only

    envelope_only()  # warnings have no reader here: a failure travels in the reply
    for target, fd in zip((1, 2), stdio):  # the caller's, for the commands' output it lets through
        os.dup2(fd, target)
        os.close(fd)
    sock = socket.socket(fileno=connection)
    spawned.reply(sock, answer(request, connection))
    return 0


def answer(request: Benchmark, stop_fd: int) -> tuple:
    """Run the benchmark ``request`` describes, from the caller's working directory and with its
    environment; its reply."""
    from ..benchmark import against, bench_commands, perf_switch
    from ..benchmark import options as measured_options
    from ..benchmark.session import Stopped
    from ..benchmark.shortfall import shortfall
    from ..errors import Failure, Kind
    from ..mountinfo import refuse_foreign_proc

    perf_switch.turn_on()  # the kernel's grace period waited out beside the set-up (perf_switch.py)
    try:
        refuse_foreign_proc()  # 102, as the CLI's bench, not a 118 from its first run
        spawned.take_place(request.cwd, request.caller)  # its exports and runs as under the CLI
        options = request.options
        earlier = against.read(request.baseline)  # checked before the first run
        measured_options.make_jsonl_dir(options)
        result = bench_commands(request.commands, options, stop_fd=stop_fd)
        if earlier is not None:
            assert request.baseline is not None
            against.attach(result, earlier, request.baseline, request.fail_if_slower, options)
        failure = shortfall(result, options)
        if failure is not None:
            raise failure
        against.check_gate(result)
    except Stopped as stopped:
        return ("stopped", 0, stopped.source, stopped.message)
    except KeyboardInterrupt:  # SIGINT while the baseline was read, before the session began
        return ("stopped", 0, "ctrl_c", "benchmark stopped by a signal")
    except Failure as failure:
        return ("failure", 0, failure.kind, failure.message, failure.code)
    except OSError as exc:
        return ("failure", 0, Kind.SETUP, f"cannot run the benchmark: {exc.strerror or exc}", Kind.SETUP.code)
    except BaseException as exc:  # noqa: BLE001 - the caller learns of it, then this process ends
        return ("error", 0, f"{type(exc).__name__}: {exc}")
    return ("result", 0, result)

"""What ``processkit.run`` costs next to ``subprocess.run``, from a warm interpreter (issue 37).

Three figures, each measured side by side with ``subprocess.run`` in this one run:

- sequential: ``subprocess.run(["true"])`` and ``processkit.run(["true"])`` called in alternating
  pairs, then the same for ``["echo", "x"]`` with ``capture_output=True`` (load from elsewhere hits both alike); medians, p90, and the median of the per-pair
  ratio. CPU times: this process's own per call (``RUSAGE_SELF``) and the runner service's
  (read from its ``/proc/<pid>/stat``), which load from elsewhere hardly moves; and how often
  the calling thread slept per call (its voluntary context switches, ``RUSAGE_THREAD``).
- threads: 8 threads calling ``processkit.run(["true"])`` (then ``subprocess.run``) for
  ``--calls`` calls each round between them (3200: 400 a thread), alternating, ``--rounds`` rounds; the median calls per second.
- a SIGKILLed caller: a caller with runs in flight (a capture, an ``input=``, a live stream) is
  SIGKILLed; after 1 s the processes, cgroups, registry records and scratch files it left are
  counted, and the time the service took to end is shown.

``--profile FILE`` writes a cProfile of the runner service over the sequential calls instead;
``--against ROOT`` measures the sequential calls through this tree's service and through one
importing processkit from ROOT (another commit's checkout), in alternating pairs.

    python3 bench/api_overhead.py -n 201 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import processkit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_modules import service, shared  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def service_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds the service process has used itself, and its reaped children (the runs' roots).
    Its own in nanoseconds where the kernel keeps ``schedstat`` (its one thread's time on a CPU),
    not in clock ticks: 201 calls of ~1 ms are 20 ticks, read ±1."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / TICKS
    try:
        with open(f"/proc/{pid}/schedstat") as handle:
            own = int(handle.read().split()[0]) / 1e9 or own
    except (OSError, ValueError, IndexError):
        pass
    return own, (int(fields[13]) + int(fields[14])) / TICKS


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# The sequential figures: (what is called, processkit's call, subprocess's call), each pair side by side.
SEQUENTIAL = (
    ("['true']", lambda: processkit.run(["true"]), lambda: subprocess.run(["true"])),
    (
        "['echo', 'x'], capture_output=True",
        lambda: processkit.run(["echo", "x"], capture_output=True),
        lambda: subprocess.run(["echo", "x"], capture_output=True),
    ),
)


def sequential(n: int) -> None:
    for label, ours, theirs in SEQUENTIAL:
        pair(n, label, {f"subprocess.run({label})": theirs, f"processkit.run({label})": ours})


def pair(n: int, label: str, ways: dict, services: dict | None = None) -> None:
    """``n`` alternating calls of each way (who goes first alternates too): medians, p90, the
    median per-pair ratio, and CPU per call (the caller's; the service's and its children's).
    ``services``: way -> the pid of the service it calls (default: processkit's ways, this
    process's service)."""
    for _ in range(20):
        for call in ways.values():
            call()
    if services is None:
        services = {name: shared.connection().pid for name in ways if name.startswith("processkit")}
    walls: dict[str, list[float]] = {name: [] for name in ways}
    own: dict[str, float] = dict.fromkeys(ways, 0.0)
    sleeps: dict[str, int] = dict.fromkeys(ways, 0)  # the calling thread's voluntary context switches
    served = {name: [0.0, 0.0] for name in services}
    for index in range(n):
        order = list(ways) if index % 2 == 0 else list(reversed(ways))  # alternate who goes first
        for name in order:
            pid = services.get(name)
            cpu, before_service = own_cpu(), service_cpu(pid) if pid else (0.0, 0.0)
            slept = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
            started = time.perf_counter()
            ways[name]()
            walls[name].append(time.perf_counter() - started)
            sleeps[name] += resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - slept
            own[name] += own_cpu() - cpu
            if pid:
                after_service = service_cpu(pid)
                served[name] = [
                    total + after - before for total, after, before in zip(served[name], after_service, before_service)
                ]
    print(f"sequential {label}: {n} alternating pairs, load average {os.getloadavg()[0]:.1f}")
    for name, values in walls.items():
        ordered = sorted(values)
        print(
            f"  {name:50s} median {statistics.median(values) * 1000:6.2f} ms, p90 {ordered[int(len(ordered) * 0.9)] * 1000:6.2f} ms;"
            f" CPU per call: caller {own[name] / n * 1000:5.2f} ms (sleeps {sleeps[name] / n:.2f})"
            + (
                f", service {served[name][0] / n * 1000:5.2f} ms, its child {served[name][1] / n * 1000:5.2f} ms"
                if name in served
                else ""
            )
        )
    names = list(ways)
    ratios = [api / plain for plain, api in zip(walls[names[0]], walls[names[1]])]
    print(f"  {names[1]} / {names[0]}, median of per-pair ratios: {statistics.median(ratios):.2f}x")


def threaded(rounds: int, calls: int, threads: int = 8) -> None:
    def rate(call) -> float:
        left = [calls]
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    if left[0] <= 0:
                        return
                    left[0] -= 1
                call()

        pool = [threading.Thread(target=worker) for _ in range(threads)]
        started = time.perf_counter()
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        return calls / (time.perf_counter() - started)

    ways = {
        "processkit.run(['true'])": lambda: processkit.run(["true"]),
        "subprocess.run(['true'])": lambda: subprocess.run(["true"]),
    }
    rates: dict[str, list[float]] = {name: [] for name in ways}
    pid = shared.connection().pid
    spent = [0.0, 0.0, 0]  # processkit's rounds: the caller's CPU, the service's, the caller's voluntary switches
    for index in range(rounds):
        for name in ways if index % 2 == 0 else reversed(list(ways)):
            cpu, served, switches = own_cpu(), service_cpu(pid)[0], resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
            rates[name].append(rate(ways[name]))
            if name.startswith("processkit"):
                spent[0] += own_cpu() - cpu
                spent[1] += service_cpu(pid)[0] - served
                spent[2] += resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - switches
    print(
        f"threads: {threads} threads, {calls} calls a round, {rounds} alternating rounds, load average {os.getloadavg()[0]:.1f}"
    )
    for name, values in rates.items():
        print(
            f"  {name:28s} median {statistics.median(values):6.0f} calls/s (rounds: {', '.join(f'{v:.0f}' for v in values)})"
        )
    total = calls * rounds
    print(
        f"  processkit per call: caller CPU {spent[0] / total * 1000:.2f} ms, service CPU {spent[1] / total * 1000:.2f} ms,"
        f" the caller's voluntary context switches {spent[2] / total:.1f}"
    )


CALLER = r"""
import json, os, sys, processkit
handles = [
    processkit.start(["sleep", "3737.25"], capture_output=True, input=b"data"),
    processkit.start(["sleep", "3737.25"]),
]
print(json.dumps({"service": handles[0].runner_pid, "roots": [next(iter(h.events())).root_pid for h in handles]}), flush=True)
processkit.run(["sleep", "3737.25"], capture_output=True)
"""


def killed_caller() -> None:
    from processkit.containment import cgroup_v2

    with tempfile.TemporaryDirectory(prefix="api-overhead-") as place:
        scratch, registry = os.path.join(place, "scratch"), os.path.join(place, "registry")
        os.mkdir(scratch, 0o700)
        os.mkdir(registry, 0o700)
        env = {**os.environ, "TMPDIR": scratch, "XDG_RUNTIME_DIR": scratch, "PROCESSKIT_CLI_REGISTRY_DIR": registry}
        caller = subprocess.Popen([sys.executable, "-c", CALLER], env=env, stdout=subprocess.PIPE)
        started = json.loads(caller.stdout.readline())
        while len(sleeps()) < 3:
            time.sleep(0.005)
        caller.kill()
        caller.wait()
        killed = time.monotonic()
        while alive(started["service"]) and time.monotonic() - killed < 10:
            time.sleep(0.001)
        ended = time.monotonic() - killed
        time.sleep(max(0.0, 1.0 - (time.monotonic() - killed)))
        parent = cgroup_v2.find_parent()
        groups = (
            []
            if parent is None
            else [n for n in os.listdir(parent) if n.startswith(f"processkit-{started['service']}-")]
        )
        records = [n for n in os.listdir(registry) if not n.endswith((".ended", ".outcomes"))]
        left = {
            "processes": len(sleeps()) + alive(started["service"]),
            "groups": len(groups),
            "records": len(records),
            "scratch files": sum(len(files) + len(dirs) for _, dirs, files in os.walk(scratch)),
        }
    print(
        f"a SIGKILLed caller (3 runs in flight): the service ended {ended * 1000:.0f} ms after the kill; after 1 s: {left}"
    )


def sleeps() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if handle.read() == b"sleep\x003737.25\x00":
                        found.append(int(entry))
            except OSError:
                pass
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def profiled(n: int, path: str) -> None:
    """The service run under cProfile over ``n`` sequential calls; the profile is written when it
    ends, at ``path`` as the caller names it (the service's working directory is not the caller's)."""
    path = os.path.abspath(path)
    plain = service.service_command

    def command(fd: int, caller: int) -> list[str]:
        run = f"import cProfile; from processkit.service.serve import main; cProfile.run('main()', {path!r})"
        return [*plain(fd, caller)[:2], run, *plain(fd, caller)[3:]]

    service.service_command = command  # type: ignore[assignment]
    connection = shared.connection()
    for _ in range(n):
        processkit.run(["true"])
    connection.close()  # the service sees its caller's end of file, ends, and writes the profile
    while alive(connection.pid):
        time.sleep(0.01)
    connection.process.wait()
    print(f"profile of the service over {n} calls: python3 -m pstats {path}")


# The service's phases timed by ``--phases``, a line each: the module, the function as that
# module reaches it (a class's method, or another module by the name it imported it under:
# ``launch.containment``), and the label printed (indented: inside the phase above).
PHASE_TABLE = """
processkit.service.serve    Service.readable            the request read (service)
processkit.service.inbound  problem                       the frame's checks (service)
processkit.service.request  Request.__init__              the request made (service)
processkit.service.request  Request.context             the run's context (service)
processkit.engine.launch    containment.create            the container taken (containment)
processkit.containment.pool Pool.take                       the four takes (containment)
processkit.engine.launch    prepare                     set-up (engine)
processkit.engine.launch    spawn.begin                   the spawn, its CPU (engine)
processkit.engine.launch    emit_snapshot                 the spawn snapshot (engine)
processkit.engine.launch    containment.restart_ahead     the next run's groups (containment)
processkit.engine.launch    start                       start (engine)
processkit.engine.launch    connect                     the output streams (engine)
processkit.engine.runner    _release                    the release (engine)
processkit.service.request  Request.keep_stream         the events pickled (service)
processkit.service.serve    Service.finished            the reply (service)
"""
PHASES = tuple(
    (line[:28].strip(), *line[28:56].strip().rpartition(".")[::2], line[56:].rstrip())
    for line in PHASE_TABLE.strip("\n").splitlines()
)
PHASE_SERVICE = r"""
import atexit, collections, importlib, time
spent = collections.Counter()
for module, holder, name, label in PHASES:
    try:
        owner = importlib.import_module(module)
        owner = getattr(owner, holder) if holder else owner
    except (ImportError, AttributeError):  # a tree without it
        continue
    plain = getattr(owner, name, None)
    if plain is None:  # a tree without it
        continue
    def phase(*args, plain=plain, label=label, **kwargs):
        started = time.thread_time_ns()
        try:
            result = plain(*args, **kwargs)
        finally:
            spent[label] += time.thread_time_ns() - started
        return timed(result, label) if hasattr(result, "send") else result
    setattr(owner, name, phase)
def timed(steps, label):  # a step that yields (launch.start): its time between the yields
    sent = None
    while True:
        started = time.thread_time_ns()
        try:
            wait = steps.send(sent)
        except StopIteration as stop:
            return stop.value
        finally:
            spent[label] += time.thread_time_ns() - started
        sent = yield wait
atexit.register(lambda: open(OUT, "w").write(repr(dict(spent))))
from processkit.service.serve import main
main()
"""


def phases(n: int) -> None:
    """The service's CPU per call in each of its phases (thread CPU time, wrapped around each
    function), over ``n`` sequential ``run(["true"])`` after 50 to warm it."""
    plain = service.service_command
    with tempfile.NamedTemporaryFile(prefix="api-phases-", suffix=".txt") as out:
        code = f"PHASES = {PHASES!r}\nOUT = {out.name!r}\n{PHASE_SERVICE}"

        def command(fd: int, caller: int) -> list[str]:
            return [sys.executable, "-c", code, *plain(fd, caller)[3:]]

        service.service_command = command  # type: ignore[assignment]
        connection = shared.connection()
        for _ in range(50):
            processkit.run(["true"])
        started = service_cpu(connection.pid)[0]
        for _ in range(n):
            processkit.run(["true"])
        spent_cpu = service_cpu(connection.pid)[0] - started
        connection.close()
        connection.process.wait()
        import ast

        spent = ast.literal_eval(open(out.name).read())  # a dict of ints this script's own child wrote
    service.service_command = plain  # type: ignore[assignment]
    print(
        f"the service's phases, CPU per call over {n + 50} calls of run(['true']), load average {os.getloadavg()[0]:.1f}:"
    )
    for _, _, _, label in PHASES:
        print(f"  {label:42s} {spent.get(label, 0) / (n + 50) / 1000:7.1f} us")
    print(f"  {'the service, all of it (last ' + str(n) + ' calls)':42s} {spent_cpu / n * 1e6:7.1f} us")


def against(n: int, root: str) -> None:
    """This tree's runner service against one importing processkit from ``root`` (another commit's
    checkout, its C module built or copied there): the sequential calls in alternating pairs,
    the same caller code sending to either."""
    plain = service.service_command

    def other(fd: int, caller: int) -> list[str]:
        code = f"import sys; sys.path.insert(0, {root!r}); from processkit.service.serve import main; main()"
        return [sys.executable, "-c", code, str(fd), str(caller)]

    connections = {}
    for name, command in ((f"service from {root}", other), ("this tree's service", plain)):
        service.service_command = command  # type: ignore[assignment]
        shared._connection = None
        connections[name] = shared.connection()
    service.service_command = plain  # type: ignore[assignment]

    def through(name: str, call):
        def sent() -> None:
            shared._connection = connections[name]
            call()

        return sent

    pids = {name: found.pid for name, found in connections.items()}
    for label, ours, _ in SEQUENTIAL:
        pair(n, label, {name: through(name, ours) for name in connections}, pids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=201, help="sequential pairs (default 201)")
    parser.add_argument("--rounds", type=int, default=5, help="threaded rounds (default 5)")
    parser.add_argument("--calls", type=int, default=800, help="calls a threaded round (default 800)")
    parser.add_argument("--profile", metavar="FILE", help="only write a cProfile of the service over -n calls")
    parser.add_argument("--only", choices=("sequential", "threads", "killed"), help="measure only this figure")
    parser.add_argument("--phases", action="store_true", help="only the service's CPU per call in each phase, -n calls")
    parser.add_argument(
        "--against", metavar="ROOT", help="only the sequential calls, this tree's service against one from ROOT"
    )
    args = parser.parse_args()
    if args.profile:
        profiled(args.n, args.profile)
        return
    if args.phases:
        phases(args.n)
        return
    if args.against:
        against(args.n, args.against)
        return
    if args.only in (None, "sequential"):
        sequential(args.n)
    if args.only in (None, "threads"):
        threaded(args.rounds, args.calls)
    if args.only in (None, "killed"):
        killed_caller()


if __name__ == "__main__":
    main()

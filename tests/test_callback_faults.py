"""A fault inside a callback one run put on the shared loop (its pipe's readiness, its timer) is
that run's own failure: it ends that run alone as the runner's (104, its tree killed, its stream
ended with ``runner_exit``), and the loop, the runner service and every other run it carries go
on. Before, the exception left the loop: the service ended with every run it carried
(``ServiceGone``), and ``run`` ended 104 with no ``runner_exit`` in its stream. A frame the
service could not take, and a control client whose reply raised, fail alone likewise.

The faults are injected by replacing one function in the process that carries the runs: the
service's (``service_command``), the CLI's (``patched_cli``)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import SAFETY_NET, pid_alive, read_events_tolerant, registry_entries, run_cli, start_cli, wait_for_event

# A service whose runs' output callback raises for the run whose command names FAULT.
FAULTY_READ = (
    "from processkit.engine import streams\n"
    "readable = streams.OutputStream._on_readable\n"
    "def faulty(self):\n"
    "    if 'FAULT' in self._run.spec.argv[-1]:\n"
    "        raise RuntimeError('injected fault')\n"
    "    readable(self)\n"
    "streams.OutputStream._on_readable = faulty\n"
)
# A service whose taking of the run request whose command names FAULT raises.
FAULTY_TAKE = (
    "from processkit.service import request\n"
    "refused = request.Request.refused\n"
    "def faulty(self):\n"
    "    if 'FAULT' in self.spec.argv[-1]:\n"
    "        raise RuntimeError('injected fault')\n"
    "    return refused(self)\n"
    "request.Request.refused = faulty\n"
)
# ... and one whose taking of it finds the open-file limit reached.
OUT_OF_DESCRIPTORS = FAULTY_TAKE.replace("RuntimeError('injected fault')", "OSError(24, 'Too many open files')")
# Two runs side by side on one service: the other is live (its first line read) while the faulty
# one runs, and ends after it on the test's word (its gate file); then the next call.
CALLER = r"""
import json, os, subprocess, sys, processkit
from processkit.api import service
patch, gate, jsonl = sys.argv[1:]
source = patch + "from processkit.service.serve import main; main()\n"
service.service_command = lambda fd, caller: [sys.executable, "-c", source, str(fd), str(caller)]
script = f"echo before; while [ ! -e {gate} ]; do sleep 0.01; done; echo after; exit 7"
other = processkit.start(["sh", "-c", script], stdout=subprocess.PIPE)
first = other.stdout.readline()
faulty = processkit.run(["sh", "-c", "echo FAULT $$; exec tail -f /dev/null"], capture_output=True, jsonl=jsonl)
open(gate, "w").close()
rest = other.stdout.read()
code = other.wait()
after = processkit.start(["echo", "next"], stdout=subprocess.PIPE)
print(json.dumps({
    "faulty": [faulty.returncode, faulty.message, faulty.stdout.decode()],
    "other": [code, (first + rest).decode()],
    "next": [after.wait(), after.stdout.read().decode()],
    "one_service": after.runner_pid == other.runner_pid,
}))
"""


def _two_runs(tmp_path, patch: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CALLER, patch, str(tmp_path / "gate"), str(tmp_path / "faulty.jsonl")],
        capture_output=True,
        timeout=SAFETY_NET,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return json.loads(done.stdout)


def test_a_runs_callback_that_raises_ends_that_run_alone_and_the_service_goes_on(tmp_path):
    seen = _two_runs(tmp_path, FAULTY_READ)
    code, message, stdout = seen["faulty"]
    assert (code, message) == (104, "internal error: RuntimeError: injected fault")
    assert stdout.startswith("FAULT ")
    assert not pid_alive(int(stdout.split()[1]))  # its tree killed by the run's teardown
    events = read_events_tolerant(tmp_path / "faulty.jsonl")
    assert events[-1]["event"] == "runner_exit"
    assert (events[-1]["code"], events[-1]["source"]) == (104, "internal")
    assert seen["other"] == [7, "before\nafter\n"]
    assert seen["next"] == [0, "next\n"]
    assert seen["one_service"]  # the same service carried the call after the fault


def test_a_run_request_the_service_could_not_take_fails_alone(tmp_path):
    seen = _two_runs(tmp_path, FAULTY_TAKE)
    assert seen["faulty"] == [104, "internal error: RuntimeError: injected fault", ""]  # none started: b""
    assert not (tmp_path / "faulty.jsonl").exists()  # never begun
    assert seen["other"] == [7, "before\nafter\n"]
    assert seen["next"] == [0, "next\n"]
    assert seen["one_service"]


def test_a_run_request_taken_out_of_descriptors_fails_alone_as_the_limit(tmp_path):
    """Said as the set-up failure it is (111, the limit named), as a run's set-up that met it is."""
    seen = _two_runs(tmp_path, OUT_OF_DESCRIPTORS)
    code, message, _ = seen["faulty"]
    assert code == 111
    assert message.startswith("no descriptor left to take the call: the open-file limit (ulimit -n: ")
    assert seen["other"] == [7, "before\nafter\n"]
    assert seen["one_service"]


def test_a_timer_that_raises_ends_the_run_as_the_runners_failure_with_its_teardown(tmp_path, isolated_registry):
    jsonl = tmp_path / "run.jsonl"
    child = ["sh", "-c", "echo $$; exec tail -f /dev/null"]  # it ends only by the run's teardown
    faulty = ("race", "_interval_snapshot", "lambda run, interval: 1 / 0")  # the cadence's timer
    done = run_cli("run", "--jsonl", jsonl, "--snapshot-interval", "10ms", "--", *child, patched=faulty, cwd=tmp_path)
    assert done.returncode == 104
    assert done.stderr.decode() == "processkit-cli: internal error: ZeroDivisionError: division by zero\n"
    assert not pid_alive(int(done.stdout))
    events = read_events_tolerant(jsonl)
    assert [e["event"] for e in events[-2:]] == ["cleanup_finished", "runner_exit"]
    assert (events[-1]["code"], events[-1]["source"]) == (104, "internal")
    assert registry_entries(isolated_registry) == []


# The cadence's timer meets the open-file limit (a real EMFILE: the soft limit lowered to the
# standard streams for its one dup, then set back).
EMFILE_TIMER = """
import os, resource
def faulty(run, interval):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (3, hard))
    try:
        os.close(os.dup(2))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
"""


def test_a_callback_out_of_descriptors_is_said_as_the_limit_as_the_cli_says_it(tmp_path):
    """The engine made its own words, ``internal error: OSError: [Errno 24] Too many open files``,
    where the CLI and the service say the limit; now the run's fault is worded by the same
    mapping (``fdlimit.unexpected``), its code still the runner's own (104)."""
    jsonl = tmp_path / "run.jsonl"
    child = ["sh", "-c", "echo $$; exec tail -f /dev/null"]  # it ends only by the run's teardown
    faulty = ("race", "_interval_snapshot", f"(lambda ns: (exec({EMFILE_TIMER!r}, ns), ns['faulty'])[1])({{}})")
    done = run_cli("run", "--jsonl", jsonl, "--snapshot-interval", "10ms", "--", *child, patched=faulty, cwd=tmp_path)
    assert done.returncode == 104, done.stderr
    said = done.stderr.decode()
    assert said.startswith("processkit-cli: no descriptor left for the run: the open-file limit (ulimit -n: "), said
    assert said.endswith(") is reached; raise the limit\n") and said.count("\n") == 1, said
    assert not pid_alive(int(done.stdout))
    ended = read_events_tolerant(jsonl)[-1]
    assert (ended["event"], ended["code"], ended["source"]) == ("runner_exit", 104, "internal")


# The run's publication, whose ``inspect`` reply raises.
FAULTY_SNAPSHOT = (
    "type('Publication', (importlib.import_module('processkit.control.publication').Publication,),"
    " {'_snapshot': lambda self: 1 / 0})"
)


def _inspected(tmp_path, patched: tuple[str, str, str]) -> subprocess.CompletedProcess:
    """``inspect`` asked of a live run whose CLI is ``patched``; the run then ends by itself and
    must exit 5, its own code (the fault was not the run's)."""
    jsonl, gate = tmp_path / "run.jsonl", tmp_path / "gate"
    script = f"while [ ! -e {gate} ]; do sleep 0.01; done; exit 5"
    argv = ["run", "--jsonl", jsonl, "--run-id", "faulty", "--", "sh", "-c", script]
    runner = start_cli(*argv, patched=patched, cwd=tmp_path)
    try:
        wait_for_event(jsonl, "run_started")
        asked = run_cli("inspect", "--run-id", "faulty", "--json", cwd=tmp_path)
        gate.touch()
        assert runner.wait(timeout=SAFETY_NET) == 5
    finally:
        gate.touch()
        runner.wait(timeout=SAFETY_NET)
    return asked


def test_a_control_reply_that_raises_fails_that_client_alone(tmp_path):
    asked = _inspected(tmp_path, ("processkit.control.publication", "Publication", FAULTY_SNAPSHOT))
    assert asked.returncode == 103  # the client's for an {"error": ...} reply (docs/control-plane.md)
    message = "processkit-cli: cannot inspect run `faulty`: internal error: ZeroDivisionError: division by zero\n"
    assert asked.stderr.decode() == message


# A service whose read of its connection raises once the test's marker file exists.
FAULTY_CONNECTION = r"""
import json, os, subprocess, sys, processkit
from processkit.api import service
from processkit.api.sending import ServiceGone
marker, jsonl = sys.argv[1:]
patch = (
    "import os\n"
    "from processkit.api import wire\n"
    "receive = wire.receive\n"
    "def faulty(*args, **kwargs):\n"
    f"    if os.path.exists({marker!r}):\n"
    "        raise RuntimeError('injected fault')\n"
    "    return receive(*args, **kwargs)\n"
    "wire.receive = faulty\n"
    "from processkit.service.serve import main; main()\n"
)
service.service_command = lambda fd, caller: [sys.executable, "-c", patch, str(fd), str(caller)]
live = processkit.start(["sh", "-c", "echo $$; exec tail -f /dev/null"], stdout=subprocess.PIPE, jsonl=jsonl)
pid = int(live.stdout.readline())
open(marker, "w").close()
try:
    processkit.run(["true"])
except ServiceGone as exc:
    print(json.dumps([pid, str(exc)]))
"""


def test_a_connection_whose_read_raises_ends_as_a_hang_up_its_runs_released(tmp_path):
    """A fault reading the service's one connection cannot be pinned on a call: the connection
    ends as the caller's hang-up would, each run it carried released and its stream ended
    (``cancelled``); before, the fault left the loop and the runs' streams ended mid-way."""
    jsonl = tmp_path / "live.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", FAULTY_CONNECTION, str(tmp_path / "marker"), str(jsonl)],
        capture_output=True,
        timeout=SAFETY_NET,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    pid, message = json.loads(done.stdout)
    assert message == "the runner service of this process has ended"
    assert not pid_alive(pid)
    last = read_events_tolerant(jsonl)[-1]
    assert (last["event"], last["code"], last["source"]) == ("runner_exit", 107, "cancelled")


ZERO = "ZeroDivisionError: division by zero"
STREAMS = "importlib.import_module('processkit.engine.streams')"
WAITS = "importlib.import_module('processkit.engine.waits')"
# A run salvaged after a step of its own raised (the tree's read, once its ending is decided),
# the salvage's wait for the killed root made to last its whole (shortened) bound: whatever its
# callbacks do as the tree dies comes while it waits.
SALVAGED = (
    ("runner", "read_tree", "lambda *args: int('x')"),
    ("salvage", "wait_until", f"lambda done, deadline, poll: {WAITS}.wait_until(lambda: False, deadline, poll)"),
    ("salvage", "KILL_WAIT_SECONDS", "0.3"),
)


def _salvaged(tmp_path, script: str, stream: str, flags=(), patches=()) -> subprocess.CompletedProcess:
    """A ``SALVAGED`` run of ``sh -c SCRIPT`` whose output streams have ``stream``'s methods."""
    faulty = ("launch", "OutputStream", f"type('S', ({STREAMS}.OutputStream,), {stream})")
    argv = ["run", *flags, "--jsonl", tmp_path / "run.jsonl", "--", "sh", "-c", f"echo $$ > pid; {script}"]
    done = run_cli(*argv, patched=sum((*SALVAGED, *patches, faulty), ()), cwd=tmp_path)
    assert done.returncode == 104
    assert not pid_alive(int((tmp_path / "pid").read_text()))
    return done


def test_a_callback_fault_during_the_salvage_of_a_step_that_raised_still_ends_the_stream(tmp_path):
    """The run's output callbacks raised as its killed tree closed the pipes, while the salvage
    waited: the run still ends with its release and ``runner_exit`` (the step's message), the
    callbacks' fault said once in a warning. Before, the first was thrown into the salvage's
    wait and the stream ended at ``timeout``, with the callback's message."""
    raising = "{'_on_readable': lambda self: 1 / 0, 'hurry': lambda self: 1 / 0}"  # the pipe's end; the root's
    done = _salvaged(tmp_path, "exec tail -f /dev/null", raising, flags=("--timeout", "100ms"))
    dropped, error = done.stderr.decode().splitlines()  # the callback's, said once; the step's
    assert dropped == "processkit-cli: warning: a later fault of a run ending already was not reported: " + ZERO
    assert error.startswith("processkit-cli: internal error: ValueError: ")
    last = read_events_tolerant(tmp_path / "run.jsonl")[-1]
    assert (last["event"], last["code"], last["source"]) == ("runner_exit", 104, "internal")


def test_a_control_connection_whose_read_raises_is_closed_and_the_run_goes_on(tmp_path):
    """A fault in reading a client's request (here its parse) is that connection's: it is
    closed unanswered. Before, it was the run's, which a client could end so (104)."""
    asked = _inspected(tmp_path, ("processkit.control.protocol", "parse_request", "lambda line: 1 / 0"))
    assert asked.returncode == 103, asked.stderr


# Every raise of the run's output callback counted, the count printed at the CLI's exit.
RAISED = f"{STREAMS}.RAISED"
COUNTED = (
    ("processkit.engine.streams", "RAISED", "[]"),
    ("processkit.engine.streams", "SAID", f"__import__('atexit').register(lambda: print(len({RAISED})))"),
)


def test_a_descriptor_whose_callback_keeps_raising_is_unwatched_not_spun_on(tmp_path):
    """The ready pipe's callback raised (its first line), and the loop called it again at every
    turn, a raise each, until the run's end (~50,000 in the salvage's 0.3 s); its second fault now
    takes the descriptor off the loop."""
    counting = f"{{'_on_readable': lambda self: 1 / len(()) if {RAISED}.append(1) is None else None, 'hurry': lambda self: None}}"
    done = _salvaged(tmp_path, "echo line; exec tail -f /dev/null", counting, patches=COUNTED)
    raised = int(done.stdout)
    assert raised < 10, raised  # the two the loop made, and the teardown's own reads of the pipe


# The salvage's collection of a killed root whose look (``poll``) raises something other than
# ``OSError``, carried on a loop of its own: the count of its looks printed once it returns.
POLL_RAISES = """
import time
from processkit.engine import salvage
from processkit.engine.waits import carried
class Loop:
    clock = staticmethod(time.monotonic)
    def run_until(self, done, deadline, poll):
        done()
class Container:
    def kill_all(self):
        pass
class Child:
    looks = 0
    def poll(self):
        Child.looks += 1
        raise ValueError("no look")
carried(Loop(), salvage.collected(Loop(), Container(), Child()))
print(Child.looks)
"""


def test_a_killed_roots_look_that_raises_ends_the_salvages_wait():
    """The look's fault was taken for a callback's thrown in at the wait, and the wait began
    again at once, a look a round, forever (the host stuck, every run it carries with it); now
    the root is given up at the look's first fault, said in a warning."""
    done = subprocess.run([sys.executable, "-c", POLL_RAISES], capture_output=True, timeout=SAFETY_NET)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert int(done.stdout) == 1
    assert "could not collect the run's root after an internal error: ValueError: no look" in done.stderr.decode()


# A run whose own step runs a callback of its own that raises (as the reaper's routing of its
# root's exit, from the teardown's read of the tree), then ends without another wait.
LAST_STEP_FAULT = """
from processkit.engine.scheduler import Scheduler
from processkit.loop import Loop
host = Scheduler(Loop())
def steps():
    host.run_loop().waking(lambda: 1 / 0)()
    return "ok"
    yield
print(host.carry(steps()))
"""


def test_a_callback_fault_in_a_runs_last_step_is_said_not_dropped():
    """The fault was kept for the run's next resume, which never came: the run reported its
    outcome and nothing said the fault. Now it is said in the warning of a dropped fault."""
    done = subprocess.run([sys.executable, "-c", LAST_STEP_FAULT], capture_output=True, timeout=SAFETY_NET)
    assert (done.returncode, done.stdout) == (0, b"ok\n"), done.stderr.decode()[-3000:]
    assert "was not reported: ZeroDivisionError: division by zero" in done.stderr.decode()


# A caller interrupted while it waits on a run whose service raises taking the stop it sends;
# it goes on, its connection open: is the run's child still there, and does its next call run?
INTERRUPTED = r"""
import os, signal, sys, threading, time, processkit
from processkit.api import service
patch, ready = sys.argv[1:]
source = patch + "from processkit.service.serve import main; main()\n"
service.service_command = lambda fd, caller: [sys.executable, "-c", source, str(fd), str(caller)]
def interrupt():
    while not os.path.exists(ready):
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=interrupt, daemon=True).start()
try:
    processkit.run(["sh", "-c", f"echo $$ > {ready}.pid; mv {ready}.pid {ready}; exec tail -f /dev/null"])
except BaseException as exc:
    print(type(exc).__name__, exc)
try:
    with open(f"/proc/{int(open(ready).read())}/stat") as stat:
        print("running" if stat.read().rsplit(")", 1)[1].split()[0] != "Z" else "ended")
except FileNotFoundError:
    print("ended")
print(processkit.run(["true"]).returncode)
"""
FAULTY_STOP = "from processkit.service import serve\nserve.Service._stop = lambda self, rid, source: 1 / 0\n"


def test_a_stop_the_service_could_not_take_for_a_begun_run_still_ends_the_run(tmp_path):
    """The caller's stop frame raised in the service: nothing answered it, and the caller waited
    on, its interrupt lost, for as long as the run went on (here for ever). Then its call was
    answered at once with the service's failure, but the run went on, unseen, until the caller's
    connection closed: a caller that went on had it for ever. Now the run ends as the runner's own
    failure (its tree killed) before the call is answered, and the service serves the next call."""
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED, FAULTY_STOP, str(tmp_path / "ready")],
        capture_output=True,
        timeout=SAFETY_NET,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    interrupted, child, after = done.stdout.decode().splitlines()
    assert (interrupted.split()[0], child, after) == ("KeyboardInterrupt", "ended", "0"), done.stdout

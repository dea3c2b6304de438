"""What the runner service tells a caller whose run met a fault around its end: the stop the
caller sent through ``RunHandle.close()`` (no control plane answers) that the service raised
taking ends the run as the runner's own failure, said so; and a fault of a run's callback that
comes once its outcome is decided (its stream said ``runner_exit``) does not replace that
outcome. Each caller runs in a process of its own, its service patched (the same Python)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import SAFETY_NET

# The caller, its service started with the patch in argv[1] applied first.
SERVED = r"""
import json, os, sys, time, processkit
from processkit.api import control, service
patch = sys.argv[1]
source = patch + "from processkit.service.serve import main; main()\n"
service.service_command = lambda fd, caller: [sys.executable, "-c", source, str(fd), str(caller)]
"""

# ``close()`` where no control plane answers: its stop goes through the caller's connection.
CLOSED = (
    SERVED
    + r"""
ready = sys.argv[2]
def no_plane(*args, **kwargs):
    raise control.ControlError("no control plane", 103, "not_found")
control.stop = no_plane
handle = processkit.start(["sh", "-c", f"echo $$ > {ready}.pid; mv {ready}.pid {ready}; exec tail -f /dev/null"])
while not os.path.exists(ready):
    time.sleep(0.01)
result = handle.close()
try:
    with open(f"/proc/{int(open(ready).read())}/stat") as stat:
        child = "running" if stat.read().rsplit(")", 1)[1].split()[0] != "Z" else "ended"
except FileNotFoundError:
    child = "ended"
ended = [event for event in result.events if event.event == "runner_exit"]
said = json.loads(result.diagnostics)["message"]
print(json.dumps([result.exit_code, said, [event.code for event in ended], child]))
"""
)
FAULTY_STOP = "from processkit.service import serve\nserve.Service._stop = lambda self, rid, source: 1 / 0\n"


def _called(tmp_path, script: str, *args: str):
    """What the caller ``script`` (given ``args``) printed, as JSON, once it ended well."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, timeout=SAFETY_NET, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return json.loads(done.stdout)


def test_a_stop_close_sent_that_the_service_raised_taking_ends_the_run_and_says_so(tmp_path):
    """Answered at once with the service's failure (104), the run went on unseen; now the run
    ends, its tree killed, its stream's ``runner_exit`` and the reply alike 104 with the fault's
    words."""
    code, said, ended, child = _called(tmp_path, CLOSED, FAULTY_STOP, str(tmp_path / "ready"))
    assert (code, said, ended, child) == (104, "internal error: ZeroDivisionError: division by zero", [104], "ended")


# A run whose command names FAULT leaves a timer behind its release that raises on the loop's
# next turn: while the service copies the run's held capture out, a piece a turn (made small).
LATE_FAULT = """
from processkit.engine import runner
from processkit.service import scratch
scratch.PIECE = 1 << 16
release = runner._release
def faulty(run, launched, outcome):
    done = release(run, launched, outcome)
    if 'FAULT' in run.spec.argv[-1]:
        run.loop.call_at(run.loop.now, lambda: 1 / 0)
    return done
runner._release = faulty
"""
CAPTURED = (
    SERVED
    + r"""
result = processkit.run(["sh", "-c", "head -c 2000000 /dev/zero; : FAULT"], capture_output=True)
ended = [event.code for event in result.events if event.event == "runner_exit"]
print(json.dumps([result.exit_code, len(result.stdout), ended, processkit.run(["true"]).returncode]))
"""
)


def test_a_fault_once_the_runs_outcome_is_decided_leaves_its_outcome(tmp_path):
    """The run ended 0 (its stream said so), then a callback it left raised while its capture
    (over 1 MiB: copied out, not inline) was copied: the fault was thrown into the copy, and
    the reply said the runner's own failure (104) with no capture, against the stream's 0."""
    assert _called(tmp_path, CAPTURED, LATE_FAULT) == [0, 2_000_000, [0], 0]


# The service's handling of a run's end raises once (here giving back the request of the run whose
# command names FAULT, after its reply went): the host's own failure, stored outside any call.
FAULTY_CLOSE = """
from processkit.service import request
close, raised = request.Request.close, []
def faulty(self):
    close(self)
    if self.spec.argv[-1] == 'FAULT' and not raised:
        raised.append(1)
        raise RuntimeError('injected fault')
request.Request.close = faulty
"""
AFTER_CLOSE = (
    SERVED
    + r"""
faulty = processkit.run(["echo", "FAULT"], capture_output=True)
try:
    after = processkit.run(["echo", "next"], capture_output=True)
    seen = [after.returncode, after.stdout.decode(), after.runner_pid == faulty.runner_pid]
except service.ServiceGone:
    seen = "ServiceGone"
print(json.dumps([faulty.returncode, faulty.stdout.decode(), seen]))
"""
)


def test_a_failure_the_service_stores_outside_a_call_ends_it_rather_than_leave_calls_unanswered(tmp_path):
    """No run starts once the host's failure is stored, but the idle wait went on reading calls:
    the next call waited for ever. The service ends; that call is told so or served by a new one."""
    code, out, seen = _called(tmp_path, AFTER_CLOSE, FAULTY_CLOSE)
    assert (code, out) == (0, "FAULT\n")
    assert seen == "ServiceGone" or seen == [0, "next\n", False], seen

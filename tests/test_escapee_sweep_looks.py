"""``run`` and ``batch`` look for what their runs left outside their boundary
(``cli/run.end_escapees``) only where a run made the runner a subreaper (a process-group run):
under cgroup v2 the run's group held every member, and none of them comes to a runner that is
no subreaper once orphaned, so the sweep's ``waitid`` and its walk of the caller's children
would find nothing of the runs'. Either way a setsid escapee is gone after the run, and the
caller's own child from before the run is left alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import pid_alive, read_events_tolerant
from streams import PY, require_mechanism

# The runner's process: a child of its own first (the caller's, in a session of its own), then
# the CLI with argv[2:], its ``end_escapees`` counting the ``waitid`` calls it makes; written to
# argv[1] with whether the caller's child still lives, which is then ended.
DRIVER = r"""
import json, os, signal, sys, time
looks_file, argv = sys.argv[1], sys.argv[2:]
inherited = os.fork()
if inherited == 0:
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    time.sleep(60)
    os._exit(0)
from processkit.cli import run as cli_run
from processkit.cli.main import main

real_end, real_waitid, looks = cli_run.end_escapees, os.waitid, []

def end_escapees(*args, **kwargs):
    def waitid(*given):
        looks.append(given)
        return real_waitid(*given)

    os.waitid = waitid
    try:
        return real_end(*args, **kwargs)
    finally:
        os.waitid = real_waitid

cli_run.end_escapees = end_escapees
try:
    code = main(argv)
finally:
    with open(looks_file, "w") as out:
        json.dump({"looks": len(looks), "inherited": os.waitpid(inherited, os.WNOHANG) == (0, 0)}, out)
    os.kill(inherited, signal.SIGKILL)
    os.waitpid(inherited, 0)
sys.exit(code)
"""

# The run's command: a setsid daemon, its pid written once it has left the run's group.
ESCAPE = r"""
import os, sys, time
where = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    with open(where + ".tmp", "w") as handle:
        handle.write(str(os.getpid()))
    os.replace(where + ".tmp", where)
    time.sleep(60)
    os._exit(0)
while not os.path.exists(where):
    time.sleep(0.01)
"""


@pytest.mark.parametrize("command", ["run", "batch"])
def test_the_sweep_looks_only_after_a_process_group_run(tmp_path, containment, command):
    escapee_file, looks_file = tmp_path / "escapee", tmp_path / "looks.json"
    if command == "run":
        events = tmp_path / "events.jsonl"
        argv = ["run", "--jsonl", str(events), "--", PY, "-c", ESCAPE, str(escapee_file)]
    else:
        manifest = tmp_path / "manifest.jsonl"
        manifest.write_text(json.dumps({"id": "escape", "args": [PY, "-c", ESCAPE, str(escapee_file)]}) + "\n")
        events = tmp_path / "out" / "escape" / "events.jsonl"
        argv = ["batch", str(manifest), "--out", str(tmp_path / "out")]
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(looks_file), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, stderr = driver.communicate(timeout=120)
    escapee = int(escapee_file.read_text())
    try:
        assert driver.returncode == 0, stderr
        require_mechanism(read_events_tolerant(events), containment)
        seen = json.loads(looks_file.read_text())
        assert seen["inherited"], "the sweep ended the caller's own child"
        assert not pid_alive(escapee), "the run's setsid escapee outlived the run"
        if containment == "process_group":
            assert seen["looks"] >= 1 and b"had left" in stderr, (seen, stderr)
        else:
            assert seen["looks"] == 0 and b"process group" not in stderr, (seen, stderr)
    finally:
        if pid_alive(escapee):
            os.kill(escapee, signal.SIGKILL)

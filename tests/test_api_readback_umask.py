"""What a run wrote for its caller comes back whatever mode the caller's umask gave its files
(readback60). The runner service makes a run's capture files and named stream under the
caller's umask (``engine.callers_umask``), then read them back by reopening them: a ``0o477``
made the capture files write-only (``result.stdout`` None, and no word of it), a ``0o777`` made
the stream mode 000 (returncode 0, no events). The files it makes are now opened read-write at
creation and read back through that descriptor (``readback``), their modes on disk left as the
umask gave them; a file of the caller's found there that this user may not read is named in
``result.diagnostics``, never a silent None. Through the real service, in a process of its own
(the umask is the whole process's), without root's override of file modes (as any other user)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from privileges import without_file_override

SCRIPT = r"""
import json, os, stat, subprocess, sys, warnings
import processkit

out = sys.argv[1]
mode = lambda path: oct(stat.S_IMODE(os.stat(path).st_mode))
text = lambda data: None if data is None else data.decode()
processkit.run(["true"])  # the service starts under 022
found = {}
os.umask(0o477)  # the owner may write, not read
for keep in ("head", "tail"):
    where = os.path.join(out, keep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", processkit.CaptureTruncated)
        done = processkit.run(
            ["sh", "-c", "echo 0123456789abcdefghijklmnopqrstuvwxyz; echo err >&2"],
            capture_output=True, capture_dir=where, capture_keep=keep, capture_max_bytes=20,
        )
    found[keep] = [done.returncode, text(done.stdout), text(done.stderr), done.diagnostics,
                   done.stdout_capture.write_error, mode(os.path.join(where, "stdout.log"))]
cli = subprocess.run(  # the CLI reads nothing back: as it was
    ["processkit-cli", "run", "--jsonl", os.devnull, "--capture-dir", os.path.join(out, "cli"), "--", "echo", "x"]
)
found["cli"] = [cli.returncode, mode(os.path.join(out, "cli", "stdout.log"))]
ring = subprocess.run(  # the CLI's own ring is put in order in place: it reads the file it made
    ["processkit-cli", "run", "--jsonl", "/dev/stdout", "--capture-dir", os.path.join(out, "ring"),
     "--capture-keep", "tail", "--capture-max-bytes", "20", "--", "sh", "-c", "echo 0123456789abcdefghijklmnopqrstuvwxyz"],
    capture_output=True, text=True,
)
events = [json.loads(line) for line in ring.stdout.splitlines() if line.startswith('{"schema_version"')]
kept = [event["stdout"] for event in events if event["event"] == "output_captured"]
found["ring"] = [ring.returncode, [(kept["bytes_written"], kept["write_error"]) for kept in kept]]
os.umask(0o777)  # no one may do anything with what it makes
named = os.path.join(out, "named.jsonl")
done = processkit.run(["true"], jsonl=named)
found["stream"] = [done.returncode, [event.name for event in done.events][-1:], done.diagnostics, mode(named)]
print(json.dumps(found))
"""


def test_files_made_under_a_umask_that_refuses_reading_still_come_back(tmp_path, pump_backend):
    found = _ran(SCRIPT, tmp_path)
    tail = "hijklmnopqrstuvwxyz\n"
    assert found["head"] == [0, "0123456789abcdefghij", "err\n", "", False, "0o200"]
    assert found["tail"] == [0, tail, "err\n", "", False, "0o200"], "a ring is put in order through it too"
    assert found["cli"] == [0, "0o200"]
    assert found["ring"] == [0, [[20, False]]], "processkit-cli's --capture-keep tail writes its ring"
    assert found["stream"] == [0, ["runner_exit"], "", "0o0"]


CALLERS_OWN = r"""
import json, os, sys
import processkit

out = sys.argv[1]
cap, named = os.path.join(out, "cap"), os.path.join(out, "named.jsonl")
os.makedirs(cap)
for path in (os.path.join(cap, "stdout.log"), named):  # the caller's own, write-only
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o200))
captured = processkit.run(["sh", "-c", "echo out; echo err >&2"], capture_output=True, capture_dir=cap)
streamed = processkit.run(["true"], jsonl=named)
print(json.dumps([[captured.returncode, captured.stdout, captured.stderr.decode(), captured.diagnostics],
                  [streamed.returncode, len(streamed.events), streamed.diagnostics]]))
"""


def test_a_callers_file_it_may_not_read_is_named_not_lost_in_silence(tmp_path, pump_backend):
    """The run goes on (it may write there, as ``processkit-cli`` does), but what it wrote there
    cannot come back: the result says which, and where, in ``diagnostics``."""
    captured, streamed = _ran(CALLERS_OWN, tmp_path)
    cap = os.path.join(tmp_path, "cap", "stdout.log")
    said = "processkit: the run's {} not read back: {} is no file this user may read\n"
    assert captured == [0, None, "err\n", said.format("stdout", cap)]
    assert streamed == [0, 0, said.format("events", tmp_path / "named.jsonl")]
    os.chmod(cap, 0o600)  # as its owner may: what the run wrote is there
    with open(cap) as handle:
        assert handle.read() == "out\n"


def _ran(script: str, tmp_path):
    bin_dir = os.path.dirname(sys.executable)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [*without_file_override(), sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])

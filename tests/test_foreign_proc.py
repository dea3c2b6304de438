"""A runner whose /proc is another pid namespace's refuses to run (102), naming the fix.

Under ``unshare --pid --fork`` without ``--mount-proc`` the runner's pids (its child's, its
group's members', a kill's target) are the new namespace's, while /proc numbers the host's
processes: the run's member snapshot listed the host's ``kthreadd`` as pid 2, the process-group
member scan found none of the run's processes, and a kill chosen from /proc could hit an
unrelated process. Skipped without root or where ``unshare --pid --fork`` is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import cli_command, read_events

FIX = "mount a /proc of this namespace: unshare --mount-proc"


@pytest.fixture(scope="module")
def unshare_pid() -> list[str]:
    """``unshare --pid --fork``, probed once: skips where it cannot make a pid namespace."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"unshare --pid --fork refused here: {probe.stderr.decode(errors='replace')}")
    return ["unshare", "--pid", "--fork"]


def _in_namespace(prefix: list[str], *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*prefix, *cli_command(), *map(str, args)], stdin=subprocess.DEVNULL, capture_output=True, timeout=120
    )


def _refused(done: subprocess.CompletedProcess) -> None:
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 102, (done.returncode, done.stderr)
    assert len(lines) == 1 and "another pid namespace" in lines[0] and lines[0].endswith(FIX), lines


def test_run_refuses_a_foreign_proc(unshare_pid, containment, tmp_path):
    """``run`` ends 102 before its child starts, its stream saying why; it ran the child and
    read the host's processes as the run's members."""
    jsonl = tmp_path / "run.jsonl"
    done = _in_namespace(unshare_pid, "run", "--jsonl", jsonl, "--", "sh", "-c", "sleep 1 & echo $!")
    _refused(done)
    assert done.stdout == b""
    events = read_events(jsonl)
    assert [event["event"] for event in events] == ["container_failed", "runner_exit"]
    assert events[0]["message"].endswith(FIX)
    assert events[1]["source"] == "container_error"


def test_run_detach_batch_and_bench_refuse_it(unshare_pid, tmp_path):
    """Every command that runs something says the cause once, as a containment failure: a batch
    or a benchmark does not run its jobs into one failure each (117, 118) or read /proc wrong."""
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text('{"id": "a", "args": ["true"]}\n')
    _refused(_in_namespace(unshare_pid, "batch", "--out", tmp_path / "out", manifest))
    _refused(_in_namespace(unshare_pid, "bench", "--runs", "2", "true"))
    detached = _in_namespace(unshare_pid, "run", "--jsonl", tmp_path / "d.jsonl", "--detach", "--", "true")
    assert detached.returncode == 102, detached.stderr
    assert detached.stderr.decode().rstrip("\n").endswith(FIX)


def test_the_api_returns_the_refusal_as_a_result(unshare_pid):
    """The API's run comes back as a 102 result whose message names the fix (docs/api.md)."""
    script = (
        "import json, processkit.api as api; r = api.run(['true']);"
        " print(json.dumps([r.returncode, r.source, r.message]))"
    )
    done = subprocess.run([*unshare_pid, sys.executable, "-c", script], capture_output=True, timeout=120)
    code, source, message = json.loads(done.stdout)
    assert (code, source) == (102, "container_error"), done.stderr
    assert message.endswith(FIX)


def test_a_proc_of_the_namespace_is_used(unshare_pid, tmp_path):
    """With ``--mount-proc`` the namespace's own /proc is read: the run goes on, its members
    the run's own processes."""
    jsonl = tmp_path / "run.jsonl"
    done = _in_namespace([*unshare_pid, "--mount-proc"], "run", "--jsonl", jsonl, "--", "sh", "-c", "echo ok")
    assert (done.returncode, done.stdout) == (0, b"ok\n"), done.stderr
    snapshot = next(event for event in read_events(jsonl) if event["event"] == "members_snapshot")
    assert {member["name"] for member in snapshot["members"]} <= {"sh", "echo"}


def test_doctor_names_the_fix(unshare_pid, tmp_path):
    """``doctor`` does not qualify such a host (116) and its report says why."""
    done = subprocess.run(
        [*unshare_pid, *cli_command(), "doctor", "--json"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )
    assert done.returncode == 116, done.stderr
    assert FIX in done.stdout.decode()


def test_the_api_bench_raises_the_refusal(unshare_pid):
    """The API's bench raises ``Failure`` 102, as the CLI's exits, not 118 from its first run."""
    script = (
        "import json; from processkit.api.bench import bench\n"
        "try:\n    bench([['true']], runs=2)\n"
        "except Exception as exc:\n    print(json.dumps([exc.code, exc.message]))\n"
    )
    done = subprocess.run([*unshare_pid, sys.executable, "-c", script], capture_output=True, timeout=120)
    code, message = json.loads(done.stdout)
    assert code == 102, done.stderr
    assert message.endswith(FIX)

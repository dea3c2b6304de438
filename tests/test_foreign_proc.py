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
from own_tmp import PRIVATE_MOUNTS

FIX = "mount a /proc of this pid namespace (unshare --mount-proc, or mount -t proc proc /proc in a new mount namespace)"
NO_PROC = "/proc is not mounted here or does not show this process (/proc/self: No such file or directory)"
MOUNT = "mount one: mount -t proc proc /proc"


@pytest.fixture(scope="module")
def unshare_pid() -> list[str]:
    """``unshare --pid --fork``, probed once: skips where it cannot make a pid namespace."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare")
    probe = subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"unshare --pid --fork refused here: {probe.stderr.decode(errors='replace')}")
    return ["unshare", "--pid", "--fork"]


@pytest.fixture(scope="module")
def unshare_mount_proc(unshare_pid) -> list[str]:
    """``unshare --pid --fork --mount-proc``, probed once: skips where a procfs mount is refused."""
    prefix = [*unshare_pid, "--mount-proc"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"unshare --mount-proc refused here: {probe.stderr.decode(errors='replace')}")
    return prefix


@pytest.fixture(scope="module")
def tmpfs_over_proc(unshare_pid) -> list[str]:
    """A new mount namespace with a tmpfs over /proc (no process shown there), probed once."""
    prefix = [*PRIVATE_MOUNTS, "sh", "-c", 'mount -t tmpfs none /proc && exec "$@"', "sh"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"a tmpfs over /proc cannot be made here: {probe.stderr.decode(errors='replace')}")
    return prefix


def _in_namespace(prefix: list[str], *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*prefix, *cli_command(), *map(str, args)], stdin=subprocess.DEVNULL, capture_output=True, timeout=120
    )


def _printed(done: subprocess.CompletedProcess):
    """The one JSON line a script printed; its stderr shown when it printed none."""
    assert done.stdout.strip(), (done.returncode, done.stderr.decode(errors="replace"))
    return json.loads(done.stdout)


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


COMMANDS = {
    "run-detach": ["run", "--jsonl", "{tmp}/d.jsonl", "--detach", "--", "true"],
    "batch": ["batch", "--out", "{tmp}/out", "{tmp}/jobs.jsonl"],
    "bench": ["bench", "--runs", "2", "true"],
}


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_refuses_it(unshare_pid, tmp_path, name):
    """Every command that runs something says the cause once, as a containment failure: a batch
    or a benchmark does not run its jobs into one failure each (117, 118) or read /proc wrong."""
    (tmp_path / "jobs.jsonl").write_text('{"id": "a", "args": ["true"]}\n')
    _refused(_in_namespace(unshare_pid, *(word.format(tmp=tmp_path) for word in COMMANDS[name])))
    assert not (tmp_path / "out" / "summary.jsonl").exists()


def test_a_bench_usage_error_is_still_100(unshare_pid):
    """A command line ``bench`` cannot read is a usage error (100) before the /proc check."""
    done = _in_namespace(unshare_pid, "bench", "-N", "true", 'sh -c "oops')
    assert done.returncode == 100, done.stderr
    assert b"no closing quotation" in done.stderr


def test_a_tmpfs_over_proc_is_named_as_no_proc(tmpfs_over_proc, tmp_path):
    """A /proc that shows no process (a tmpfs over it) is not called another pid namespace's:
    the line says /proc shows nothing of this process and how to mount one."""
    jsonl = tmp_path / "run.jsonl"
    done = _in_namespace(tmpfs_over_proc, "run", "--jsonl", jsonl, "--", "true")
    assert done.returncode == 102, done.stderr
    message = read_events(jsonl)[0]["message"]
    assert message == f"{NO_PROC}; {MOUNT}"
    assert done.stderr.decode().rstrip("\n").endswith(message)


def test_an_env_file_fifo_is_read_and_the_missing_proc_named(tmpfs_over_proc, tmp_path):
    """An ``--env-file`` FIFO was opened again through ``/proc/self/fd/N`` to wait for its
    writer, so with no /proc the run ended 111 saying the FIFO there had no such file; it is
    waited on by its own descriptor now, read, and the run's refusal is the one that names
    the cause and its fix."""
    fifo = tmp_path / "env.fifo"
    os.mkfifo(fifo)
    # Its open waits for the runner's, so the line is written once the runner reads.
    writer = subprocess.Popen(["sh", "-c", 'printf "A=1\\n" > "$1"', "sh", fifo], stderr=subprocess.DEVNULL)
    try:
        jsonl = tmp_path / "run.jsonl"
        done = _in_namespace(tmpfs_over_proc, "run", "--jsonl", jsonl, "--env-file", fifo, "--", "true")
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode == 102, done.stderr
    assert done.stderr.decode().rstrip("\n").endswith(f"{NO_PROC}; {MOUNT}")


def test_the_api_returns_the_refusal_as_a_result(unshare_pid):
    """The API's run comes back as a 102 result whose message names the fix (docs/api.md)."""
    script = (
        "import json, processkit.api as api; r = api.run(['true']);"
        " print(json.dumps([r.returncode, r.source, r.message]))"
    )
    done = subprocess.run([*unshare_pid, sys.executable, "-c", script], capture_output=True, timeout=120)
    code, source, message = _printed(done)
    assert (code, source) == (102, "container_error"), done.stderr
    assert message.endswith(FIX)


def test_a_proc_of_the_namespace_is_used(unshare_mount_proc, tmp_path):
    """With ``--mount-proc`` the namespace's own /proc is read: the run goes on, its members
    the run's own processes."""
    jsonl = tmp_path / "run.jsonl"
    done = _in_namespace(unshare_mount_proc, "run", "--jsonl", jsonl, "--", "sh", "-c", "echo ok")
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
    code, message = _printed(done)
    assert code == 102, done.stderr
    assert message.endswith(FIX)


def test_the_api_batch_refuses_before_any_job(unshare_pid, tmp_path):
    """The API's batch raises at once with the same words (docs/api.md), as the CLI's exits
    102: no job runs into a 102 row of its own, no summary is written."""
    script = (
        "import json, sys, processkit\n"
        "try:\n    rows = processkit.batch([{'args': ['true']}], out=sys.argv[1])\n"
        "except Exception as exc:\n    print(json.dumps([type(exc).__name__, str(exc)]))\n"
        "else:\n    print(json.dumps(['returned', rows]))\n"
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [*unshare_pid, sys.executable, "-c", script, out], capture_output=True, timeout=120, cwd=tmp_path
    )
    kind, said = _printed(done)
    assert kind == "RuntimeError", said
    assert "another pid namespace" in said and said.endswith(FIX)
    assert not (out / "summary.jsonl").exists()


def test_a_child_forked_into_a_new_pid_namespace_looks_again(unshare_pid):
    """The answer is kept for the process that found it: a child forked after
    ``unshare(CLONE_NEWPID)`` is pid 1 of a namespace the host's /proc does not number so, and
    is told, where the parent's answer (this /proc is ours) would have let its runs go on."""
    script = (
        "import ctypes, json, os\n"
        "from processkit.mountinfo import foreign_proc\n"
        "before = foreign_proc()\n"
        "if ctypes.CDLL(None, use_errno=True).unshare(0x20000000) != 0:\n"
        "    print(json.dumps(['unshare', os.strerror(ctypes.get_errno())])); raise SystemExit\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.write(1, json.dumps([before, os.getpid(), foreign_proc()]).encode()); os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    printed = _printed(done)
    if printed[0] == "unshare":
        pytest.skip(f"unshare(CLONE_NEWPID) refused here: {printed[1]}")
    before, child_pid, child = printed
    if before is not None:
        pytest.skip(f"this test's own /proc is not its namespace's: {before}")
    assert child_pid == 1
    assert child is not None and "another pid namespace" in child and child.endswith(FIX), child

"""A runner whose children are born into a pid namespace it is not in (``unshare --pid``
without ``--fork``): there the child's ``getppid()`` reads 0 whether the runner lives or not,
and a check of it against the runner's pid made every run exit 127 (native spawn) or 1 (Popen)
without a word, and the API's service end at once. The child now asks the runner's report pipe
(native) or a pidfd of it (Popen), the service its caller's socket. Once the namespace's first
process has ended, no process can start in it: that is said in one line, with the command's
failure code, but only then: an ordinary ENOMEM while the init lives keeps the OS's words.
``--fork`` (the runner is the namespace's init, with a ``/proc`` of its own: without one it is
refused, tests/test_foreign_proc.py) runs as before."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from processkit.errors import BATCH_FAILED, BENCH_FAILED

from conftest import cli_command


def _unshare_works() -> bool:
    """Whether ``unshare --pid`` can make a namespace here (root, and CAP_SYS_ADMIN: a container
    may have the one without the other)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--pid", "true"], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _unshare_works(), reason="unshare --pid cannot make a pid namespace here")


def unshared(*args: str, fork: bool = False) -> subprocess.CompletedProcess:
    """``args`` run as ``unshare --pid [--fork --mount-proc] ARGS``: the command itself, no shell
    between."""
    flags = ["--pid", "--fork", "--mount-proc"] if fork else ["--pid"]
    return subprocess.run(
        ["unshare", *flags, *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("fork", [False, True], ids=["runner-outside", "runner-init"])
def test_a_run_starts_when_its_child_is_in_another_pid_namespace(spawn_backend, fork, tmp_path):
    events = tmp_path / "events.jsonl"
    done = unshared(*cli_command(), "run", "--jsonl", str(events), "--", "sh", "-c", "echo $$", fork=fork)
    assert done.returncode == 0, done.stderr
    # Outside, the child is its namespace's first process; as init, the runner is pid 1.
    assert done.stdout == ("2\n" if fork else "1\n")


def test_a_run_that_cannot_start_in_an_ended_namespace_says_why(spawn_backend):
    # bench's first run is the namespace's init: once it has ended, the second cannot start.
    done = unshared(*cli_command(), "bench", "--runs", "2", "--warmup", "0", "--", "true")
    assert done.returncode == BENCH_FAILED, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].endswith(
        "could not start `true`: the pid namespace new processes are born into has no init any more,"
        " its first process having ended (os error 12)"
    ), lines[0]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace(1) to make the clone fail")
def test_an_ordinary_enomem_while_the_init_lives_keeps_the_os_words(spawn_backend, tmp_path):
    # batch's first child (its page process, alive until the batch ends) is the namespace's
    # init; strace makes the job's clone fail with ENOMEM as a shortage would.
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"args": ["true"], "id": "one"}) + "\n")
    out = tmp_path / "out"
    inject = ["strace", "-qq", "-o", os.devnull, "-e", "trace=clone,clone3", "-e", "inject=clone,clone3:error=ENOMEM"]
    done = subprocess.run(
        [*inject, "unshare", "--pid", *cli_command(), "batch", str(manifest), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == BATCH_FAILED, done.stderr
    [line] = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert line["source"] == "spawn_error"
    assert (
        line["message"] == "could not start the program: could not start `true`: Cannot allocate memory (os error 12)"
    )


def test_the_api_service_runs_in_a_pid_namespace_its_caller_is_not_in(spawn_backend):
    # The service is the caller's first child there: its parent reads as 0 from inside, and it
    # once ended at once (the call failed: ServiceGone, ENOMEM). It lives now and answers; as the
    # namespace's init it sees the caller's /proc, not one of its own, so its answer is the
    # refusal (tests/test_foreign_proc.py), a result, not an exception. Its fix is the caller's
    # own: a /proc mounted outside (``unshare --mount-proc``) is still not the service's.
    script = "import processkit; r = processkit.run(['true']); print(r.returncode, r.source); print(r.message)"
    for mount_proc in ([], ["--mount-proc"]):
        done = unshared(*mount_proc, sys.executable, "-c", script)
        assert done.returncode == 0, done.stderr
        code, message = done.stdout.splitlines()
        assert code == "102 container_error", done.stderr
        assert message.endswith(
            "the API's service is its pid namespace's init, its caller outside it: run the caller inside the"
            " namespace with a /proc of its own (unshare --pid --fork --mount-proc)"
        ), message


def test_the_api_bench_names_the_callers_fix(spawn_backend):
    script = "import processkit\ntry: processkit.bench(['true'], runs=1)\nexcept Exception as exc: print(type(exc).__name__, exc)"
    done = unshared(sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(
        "run the caller inside the namespace with a /proc of its own (unshare --pid --fork --mount-proc)\n"
    ), done.stdout


def test_the_api_runs_as_the_fix_names_it(spawn_backend):
    script = "import processkit; r = processkit.run(['true']); print(r.returncode, r.source)"
    done = unshared(sys.executable, "-c", script, fork=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "0 child_exit\n", done.stderr

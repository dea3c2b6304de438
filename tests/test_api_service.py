"""The runner service of a calling process (issue 37): one per process, shared by its threads,
fresh in a fork, following the caller's environment and working directory, and ending with
its caller: a SIGKILLed caller leaves no process, group, record or scratch file."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import pytest

import processkit
from conftest import SAFETY_NET, registry_entries, run_cli

PY = sys.executable

# The caller SIGKILLed below: every kind of scratch a call can make, and a batch, all live at once.
# Its runs sleep for a time no other process names (``_marker``): the test counts them host-wide.
CALLER = r"""
import json, os, sys, threading, processkit
out, marker = os.path.join(sys.argv[1], "batch-out"), sys.argv[2]
threading.Thread(target=processkit.batch, args=([{"args": ["sleep", marker], "id": "s"}],), kwargs={"out": out}).start()
handles = [
    processkit.start(["sleep", marker], capture_output=True, input=b"data"),  # capture dir, input, stream
    processkit.start(["sleep", marker], jsonl=os.path.join(sys.argv[1], "named.jsonl")),
]
roots = [next(iter(h.events())).root_pid for h in handles]
print(json.dumps({"service": handles[0].runner_pid, "roots": roots}), flush=True)
processkit.run(["sleep", marker], capture_output=True)  # waiting in a call when the kill comes
"""


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if text.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _marker() -> str:
    """A sleep's argument no other process on the host has: tests in other workers sleep 3737.5
    and 3737.<random digits> too, and these tests look for their own sleeps among every process's."""
    return f"3737.{os.getpid()}{time.monotonic_ns() % 1000:03}"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_sigkilled_caller_leaves_no_process_group_record_or_scratch_file(tmp_path, isolated_registry):
    scratch = tmp_path / "scratch"  # TMPDIR and XDG_RUNTIME_DIR: every place a call's files may go
    scratch.mkdir(mode=0o700)
    env = {**os.environ, "TMPDIR": str(scratch), "XDG_RUNTIME_DIR": str(scratch)}
    marker = _marker()
    sleeping = f"sleep\x00{marker}\x00"  # the whole argument, not one that begins with it
    caller = subprocess.Popen([PY, "-c", CALLER, str(tmp_path), marker], env=env, stdout=subprocess.PIPE)
    try:
        started = json.loads(caller.stdout.readline())
        deadline = time.monotonic() + SAFETY_NET
        while len(_processes_naming(sleeping)) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)  # the third run, the one waited for, and the batch's job
        assert os.listdir(scratch), "the service keeps its lodging and scratch directory there"
        caller.kill()
        caller.wait()
        killed = time.monotonic()
        while _alive(started["service"]) and time.monotonic() - killed < 30:
            time.sleep(0.01)
    finally:
        caller.kill()
    assert not _alive(started["service"]), "the service ended with its caller"
    serving = [pid for pid in _processes_naming(f"\x00{caller.pid}\x00") if _alive(pid)]
    assert serving == [], "neither the service nor the process it forked for the batch is left"
    assert [pid for pid in started["roots"] if _alive(pid)] == []
    assert _processes_naming(sleeping) == []
    assert os.listdir(scratch) == [], "no lodging, stream, capture or input file is left"
    assert registry_entries(isolated_registry) == []
    from processkit.containment import cgroup_v2

    parent = cgroup_v2.find_parent()
    if parent is not None:
        assert [name for name in os.listdir(parent) if name.startswith(f"processkit-{started['service']}-")] == []


def test_threads_share_one_service_and_run_side_by_side(tmp_path):
    """Eight threads at once: every run is running at the same moment (each waits until all
    eight have started), all carried by one service."""
    marks = tmp_path / "marks"
    marks.mkdir()
    script = f'touch {marks}/$0; while [ "$(ls {marks} | wc -l)" -lt 8 ]; do sleep 0.01; done; echo $0'
    results: dict[int, processkit.RunResult] = {}

    def call(index: int) -> None:
        results[index] = processkit.run(["sh", "-c", script, str(index)], capture_output=True, timeout=60)

    threads = [threading.Thread(target=call, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == list(range(8))
    assert all(results[i].stdout == f"{i}\n".encode() for i in range(8))
    assert len({result.runner_pid for result in results.values()}) == 1


def test_a_fork_gets_a_service_of_its_own():
    parent_service = processkit.run(["true"]).runner_pid
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            result = processkit.run(["sh", "-c", "exit 5"])
            os.write(write_end, json.dumps([result.returncode, result.runner_pid]).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as handle:
        code, child_service = json.loads(handle.read())
    os.waitpid(pid, 0)
    assert code == 5 and child_service not in (None, parent_service)
    assert processkit.run(["true"]).runner_pid == parent_service, "the parent's service is untouched"


def test_the_callers_environment_and_working_directory_at_the_call_are_the_childs(tmp_path, monkeypatch):
    processkit.run(["true"])  # the service is started before the changes
    monkeypatch.setenv("I37_LATE", "changed after the service started")
    monkeypatch.chdir(tmp_path)
    result = processkit.run(["sh", "-c", 'printf "%s|%s" "$I37_LATE" "$(pwd)"'], capture_output=True)
    assert result.stdout == f"changed after the service started|{tmp_path}".encode()
    relative = processkit.run(["sh", "-c", "printf x"], capture_dir="cap")
    assert (tmp_path / "cap" / "stdout.log").read_bytes() == b"x" and relative.returncode == 0


# The caller of the test below: a fresh interpreter, so no run an earlier test carried in the
# test's own process (an engine test's ``execute`` makes the process it runs in a subreaper, as
# every runner is) decides what it reads.
NO_FLAG_CALLER = r"""
import ctypes, signal, sys, processkit
numbers = (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)
before = [signal.getsignal(number) for number in numbers]
lines = processkit.batch([{"args": ["true"], "id": "one"}], out=sys.argv[1])
assert [(line["id"], line["exit_code"]) for line in lines] == [("one", 0)], lines
flag = ctypes.c_int(-1)
assert ctypes.CDLL(None, use_errno=True).prctl(37, ctypes.byref(flag), 0, 0, 0) == 0  # PR_GET_CHILD_SUBREAPER
print(flag.value, [signal.getsignal(number) for number in numbers] == before)
"""


def test_the_caller_gets_no_handler_and_no_subreaper_flag_from_a_batch(tmp_path):
    """With the process-group fallback a batch makes its process a subreaper: that process is
    the one the service forks for it, not the caller (which used to run the batch itself)."""
    env = dict(os.environ, PROCESSKIT_CONTAINMENT="process_group")
    done = subprocess.run(
        [PY, "-c", NO_FLAG_CALLER, str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "0 True\n"


def test_batch_check_raises_when_a_job_failed(tmp_path):
    jobs = [{"args": ["true"], "id": "fine"}, {"args": ["sh", "-c", "exit 3"], "id": "bad"}]
    with pytest.raises(processkit.BatchError) as raised:
        processkit.batch(jobs, out=str(tmp_path / "out"), check=True)
    assert isinstance(raised.value, subprocess.CalledProcessError)
    assert (raised.value.returncode, raised.value.cmd) == (117, ["bad"])
    assert sorted(line["id"] for line in raised.value.lines) == ["bad", "fine"]
    assert len(processkit.batch(jobs[:1], out=str(tmp_path / "again"), check=True)) == 1


def test_a_batch_error_says_how_each_failed_job_ended_and_its_last_lines(tmp_path):
    """A ``BatchError`` said only which ids failed (``1 of 2 jobs did not exit 0: bad``): a CI
    log's traceback held neither the exit nor the cause, which ``processkit-cli batch`` leaves on
    the screen (each failed job's exit, its capture's path and last lines)."""
    out = tmp_path / "out"
    jobs = [
        {"args": ["true"], "id": "fine"},
        {"args": ["sh", "-c", "echo assert 1 == 2; echo the-real-cause >&2; exit 3"], "id": "bad"},
    ]
    with pytest.raises(processkit.BatchError) as raised:
        processkit.batch(jobs, out=str(out), check=True)
    said = str(raised.value)
    assert said.splitlines()[0] == "1 of 2 jobs did not exit 0: bad"
    assert said.splitlines()[1:] == [
        "  bad: exit 3",
        f"    stdout: {out}/bad/capture/stdout.log",
        "    | assert 1 == 2",
        f"    stderr: {out}/bad/capture/stderr.log",
        "    | the-real-cause",
    ], "the CLI's closing block, job for job"
    again = pickle.loads(pickle.dumps(raised.value))  # a Dask worker's raise, read by its client
    assert str(again) == said and again.lines == raised.value.lines


def test_a_batch_errors_shell_line_way_is_in_the_apis_words(tmp_path):
    """A program given as a shell line fails "not found"; the ``BatchError`` says the way as a
    caller of ``processkit.batch`` writes it (``args=``), not the CLI's ``-- sh -c '...' sh {}``."""
    jobs = [{"args": [f"touch {tmp_path}/a.x"], "id": "a"}]
    with pytest.raises(processkit.BatchError) as raised:
        processkit.batch(jobs, out=str(tmp_path / "out"), check=True)
    said = str(raised.value)
    assert said.endswith(
        f"the program 'touch {tmp_path}/a.x' is one word with spaces, and no shell runs a job: give its words "
        'apart in args=, or run one: args=["sh", "-c", "..."]'
    ), said
    assert "sh {}" not in said and "batch:" not in said and not (tmp_path / "a.x").exists()


def test_a_batch_error_names_a_few_failed_jobs_and_counts_the_rest(tmp_path):
    """A ``BatchError`` named up to 20 jobs with their captures' last lines (tens of KB in a
    traceback, a pickle sent back by a worker): it names the first five, as ``--error-format
    json``'s envelope does, and counts the rest."""
    out = tmp_path / "out"
    jobs = [{"args": ["sh", "-c", "echo why; exit 1"], "id": f"j{n}"} for n in range(7)]
    with pytest.raises(processkit.BatchError) as raised:
        processkit.batch(jobs, out=str(out), jobs=1, check=True)
    said = str(raised.value).splitlines()
    assert [line.strip() for line in said if line.startswith("  j")] == [f"j{n}: exit 1" for n in range(5)]
    assert said[-1] == f"  ... and 2 more (see {out}/summary.jsonl)"
    assert len(raised.value.cmd) == 7, "cmd still holds every id"


def test_a_batch_error_names_the_jobs_the_cli_names(tmp_path):
    """The closing block of ``processkit-cli batch`` names failed and timed-out jobs; the API's
    named every job with an exit, a job ended by the batch's stop (107, cancelled) among them."""
    out = tmp_path / "out"
    stops_its_batch = ["sh", "-c", "kill -TERM $PPID; exec sleep 3600"]  # the batch process runs its jobs
    with pytest.raises(processkit.BatchError) as raised:
        processkit.batch([{"args": stops_its_batch, "id": "c"}], out=str(out), check=True)
    assert (raised.value.lines[0]["exit_code"], raised.value.lines[0]["source"]) == (107, "cancelled")
    assert str(raised.value) == "1 of 1 job did not exit 0: c", "a cancelled job is counted, not named below"


def test_a_batch_relative_out_is_the_callers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    processkit.batch([{"args": ["sh", "-c", "echo hi"], "id": "j"}], out="rel")
    assert (tmp_path / "rel" / "j" / "capture" / "stdout.log").read_bytes() == b"hi\n"


def test_an_interrupted_call_ends_its_run_before_the_exception_goes_on():
    """SIGINT to the caller alone (not its group): the call asks the service to stop the run and
    waits for its release; the KeyboardInterrupt then propagates."""
    marker = _marker()
    sleeping = f"sleep\x00{marker}\x00"
    script = (
        "import processkit, sys\n"
        "try:\n"
        "    processkit.run(['sleep', sys.argv[1]])\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
    )
    caller = subprocess.Popen([PY, "-c", script, marker], stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + SAFETY_NET
        while not _processes_naming(sleeping) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _processes_naming(sleeping)
        caller.send_signal(signal.SIGINT)
        assert caller.stdout.readline() == b"interrupted\n"
        assert _processes_naming(sleeping) == [], "the run ended before the exception went on"
        assert caller.wait(timeout=SAFETY_NET) == 0
    finally:
        caller.kill()


def test_a_service_that_was_killed_is_replaced_by_the_next_call():
    """The next call starts a fresh service, which also removes the scratch directory the
    killed one could not."""
    from processkit.api import shared

    first = processkit.run(["true"]).runner_pid
    scratch = shared.connection().scratch
    os.kill(first, signal.SIGKILL)
    try:
        while _alive(first):
            time.sleep(0.01)
        assert os.path.isdir(scratch)
        again = processkit.run(["sh", "-c", "exit 3"])
        assert again.returncode == 3 and again.runner_pid != first
        assert not os.path.exists(scratch)
        with processkit.start(["sleep", "30"]) as handle:
            assert handle.runner_pid == again.runner_pid
            assert handle.inspect()["run_id"] == handle.run_id
    finally:  # the killed service's idle groups: its successor's sweep spares them for a grace, which
        pruned = run_cli("prune")  # may outlast the worker's session (its leak check then finds them)
        assert pruned.returncode == 0, pruned.stderr


def test_the_callers_streams_are_not_held_past_the_runs_that_use_them():
    """An echo run borrows the caller's stdout as it is at the call; once it ended the service
    holds it no more, so a reader of the caller's stdout sees its end when the caller closes it."""
    script = (
        "import os, sys, processkit\n"
        "processkit.run(['echo', 'echoed'], echo=True)\n"
        "os.close(1)\n"
        "sys.stdin.read()\n"  # still alive, its stdout closed
    )
    caller = subprocess.Popen([PY, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        import select

        seen = b""
        while select.select([caller.stdout], [], [], 30)[0]:
            chunk = os.read(caller.stdout.fileno(), 4096)
            if not chunk:
                break
            seen += chunk
        else:
            raise AssertionError("the caller's stdout stayed open after it closed its own copy")
        assert seen == b"echoed\n"
    finally:
        caller.kill()
        caller.wait()

"""A run's root that ended its main thread alone (``pthread_exit`` from main, a worker thread
alive) reads as a zombie in ``/proc/<pid>/stat`` while it runs on: it is a live member, so the
soft stop counts it and gives it its grace, under either mechanism (it was counted as none,
``members_before: 0``, and killed at once)."""

from __future__ import annotations

import json
import os
import select
import signal
import time

from conftest import SAFETY_NET, read_events, run_cli, start_cli
from streams import PY, one, require_mechanism
from test_run_escapees import LINGER

# The root: SIGTERM blocked, a worker thread that waits for it (sigwait), says so (argv[1] +
# ".term") and finishes once argv[1] + ".go" appears; the main thread ends alone once its pid
# is written to argv[1].
WORKER_LIVES_ON = r"""
import ctypes, os, signal, sys, threading, time
where = sys.argv[1]
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

def worker():
    signal.sigwait({signal.SIGTERM})
    open(where + ".term", "w").close()
    while not os.path.exists(where + ".go"):
        time.sleep(0.01)
    os._exit(0)

threading.Thread(target=worker).start()
with open(where + ".tmp", "w") as handle:
    handle.write(str(os.getpid()))
os.replace(where + ".tmp", where)
ctypes.CDLL(None).pthread_exit(None)
"""


def _main_thread_ended(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"


def test_a_root_whose_main_thread_ended_alone_gets_its_grace(tmp_path, containment):
    events, where = tmp_path / "events.jsonl", str(tmp_path / "root")
    proc = start_cli("run", "--grace", "120s", "--jsonl", events, "--", PY, "-c", WORKER_LIVES_ON, where)
    deadline = time.monotonic() + 60
    while not os.path.exists(where) or not _main_thread_ended(int(open(where).read())):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    while not os.path.exists(where + ".term") and proc.poll() is None:  # its grace, or its kill
        assert time.monotonic() < deadline + 60, "the runner neither signalled nor killed the root"
        time.sleep(0.01)
    open(where + ".go", "w").close()
    _, err = proc.communicate(timeout=120)
    found = read_events(events)
    require_mechanism(found, containment)
    assert proc.returncode == one(found, "runner_exit")["code"], err
    assert one(found, "cleanup_started")["members_before"] == 1, one(found, "cleanup_started")
    finished = one(found, "cleanup_finished")
    assert os.path.exists(where + ".term"), f"the root was killed without its grace: {finished}"
    assert finished["shutdown"]["drained_within_grace"] and finished["remaining_pids"] == [], finished


# What a program of a test defines after LINGER's ``linger``: ``linger`` whose main thread ends
# alone once its pid is written (a thread of it sleeps on: its leader reads as a zombie, the
# process runs on), and whether a process's main thread has ended.
ON_A_THREAD = r"""
import ctypes, threading

def linger(where):
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    threading.Thread(target=lambda: time.sleep(300), daemon=True).start()
    with open(where + ".tmp", "w") as handle:
        handle.write(str(os.getpid()))
    os.replace(where + ".tmp", where)
    ctypes.CDLL(None).pthread_exit(None)

def main_thread_ended(pid):
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
"""

# The run's command: a child lingers on a thread (its pid written to argv[1]); the command exits
# 0 once the child's main thread has ended and the test holds a pidfd on it (argv[1] + ".opened").
LEAVES_A_THREAD = (
    LINGER
    + ON_A_THREAD
    + r"""
where = sys.argv[1]
if os.fork() == 0:
    linger(where)
while not os.path.exists(where):
    time.sleep(0.01)
while not main_thread_ended(int(open(where).read())) or not os.path.exists(where + ".opened"):
    time.sleep(0.01)
"""
)


def _leave_a_thread(where: str, *argv) -> tuple[bytes, int]:
    """Runs the CLI (``argv``, whose command is LEAVES_A_THREAD's at ``where``) to its end; its
    stderr and a pidfd on the child its command left running on a thread."""
    proc = start_cli(*argv)
    deadline = time.monotonic() + 60
    while not os.path.exists(where):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    pidfd = os.pidfd_open(int(open(where).read()))
    open(where + ".opened", "w").close()
    _, err = proc.communicate(timeout=120)
    return err, pidfd


def _ended(pidfd: int) -> bool:
    """Whether the process ends within 30 s (killed, it is gone by then); if not, it is killed."""
    try:
        if select.select([pidfd], [], [], 30)[0]:
            return True
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return False
    finally:
        os.close(pidfd)


def test_a_process_left_running_on_a_thread_is_ended_with_the_run(tmp_path, containment):
    """``cgroup.kill`` sends its SIGKILL to such a process's leader, which takes no signal: it
    is killed by its pid (it ran on after the run, listed in ``remaining_pids``)."""
    events, where = tmp_path / "events.jsonl", str(tmp_path / "child")
    err, pidfd = _leave_a_thread(where, "run", "--jsonl", events, "--", PY, "-c", LEAVES_A_THREAD, where)
    found = read_events(events)
    finished = one(found, "cleanup_finished")
    assert _ended(pidfd), f"the process outlived the run: {finished}"
    require_mechanism(found, containment)
    assert (one(found, "runner_exit")["code"], finished["remaining_pids"]) == (0, []), (finished, err)


def test_a_process_a_job_left_running_on_a_thread_is_a_leak(tmp_path):
    """The batch says the job leaky (it was not: the process was taken for a zombie)."""
    manifest, out, where = tmp_path / "m.jsonl", tmp_path / "out", str(tmp_path / "child")
    manifest.write_text(json.dumps({"id": "threads", "args": [PY, "-c", LEAVES_A_THREAD, where]}) + "\n")
    err, pidfd = _leave_a_thread(where, "batch", manifest, "--out", out)
    assert _ended(pidfd), "the process outlived the batch"
    (line,) = map(json.loads, (out / "summary.jsonl").read_text().splitlines())
    assert line.get("leaked") == 1, (line, err)


def test_prune_ends_a_process_left_running_on_a_thread_in_a_sigkilled_runners_group(tmp_path):
    """The sweep of a dead run's group misses it as the teardown's kill did: killed by its pid
    before the group is removed (it was left populated, so the group stayed till the next prune)."""
    where, events = str(tmp_path / "child"), tmp_path / "events.jsonl"
    proc = start_cli("run", "--jsonl", events, "--", PY, "-c", LEAVES_A_THREAD, where)
    deadline = time.monotonic() + 60
    while not os.path.exists(where) or not _main_thread_ended(int(open(where).read())):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    pid = int(open(where).read())
    pidfd = os.pidfd_open(pid)  # before the runner's death: nothing ends it then
    with open(f"/proc/{pid}/cgroup") as handle:
        group = next(line[3:].strip() for line in handle if line.startswith("0::"))
    proc.kill()
    proc.communicate(timeout=SAFETY_NET)
    reaped = run_cli("prune", "--json", "--report-reaped")
    ended = _ended(pidfd)  # in the end: the sweep of the run's process group kills it by its group
    require_mechanism(read_events(events), "cgroup_v2")
    assert ended, f"prune left the process running: {reaped.stderr!r}"
    left = [entry["what"] for entry in json.loads(reaped.stdout)["reaped"]["left"]]
    assert not [what for what in left if what.endswith(group)], "its group was left populated"

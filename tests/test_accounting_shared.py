"""A process-group run counted by the runner's reaped children (``getrusage(RUSAGE_CHILDREN)``,
the host's fallback where no cgroup counts) while the same runner carries another tree, or
collects a process of no group of the run's (a batch process, an earlier run's daemon): the
reaped figure is not the run's alone, so it may not report it as its own ``total_cpu_ms``.

The ``bare`` layout of test_accounting: the fallback containment with no usable v1 hierarchy.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

from conftest import run_cli
from streams import PY


# Tells its pid and its parent's in the file ``argv[3]``, then burns 0.8 s of CPU once ``argv[1]``
# exists, then makes ``argv[2]``.
BURN = """
import os, sys, time
with open(sys.argv[3] + ".part", "w") as pid:
    pid.write(f"{os.getpid()} {os.getppid()}")
os.rename(sys.argv[3] + ".part", sys.argv[3])
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
start = time.process_time()
while time.process_time() - start < 0.8:
    pass
open(sys.argv[2], "w").close()
"""


def bare(monkeypatch, tmp_path):
    plain = tmp_path / "no-cgroup-v1"
    plain.mkdir()
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    monkeypatch.setenv("PROCESSKIT_CGROUP_V1_ROOT", str(plain))
    monkeypatch.delenv("PROCESSKIT_ACCOUNTING", raising=False)


def batch_figures(tmp_path, jobs: list[dict], slots: int) -> dict:
    """Each job's ``resources`` from the summary of ``batch -j slots`` over ``jobs``."""
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out = tmp_path / "out"
    result = run_cli("batch", manifest, "-j", str(slots), "--out", out)
    assert result.returncode == 0, result.stderr
    lines = (out / "summary.jsonl").read_text().splitlines()
    return {line["id"]: line["resources"] for line in map(json.loads, lines)}


def test_a_job_idle_beside_a_burner_is_not_given_the_burners_cpu(tmp_path, monkeypatch):
    bare(monkeypatch, tmp_path)
    started, done = tmp_path / "started", tmp_path / "done"
    jobs = [
        {"id": "burn", "args": [PY, "-c", BURN, str(started), str(done), str(tmp_path / "burn")]},
        {
            "id": "idle",
            "args": ["sh", "-c", 'touch "$0"; while [ ! -e "$1" ]; do sleep 0.05; done', str(started), str(done)],
        },
        # alone once both have ended: the counter is its own again
        {
            "id": "later",
            "args": [PY, "-c", BURN, str(started), str(tmp_path / "later"), str(tmp_path / "tell")],
            "needs": ["burn", "idle"],
        },
    ]
    figures = batch_figures(tmp_path, jobs, 2)
    # The two overlapped: the counter holds both, so neither says a figure of its own.
    assert figures["idle"]["total_cpu_ms"] is None, figures
    assert figures["idle"]["io_read_bytes"] is None, figures
    burn = figures["burn"]["total_cpu_ms"]
    assert burn is None or burn >= 800, figures
    assert figures["later"]["total_cpu_ms"] >= 800, figures


def test_jobs_one_after_another_keep_their_own_cpu(tmp_path, monkeypatch):
    bare(monkeypatch, tmp_path)
    (tmp_path / "started").touch()
    jobs = [
        {
            "id": "burn",
            "args": [PY, "-c", BURN, str(tmp_path / "started"), str(tmp_path / "done"), str(tmp_path / "tell")],
        },
        {"id": "idle", "args": ["true"]},
    ]
    figures = batch_figures(tmp_path, jobs, 1)
    assert figures["burn"]["total_cpu_ms"] >= 800, figures
    assert figures["idle"]["total_cpu_ms"] < 400, figures


# Waits for ``$1``, then until the process whose pid ``$2`` holds is collected (a zombie keeps its /proc entry).
AFTER_REAP = (
    'touch "$0"; while [ ! -e "$1" ]; do sleep 0.05; done; '
    'read pid parent < "$2"; while [ -e /proc/$pid ]; do sleep 0.05; done'
)


def test_a_lone_job_is_not_given_an_escapee_of_an_ended_job(tmp_path, monkeypatch):
    """A job's ``setsid`` daemon outlives its job; the batch (its subreaper) collects it while
    the next job, alone, is open: that job's counter took in the daemon's CPU, not its own."""
    bare(monkeypatch, tmp_path)
    go, done, pid = tmp_path / "go", tmp_path / "done", tmp_path / "pid"
    # The job ends once its daemon has told its pid, from its own session: a daemon still in the
    # job's process group when the job ends is ended with the group, and the next job would wait.
    leave = 'setsid "$0" -c "$1" "$2" "$3" "$4" & while [ ! -e "$4" ]; do sleep 0.01; done; exit 0'
    leaver = ["sh", "-c", leave, PY, BURN, str(go), str(done), str(pid)]
    jobs = [
        {"id": "leaver", "args": leaver},
        {"id": "lone", "args": ["sh", "-c", AFTER_REAP, str(go), str(done), str(pid)], "needs": ["leaver"]},
    ]
    figures = batch_figures(tmp_path, jobs, 1)
    assert figures["lone"]["total_cpu_ms"] is None, figures


def test_a_service_run_is_not_given_a_batch_process_cpu(tmp_path, monkeypatch):
    """The runner service starts a ``processkit.batch`` as a child process and collects it once
    it ends: the counter of a ``processkit.run`` open then took in the whole batch's CPU."""
    import threading

    import processkit

    bare(monkeypatch, tmp_path)
    go, done, batch_pid, reaped = (tmp_path / name for name in ("go", "done", "batch-pid", "reaped"))
    failed: list[BaseException] = []

    def batch() -> None:
        try:
            job = {"id": "burn", "args": [PY, "-c", BURN, str(go), str(done), str(batch_pid)]}
            processkit.batch([job], out=str(tmp_path / "out"), jobs=1)
            gone = f"/proc/{batch_pid.read_text().split()[1]}"  # the burner's parent
            for _ in range(6000):  # until the service collected the batch's process
                if not os.path.exists(gone):
                    break
                time.sleep(0.01)
        except BaseException as exc:  # noqa: BLE001 - told by the main thread
            failed.append(exc)
        finally:
            reaped.touch()

    thread = threading.Thread(target=batch)
    thread.start()
    try:
        result = processkit.run(
            ["sh", "-c", 'touch "$0"; while [ ! -e "$1" ]; do sleep 0.05; done', str(go), str(reaped)]
        )
    finally:
        go.touch()
        thread.join()
    assert not failed, failed
    assert result.returncode == 0
    assert result.resources is not None
    assert result.resources.total_cpu_ms is None, result.resources


def test_a_member_left_to_the_runner_is_still_the_runs_own(tmp_path, monkeypatch):
    """A member whose parent exited is collected by the runner (its subreaper) while its run is
    open; still in the run's process group, its CPU is the run's own figure, not a neighbour's."""
    bare(monkeypatch, tmp_path)
    go, done, pid = tmp_path / "go", tmp_path / "done", tmp_path / "pid"
    orphaned = f'sh -c \'"$0" -c "$1" "$2" "$3" "$4" &\' {PY} \'{BURN}\' {go} {done} {pid}; {AFTER_REAP}'
    job = {"id": "one", "args": ["sh", "-c", orphaned, str(go), str(done), str(pid)]}
    assert batch_figures(tmp_path, [job], 1)["one"]["total_cpu_ms"] >= 800


def test_a_forked_child_carries_none_of_its_parents_open_runs():
    """A fork (a Dask worker's, a caller's) inherits the set of open runs and maybe its lock held
    by another thread: the child's own first run must neither wait for it nor be counted shared."""
    from processkit.containment.accounting import ChildrenUsage

    run = ChildrenUsage()
    try:
        with ChildrenUsage._lock:
            pid = os.fork()
            if pid == 0:  # the lock held at the fork: a fresh one here, and no open run
                os._exit(0 if not ChildrenUsage._open and ChildrenUsage._lock.acquire(timeout=5) else 1)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    finally:
        run.close()


def test_a_lone_cli_run_keeps_its_setsid_members_cpu(tmp_path, monkeypatch):
    """The CLI's ``run`` carries one run in its life: a member that left the run's group
    (``setsid``) and is collected by the runner while the run is open is still that run's, so
    its figure stays (the batch's escapee of an ended job, above, is no job's)."""
    bare(monkeypatch, tmp_path)
    go, done, pid, usage = tmp_path / "go", tmp_path / "done", tmp_path / "pid", tmp_path / "u.json"
    left = f'sh -c \'setsid "$0" -c "$1" "$2" "$3" "$4" &\' {PY} \'{BURN}\' {go} {done} {pid}; {AFTER_REAP}'
    run = ("run", "--jsonl", tmp_path / "x.jsonl", "--no-echo", "--usage-file", usage)
    result = run_cli(*run, "--", "sh", "-c", left, go, done, pid)
    assert result.returncode == 0, result.stderr
    assert json.loads(usage.read_text())["total_cpu_ms"] >= 800


def test_a_lone_cli_run_is_not_given_what_its_caller_handed_over(tmp_path, monkeypatch):
    """A shell's ``setsid burner & exec processkit-cli run ...``: the burner is the runner's
    child from before its run (``leftovers.inherited``), not the run's, though the runner collects it."""
    from conftest import cli_command

    bare(monkeypatch, tmp_path)
    go, done, pid, usage = tmp_path / "go", tmp_path / "done", tmp_path / "pid", tmp_path / "u.json"
    run = [*cli_command(), "run", "--jsonl", str(tmp_path / "x.jsonl"), "--no-echo", "--usage-file", str(usage)]
    handed = 'setsid "$0" -c "$1" "$2" "$3" "$4" & shift 4; exec "$@"'
    args = [PY, BURN, str(go), str(done), str(pid), *run, "--", "sh", "-c", AFTER_REAP, str(go), str(done), str(pid)]
    try:
        result = subprocess.run(["sh", "-c", handed, *args], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    finally:
        go.touch()  # a burner whose run never started ends all the same
    assert result.returncode == 0, result.stderr
    assert json.loads(usage.read_text())["total_cpu_ms"] is None


def test_a_set_up_that_fails_by_any_exception_leaves_no_share_of_the_counter_open(tmp_path, monkeypatch):
    """``containment.create``: a process group's share of the runner's counter (``ChildrenUsage``)
    opens with the container; a step after it that raises (here a RuntimeError, no ContainerError)
    releases it, else every later run of this process would read its CPU as shared: null."""
    from processkit import containment, rundir
    from processkit.containment.accounting import ChildrenUsage
    from processkit.containment.process_group import ProcessGroup
    from processkit.spec import NO_LIMITS

    bare(monkeypatch, tmp_path)
    home = rundir.RunDir(str(tmp_path))
    try:
        for place, step in ((rundir.RunDir, "speaks_for"), (ProcessGroup, "start_counting")):

            def fail(*args, _step=step, **kwargs):
                raise RuntimeError(f"{_step} failed")

            with monkeypatch.context() as patched:
                patched.setattr(place, step, fail)
                try:
                    containment.create(NO_LIMITS, home, adopt_orphans=False)  # the test process no subreaper
                except RuntimeError:
                    pass
            assert not ChildrenUsage._open, f"a failed {step} left its run's share open"
    finally:
        ChildrenUsage._open.clear()
        home.close()

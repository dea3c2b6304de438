"""A batch's SIGCHLD reap whose look at its children is held up by a child not its own to take
(a spawn whose exec is not yet reported, the page process) walks the kernel's list once the
turn's runs have resumed (``Reaper.holding``), in the same turn: an orphan that exits while its
job runs on is collected then, with no other wake-up or teardown to come for it."""

from __future__ import annotations

import os
import signal
import sys

from conftest import start_cli, wait_for_event, wait_for_file
from streams import wait_until
from test_batch_index import page_processes, write


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the name (state, parent, ...); None once collected."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None


def test_an_orphan_that_exits_while_its_job_runs_is_collected_past_a_claimed_zombie(tmp_path):
    """The killed page process stays a zombie the batch does not take (its status is the page's
    to read), shown first to every look at the children; an orphan of a running job exits
    after it, and the batch collects it while the job still runs (its SIGCHLD's reap, held to
    the turn's end, walks the list there), not at the job's teardown."""
    out, pid_file, go_orphan, go_job = (tmp_path / name for name in ("out", "orphan.pid", "go-orphan", "go-job"))
    job = (
        "import os, sys, time\n"
        "pid_file, go_orphan, go_job = sys.argv[1:]\n"
        "if os.fork() == 0:\n"  # a child that leaves its own child an orphan, the batch's to collect
        "    if os.fork() == 0:\n"
        "        with open(pid_file + '.tmp', 'w') as handle: handle.write(str(os.getpid()))\n"
        "        os.rename(pid_file + '.tmp', pid_file)\n"
        "        while not os.path.exists(go_orphan): time.sleep(0.01)\n"
        "        os._exit(0)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "while not os.path.exists(go_job): time.sleep(0.01)\n"
    )
    manifest = write(
        tmp_path / "m.jsonl", [{"args": [sys.executable, "-c", job, str(pid_file), str(go_orphan), str(go_job)]}]
    )
    batch = start_cli("batch", manifest, "--out", str(out))
    try:
        wait_for_event(out / "job-1" / "events.jsonl", "run_started")
        drawer = page_processes(batch.pid)[0]
        os.kill(drawer, signal.SIGKILL)
        wait_until(lambda: (_stat(drawer) or ["?"])[0] == "Z", what="the killed page process never became a zombie")
        wait_for_file(pid_file)
        orphan = int(pid_file.read_text())
        wait_until(
            lambda: (_stat(orphan) or ["?", "?"])[1] == str(batch.pid), what="the orphan never came to the batch"
        )
        go_orphan.touch()
        wait_until(lambda: _stat(orphan) is None, what="the orphan was left a zombie while its job ran")
        assert batch.poll() is None and not go_job.exists()  # collected with the job still running
    finally:
        go_orphan.touch()
        go_job.touch()
    _, err = batch.communicate(timeout=60)
    assert batch.returncode == 0, err

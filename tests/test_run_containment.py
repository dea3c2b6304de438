"""Containment: what is left of the child's tree when a run ends, under each mechanism.

cgroup v2 reaches every descendant, ``setsid`` double-forks included; the process-group
fallback reaches only its group (its documented limit). Either way PR_SET_PDEATHSIG takes the
direct child down with a SIGKILLed runner.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
import time

import pytest

from conftest import SAFETY_NET, SHORT_EXIT_DRAIN, pid_alive, read_events_tolerant, run_cli, start_cli, wait_for_event
from own_tmp import own_tmp  # noqa: F401
from test_accounting import v1_group_dirs
from streams import cgroup_v2_dir, one, python_child, require_mechanism, run_checked, seconds_between

LEAVE_DESCENDANTS = r"""
import os, sys, time
where, keep_pipes = sys.argv[1], sys.argv[2] == "keep-pipes"

def linger(name):
    if not keep_pipes:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
    with open(f"{where}/{name}.tmp", "w") as handle:
        handle.write(str(os.getpid()))
    os.replace(f"{where}/{name}.tmp", f"{where}/{name}")
    time.sleep(60)
    os._exit(0)

if os.fork() == 0:  # a background grandchild, in the child's own process group
    linger("grandchild")
middle = os.fork()
if middle == 0:  # a double-forked escapee in a session of its own
    os.setsid()
    if os.fork() == 0:
        linger("escapee")
    os._exit(0)
os.waitpid(middle, 0)  # gone before the root exits: the teardown counts only the two left
while not (os.path.exists(f"{where}/grandchild") and os.path.exists(f"{where}/escapee")):
    time.sleep(0.01)
"""


@pytest.fixture
def leftovers(tmp_path):
    """The pids the child leaves behind; any survivor is killed when the test ends."""
    found: dict[str, int] = {}
    yield found
    for pid in found.values():
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def leave_descendants(tmp_path, leftovers, keep_pipes: bool = False):
    command = python_child(LEAVE_DESCENDANTS) + [str(tmp_path), "keep-pipes" if keep_pipes else "detach"]
    # the pipes kept are read on after the root's exit for a bound (tests/test_exit_drain.py), shortened
    proc, events = run_checked(
        tmp_path, command=command, returncode=0, patched=SHORT_EXIT_DRAIN if keep_pipes else None
    )
    for name in ("grandchild", "escapee"):
        leftovers[name] = int((tmp_path / name).read_text())
    return proc, events


def test_a_natural_exit_kills_every_descendant_the_mechanism_reaches(tmp_path, containment, leftovers):
    proc, events = leave_descendants(tmp_path, leftovers)
    require_mechanism(events, containment)
    assert not pid_alive(leftovers["grandchild"])
    escaped = containment == "process_group"  # setsid leaves a process group, never a cgroup
    assert not pid_alive(leftovers["escapee"]), "the runner, the escapee's subreaper, ends it after the teardown"
    said = b"1 process(es) of this run had left its process group (setsid or setpgid)"
    assert (said in proc.stderr) is escaped, proc.stderr
    assert one(events, "cleanup_started")["members_before"] == (1 if escaped else 2)
    finished = one(events, "cleanup_finished")
    assert (finished["remaining"], finished["remaining_pids"], finished["kill_error"]) == (0, [], False)


def test_an_escapee_holding_the_pipes_cannot_hang_the_runner(tmp_path, containment, leftovers):
    _, events = leave_descendants(tmp_path, leftovers, keep_pipes=True)
    require_mechanism(events, containment)
    lingered = seconds_between(events, "cleanup_finished", "runner_exit")
    if containment == "cgroup_v2":  # well under the drain bound (2 s), which a loaded machine's delays never reach
        assert lingered < 2.0 - 0.5, "the pipes should close as soon as the whole tree is killed"
    else:
        assert not pid_alive(leftovers["escapee"]), "ended once the drain gave its pipes up"
        assert lingered < 2.0 + 1.5, "the output drain after teardown is bounded"


def _remove_when_empty(path: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            os.rmdir(path)
            return
        except OSError as exc:
            if exc.errno == errno.ENOENT or time.monotonic() > deadline:
                return
            time.sleep(0.01)


def test_a_sigkilled_runner_takes_its_direct_child_with_it(tmp_path, containment, own_tmp):
    """Under ``own_tmp``: another same-user runner's sweep of the host's /tmp would otherwise end
    the dead run's child in its stead, and the test could not fail."""
    jsonl = tmp_path / "run.jsonl"
    proc = start_cli("run", "--jsonl", jsonl, "--", "sleep", "30")
    wait_for_event(jsonl, "members_snapshot")
    started = one(read_events_tolerant(jsonl), "run_started")
    require_mechanism([started], containment)
    assert started["abrupt_cleanup"] == "direct_child_only"
    child = started["root_pid"]
    # The dead runner's groups: its v2 group under cgroup_v2 and, on a hybrid host, its v1
    # accounting groups under either mechanism. No sweep can find its run directory (own_tmp),
    # so this test removes them itself.
    groups = v1_group_dirs(child) + ([cgroup_v2_dir(child)] if containment == "cgroup_v2" else [])
    try:
        proc.kill()
        proc.communicate(timeout=SAFETY_NET)
        deadline = time.monotonic() + 60
        while pid_alive(child) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pid_alive(child), "the child outlived its SIGKILLed runner"
        assert "runner_exit" not in [e["event"] for e in read_events_tolerant(jsonl)]
    finally:
        if pid_alive(child):  # the failure above: end it, so its groups empty
            os.kill(child, signal.SIGKILL)
        for group in groups:
            if group is not None:
                _remove_when_empty(group)


def test_a_batch_job_escapee_is_killed_at_the_batch_end_and_said(tmp_path, containment, leftovers):
    """A batch carries many jobs in one process: an orphan that left its job's process group
    comes to the batch (the subreaper) with no word of whose it is. Once every job has ended it
    is killed and said in one warning above the closing line; cgroup v2 killed it with its job."""
    command = python_child(LEAVE_DESCENDANTS) + [str(tmp_path), "detach"]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "leaves", "args": command}) + "\n")
    proc = run_cli("batch", manifest, "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    for name in ("grandchild", "escapee"):
        leftovers[name] = int((tmp_path / name).read_text())
    require_mechanism(read_events_tolerant(tmp_path / "out" / "leaves" / "events.jsonl"), containment)
    assert not pid_alive(leftovers["grandchild"]) and not pid_alive(leftovers["escapee"])
    said = [line for line in proc.stderr.decode().splitlines() if "had left their job's process group" in line]
    assert len(said) == (1 if containment == "process_group" else 0), proc.stderr
    # the grandchild in its group (and under cgroup v2 the escapee, which its group kept) outlived
    # its command: the job is leaky (test_batch_leaks.py)
    (line,) = [json.loads(text) for text in (tmp_path / "out" / "summary.jsonl").read_text().splitlines()]
    assert line["leaked"] == (1 if containment == "process_group" else 2)
    assert proc.stderr.decode().splitlines()[-1] == "batch: 1 of 1 job exited 0, 1 leaky (left processes running)"


def test_a_batch_that_fails_still_ends_its_jobs_escapees(tmp_path, containment, leftovers):
    """A batch that ends in its setup failure (111: a line appended to its manifest while it
    ran) ended no escapee: its sweep ran only on the way out of a batch that finished."""
    manifest = tmp_path / "m.jsonl"
    lines = [json.dumps({"args": ["true"], "id": f"j{number:02d}"}) + "\n" for number in range(1, 41)]
    lines[0] = json.dumps({"args": python_child(LEAVE_DESCENDANTS) + [str(tmp_path), "detach"], "id": "j01"}) + "\n"
    appended = json.dumps({"args": ["true"], "id": "late"}) + "\n"
    append = f"open({str(manifest)!r}, 'a').write({appended!r})"
    lines[1] = json.dumps({"args": [sys.executable, "-c", append], "id": "j02"}) + "\n"
    manifest.write_text("".join(lines))
    proc = run_cli("batch", manifest, "--jobs", "1", "--out", tmp_path / "out")
    assert proc.returncode == 111, proc.stderr
    for name in ("grandchild", "escapee"):
        leftovers[name] = int((tmp_path / name).read_text())
    require_mechanism(read_events_tolerant(tmp_path / "out" / "j01" / "events.jsonl"), containment)
    assert not pid_alive(leftovers["grandchild"]) and not pid_alive(leftovers["escapee"])

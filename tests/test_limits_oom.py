"""A memory cap so small that the kernel OOM-kills the child before or within its exec ends the
child alone: never the runner that spawned it, nor the other runs that runner carries.

Why this needs a test of its own: the native spawn's cheap child shares the runner's memory
until its execve (csrc/spawn.c), and the kernel's OOM kill ends every process sharing its
victim's memory, so a capped child killed there took the runner with it (the CLI's run left a
stream without ``runner_exit`` and a stale record; the API's service and a batch died with every
run they carried). A run whose groups hold a memory limit is spawned with the copy-on-write
child; the Popen fallback's forked child always had memory of its own, and both spawns must
report the same. 4 KiB is below what any exec needs here, so the child is killed every time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import processkit
from conftest import read_events, registry_entries, run_cli
from test_limits import own_cgroup_dirs

TINY = "4096"  # one page: the exec's first charges in the group are already over it


def memory_cap_here(containment: str) -> bool:
    """Whether the caps layer can set a memory limit for a run of this containment: the v2
    memory controller offered to our group (cgroup_v2), a writable v1 memory hierarchy (the
    process-group fallback's caps; a cgroup v2 run falls back to it too)."""
    dirs = own_cgroup_dirs()
    v1 = "memory" in dirs and os.access(dirs["memory"], os.W_OK)
    unified = dirs.get("unified")
    if containment == "process_group" or not unified or not os.access(unified, os.W_OK):
        return v1
    try:
        return v1 or "memory" in Path(unified, "cgroup.controllers").read_text().split()
    except OSError:
        return v1


def skip_without_a_memory_cap(containment: str = "cgroup_v2") -> None:
    if not memory_cap_here(containment):
        pytest.skip(f"no memory limit can be set here for a {containment} run")


def test_the_cli_run_reports_the_childs_oom_kill_and_its_runner_survives(
    tmp_path, spawn_backend, containment, isolated_registry
):
    skip_without_a_memory_cap(containment)
    jsonl = tmp_path / "events.jsonl"
    result = run_cli("run", "--jsonl", jsonl, "--max-memory", TINY, "--", "true")
    events = {event["event"]: event for event in read_events(jsonl)}
    assert "runner_exit" in events, f"the runner died: exit {result.returncode}, stream {sorted(events)}"
    assert result.returncode == 137, result.stderr  # 128 + SIGKILL: the child's death, as its exit code
    assert events["runner_exit"]["code"] == 137 and events["runner_exit"]["source"] == "child_exit"
    assert events["root_exited"]["outcome"] == "signalled" and events["root_exited"]["signal"] == 9
    assert events["limit_evidence"]["memory"] == "tripped"
    assert b"OOM killer" in result.stderr
    assert registry_entries(isolated_registry) == []


def test_an_api_call_with_a_tiny_cap_returns_and_the_service_carries_on():
    """The service carries an uncapped run across the capped call's OOM kill, and serves the
    next call: one process, both kinds of child side by side."""
    skip_without_a_memory_cap()
    with processkit.start(["sleep", "30"]) as alongside:
        capped = processkit.run(["true"], max_memory=int(TINY))
        assert capped.returncode == -9 and capped.oom_killed is not False
        assert capped.runner_pid == alongside.runner_pid
        assert alongside.poll() is None, "the uncapped run beside it is still running"
    after = processkit.run(["sh", "-c", "exit 3"])
    assert after.returncode == 3 and after.runner_pid == capped.runner_pid


def test_a_batch_survives_a_jobs_oom_kill_and_records_every_job(tmp_path):
    skip_without_a_memory_cap()
    manifest = tmp_path / "manifest.jsonl"
    jobs = [{"id": "tiny", "args": ["true"], "max_memory": int(TINY)}, {"id": "normal", "args": ["sh", "-c", "exit 0"]}]
    manifest.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    result = run_cli("batch", manifest, "--out", out, "--jobs", "2", "--junit", junit)
    assert result.returncode == 117, result.stderr  # batch_failed: a job did not exit 0
    summary = {line["id"]: line for line in read_events(out / "summary.jsonl")}
    assert summary["tiny"]["exit_code"] == 137 and summary["tiny"]["source"] == "child_exit"
    assert summary["normal"]["exit_code"] == 0 and "oom_kills" not in summary["normal"]
    # Why the SIGKILL came, as `run` warns of it: the kill alone reads as anyone's `kill -9`
    assert summary["tiny"]["oom_kills"] >= 1
    said = "OOM killer ended"
    assert result.stderr.decode().count(said) == 2, result.stderr  # its line, and the failures' list
    assert said in (out / "index.html").read_text() and said in junit.read_text()


def v2_parent_with_a_memory_limit(tmp_name: str) -> str | None:
    """A fresh v2 group beside this process's own group's children, its ``memory.max`` settable
    (the memory controller on for our group's children), or None where the host has none."""
    unified = own_cgroup_dirs().get("unified")
    if not unified or not os.access(unified, os.W_OK):
        return None
    try:
        if "memory" not in Path(unified, "cgroup.subtree_control").read_text().split():
            Path(unified, "cgroup.subtree_control").write_text("+memory")
        parent = os.path.join(unified, tmp_name)
        os.mkdir(parent)
    except OSError:
        return None
    return parent


def test_a_run_under_a_limited_parent_apart_from_the_runner_ends_the_child_alone(tmp_path, monkeypatch):
    """PROCESSKIT_CGROUP_PARENT names a group that does not hold the runner and has a tiny
    memory.max: its OOM kill must end the child, not the runner (an uncapped run, so only the
    walk up from the run's group can tell)."""
    parent = v2_parent_with_a_memory_limit(f"processkit-test-oom-{os.getpid()}")
    if parent is None:
        pytest.skip("no cgroup v2 memory controller to put a limit on a parent here")
    try:
        Path(parent, "memory.max").write_text(TINY)
        monkeypatch.setenv("PROCESSKIT_CGROUP_PARENT", parent)
        jsonl = tmp_path / "events.jsonl"
        result = run_cli("run", "--jsonl", jsonl, "--", "true")
        events = {event["event"]: event for event in read_events(jsonl)}
        assert "runner_exit" in events, f"the runner died: exit {result.returncode}, stream {sorted(events)}"
        assert events["run_started"]["mechanism"] == "cgroup_v2"
        assert result.returncode == 137 and events["root_exited"]["signal"] == 9, result.stderr
    finally:
        os.rmdir(parent)


@pytest.mark.parametrize("limit, limited", [("8192", True), ("max", False)])
def test_the_walk_up_finds_a_limit_on_any_group_above_the_run(tmp_path, limit, limited):
    """A group without the memory controller between the run and the limit does not hide it;
    the walk ends above the hierarchy's root (no cgroup.procs)."""
    from processkit.engine.spawn_memory import limited_apart

    root = tmp_path / "root"
    run = root / "limited" / "plain" / "run"
    run.mkdir(parents=True)
    for group in (root, root / "limited", root / "limited" / "plain"):
        (group / "cgroup.procs").write_text("")
    (root / "limited" / "memory.max").write_text(limit + "\n")
    assert limited_apart(str(run)) is limited


def test_an_unreadable_mount_table_makes_the_walk_look_further_never_fail(tmp_path, monkeypatch):
    """Where the runner's own group cannot be told (the mount table unreadable), every group up
    to the root is looked at: the copy-on-write child, never a refused spawn."""
    from processkit import mountinfo
    from processkit.engine import spawn_memory

    def unreadable(path: str = mountinfo.MOUNTINFO):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(mountinfo, "mounts", unreadable)
    monkeypatch.setattr(spawn_memory, "_runner", None, raising=False)  # no cached group
    root = tmp_path / "root"
    run = root / "limited" / "run"
    run.mkdir(parents=True)
    for group in (root, root / "limited"):
        (group / "cgroup.procs").write_text("")
    (root / "limited" / "memory.max").write_text("8192\n")
    assert spawn_memory.limited_apart(str(run)) is True


@pytest.mark.parametrize("count", [-1, 0])
def test_a_summary_lines_oom_count_below_one_is_read_as_none(tmp_path, count):
    """A summary line's ``oom_kills`` of 0 or less (another writer's, or edited) said
    ``the kernel's OOM killer ended -1 process(es)`` on the batch's page; the batch writes it
    only when above 0, and a reader now takes it only then."""
    out = tmp_path / "out"
    proc = run_cli("batch", "--out", out, "--", "sh", "-c", "exit 1", ":::", "1", "2")
    assert proc.returncode == 117, proc.stderr
    lines = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    for line, kills in zip(lines, [count, 2]):
        line["oom_kills"] = kills
    (out / "summary.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    page = tmp_path / "page.html"
    proc = run_cli("report", out, "-o", page)
    assert proc.returncode == 0, proc.stderr
    said = page.read_text()
    assert "OOM killer ended 2 process(es)" in said, "the count above 0 is said"
    assert f"OOM killer ended {count} " not in said

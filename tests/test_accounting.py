"""Per-run accounting with no flag and no cap: the whole tree's peak memory, CPU and peak process
count from the kernel's counters, on this host's layout and on the process-group fallback.

``layout`` runs each test three ways: the host's default (a cgroup v2 group where one can be
made, with the figures from the accounting groups in the v1 hierarchies on a hybrid host),
``process_group`` (the forced fallback containment, still accounted by the v1 groups), and
``bare`` (the fallback on a host with no usable v1 hierarchy: only the subreaper's rusage).
The stream of every run is held to the reference schema (``check_stream``).
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_event, wait_for_file
from control_support import check_schema, json_out
from streams import PY, check_stream, one, python_child, reference_summary, run_checked
from accounting_workloads import HOLD_100_MIB, TWENTY_THREADS, concurrent, early_burners
from test_accounting_reads import v2_usage
from test_limits import own_cgroup_dirs
from own_tmp import OwnTmp, own_tmp  # noqa: F401

MiB = 1 << 20
V1_ACCOUNTED = ("memory", "pids", "cpuacct")

EARLY_BURNERS = early_burners(0.3)
TWO_HOLDERS = concurrent(2, HOLD_100_MIB)  # two grandchildren each touch 100 MiB, holding it until both do
FOUR_AT_ONCE = concurrent(3, "pass")  # the root and three children alive at once


def v1_usable() -> bool:
    dirs = own_cgroup_dirs()
    return all(name in dirs and os.access(dirs[name], os.W_OK) for name in V1_ACCOUNTED)


@pytest.fixture(params=["default", "process_group", "bare"])
def layout(request, monkeypatch, tmp_path):
    if request.param != "default":
        monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    else:
        monkeypatch.delenv("PROCESSKIT_CONTAINMENT", raising=False)
    if request.param == "bare":
        plain = tmp_path / "no-cgroup-v1"
        plain.mkdir()
        monkeypatch.setenv("PROCESSKIT_CGROUP_V1_ROOT", str(plain))
    elif not v1_usable():
        pytest.skip("this host has no writable v1 memory, pids and cpuacct hierarchies")
    monkeypatch.delenv("PROCESSKIT_ACCOUNTING", raising=False)
    return request.param


def accounted_run(tmp_path, code: str, *args):
    """Run ``code`` with a path argument to its natural exit; (the whole tree's figures its
    --usage-file gives, in the fields of a resource_summary; that whole file). The stream's own
    summary is the reference's (``reference_summary``): no member lives at its read point."""
    usage_file = tmp_path / "usage.json"
    _, events = run_checked(
        tmp_path, "--no-echo", "--usage-file", usage_file, *args, command=[*python_child(code), tmp_path / "f"]
    )
    usage = json.loads(usage_file.read_text())
    reference_summary(events, forced=False)
    return {name: usage[name] for name in one(events, "resource_summary") if name in usage}, usage


def test_a_plain_run_reports_the_sum_of_two_concurrent_holders(tmp_path, layout, spawn_backend):
    summary, usage = accounted_run(tmp_path, TWO_HOLDERS)
    assert summary["read_error"] is False
    if layout == "bare":  # no counter holds a tree's peak, and nothing is alive to sum
        assert summary["peak_memory_bytes"] is None, summary
        return
    assert 200 * MiB <= summary["peak_memory_bytes"] < 400 * MiB, summary
    assert usage["sources"]["peak_memory_bytes"] == "memory.max_usage_in_bytes (v1)"


def test_cpu_counts_grandchildren_that_exit_before_the_root(tmp_path, layout):
    summary, usage = accounted_run(tmp_path, EARLY_BURNERS)
    assert summary["total_cpu_ms"] is not None and summary["total_cpu_ms"] >= 550, summary
    assert usage["cpu_ns"] // 1_000_000 == summary["total_cpu_ms"], usage
    assert usage["user_ns"] + usage["system_ns"] == usage["cpu_ns"], usage
    if layout == "bare":
        assert usage["sources"]["total_cpu_ms"].startswith("getrusage"), usage
        assert summary["io_read_bytes"] is not None and summary["io_write_bytes"] is not None, summary


def test_the_peak_process_count_of_a_tree(tmp_path, layout):
    summary, usage = accounted_run(tmp_path, FOUR_AT_ONCE)
    if layout == "bare":
        assert summary["peak_process_count"] is None, summary
        return
    assert summary["peak_process_count"] == 4, summary
    assert usage["sources"]["peak_process_count"] == "pids.peak (v1)"


def test_the_peak_process_count_charges_every_task_on_every_backend(tmp_path, layout):
    """The reference's figure is the pids controller's pids.peak, which charges threads: one
    process of twenty-one threads reads 21 on each backend that has the counter, null elsewhere
    (never a process count on one backend and a task count on another)."""
    summary, usage = accounted_run(tmp_path, TWENTY_THREADS)
    if layout == "bare":
        assert summary["peak_process_count"] is None, summary
        return
    assert summary["peak_process_count"] == 21, summary
    assert usage["sources"]["peak_process_count"].startswith("pids.peak"), usage


def test_turned_off_the_figures_come_from_the_containment_alone(tmp_path, monkeypatch):
    """The benchmark's baseline: PROCESSKIT_ACCOUNTING=0 makes no accounting groups."""
    monkeypatch.delenv("PROCESSKIT_CONTAINMENT", raising=False)
    monkeypatch.setenv("PROCESSKIT_ACCOUNTING", "0")
    summary, usage = accounted_run(tmp_path, FOUR_AT_ONCE)
    assert summary["peak_process_count"] is None, summary
    assert not any("(v1)" in source for source in usage["sources"].values()), usage


def test_an_oom_kill_under_a_cap_is_counted(tmp_path):
    if not v1_usable():
        pytest.skip("no writable v1 hierarchies")
    hog = "block = bytearray(400 << 20)\nfor i in range(0, len(block), 4096): block[i] = 1"
    usage_file = tmp_path / "usage.json"
    proc, events = run_checked(tmp_path, "--max-memory", "64m", "--usage-file", usage_file, command=python_child(hog))
    if one(events, "limit_evidence")["memory"] != "tripped":
        pytest.skip("the cap did not end in an OOM kill here")
    assert one(events, "root_exited")["signal"] == signal.SIGKILL
    assert json.loads(usage_file.read_text())["oom_kills"] >= 1
    assert "OOM killer ended" in proc.stderr.decode(), proc.stderr
    (jsonl,) = tmp_path.glob("run-*.jsonl")
    page = tmp_path / "page.html"
    shown = run_cli("report", jsonl, "--usage-file", usage_file, "-o", page)
    assert shown.returncode == 0, shown.stderr
    assert "OOM killer ended" in page.read_text() and "OOM kills" in page.read_text()


def test_the_api_gets_the_extended_figures(tmp_path, monkeypatch):
    monkeypatch.delenv("PROCESSKIT_CONTAINMENT", raising=False)
    import processkit

    burn = "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass"
    result = processkit.run([PY, "-c", burn])
    assert result.returncode == 0
    usage = result.usage
    assert usage is not None and usage.cpu_ns is not None and usage.cpu_ns >= 150_000_000, usage
    extra = result.resources.extra
    assert {"user_cpu_ms", "system_cpu_ms", "oom_kills", "cpu_ns", "user_ns", "system_ns", "sources"} <= set(extra)
    assert extra["sources"]["total_cpu_ms"] == usage.sources["total_cpu_ms"]
    assert result.resources.total_cpu_ms == usage.total_cpu_ms
    assert result.oom_killed is False


def test_doctor_names_the_accounting_mechanism(tmp_path, monkeypatch, layout):
    text = run_cli("doctor").stdout.decode()
    line = next(line for line in text.splitlines() if line.strip().startswith("accounting:"))
    expected = {"default": "cgroup_v1", "process_group": "cgroup_v1+rusage", "bare": "rusage"}[layout]
    assert line.split()[1] == expected, text
    met = run_cli("doctor", "--json", "--require-accounting", expected)
    assert met.returncode == 0, met.stderr
    check_schema("doctor", json_out(met))
    unmet = run_cli("doctor", "--json", "--require-accounting", "cgroup_v2-elsewhere")
    assert unmet.returncode == 116
    report = json_out(unmet)
    check_schema("doctor", report)
    assert any("accounting" in mismatch and expected in mismatch for mismatch in report["mismatches"]), report


def v1_group_dirs(pid: int) -> list[str]:
    """Directories of the run's v1 groups that ``pid`` sits in."""
    dirs = own_cgroup_dirs()
    found = []
    with open(f"/proc/{pid}/cgroup") as handle:
        for line in handle:
            _, names, path = line.rstrip("\n").split(":", 2)
            for name in names.split(","):
                if name in V1_ACCOUNTED and os.path.basename(path).startswith("processkit-run-"):
                    found.append(os.path.join(dirs[name], os.path.basename(path)))
    return found


def killed_holding_run(tmp_path) -> tuple[int, list[str]]:
    """A run whose child holds on, its runner SIGKILLed once the child is up: the runner's pid
    (waited for) and the run's v1 groups, left behind for a sweeper to find."""
    jsonl, ready = tmp_path / "run.jsonl", tmp_path / "ready"
    hold = "import sys, time\nopen(sys.argv[1], 'w').close()\ntime.sleep(60)"
    runner = start_cli("run", "--jsonl", jsonl, "--no-echo", "--", PY, "-c", hold, ready)
    try:
        wait_for_file(ready)
        groups = v1_group_dirs(wait_for_event(jsonl, "run_started")["root_pid"])
        runner.send_signal(signal.SIGKILL)
        runner.wait(SAFETY_NET)
    finally:
        runner.kill()
        runner.wait()
    return runner.pid, groups


@pytest.mark.parametrize("ending", ["exit", "runner_killed"])
def test_no_accounting_group_outlives_its_run(tmp_path, monkeypatch, ending, own_tmp):
    """A run removes its groups; a SIGKILLed runner's are removed by ``prune``. Its run directory
    is in the test's own /tmp (``own_tmp``): another worker's prune would take the victim first."""
    if not v1_usable():
        pytest.skip("no writable v1 hierarchies")
    monkeypatch.delenv("PROCESSKIT_CONTAINMENT", raising=False)
    jsonl, ready, go = tmp_path / "run.jsonl", tmp_path / "ready", tmp_path / "go"
    hold = (
        "import os, sys, time\nopen(sys.argv[1], 'w').close()\nwhile not os.path.exists(sys.argv[2]): time.sleep(0.005)"
    )
    runner = start_cli("run", "--jsonl", jsonl, "--no-echo", "--", PY, "-c", hold, ready, go)
    try:
        wait_for_file(ready)
        groups = v1_group_dirs(wait_for_event(jsonl, "run_started")["root_pid"])
        assert len(groups) == len(V1_ACCOUNTED), groups
        if ending == "runner_killed":
            runner.send_signal(signal.SIGKILL)
        else:
            go.touch()
        runner.wait(SAFETY_NET)
    finally:
        runner.kill()
        runner.wait()
    if ending == "exit":
        check_stream(jsonl, 0)
    else:
        assert os.path.isdir(groups[0])  # the runner could not remove them
        proc = run_cli("prune")
        assert proc.returncode == 0, proc.stderr
    assert [group for group in groups if os.path.lexists(group)] == []


def test_a_live_run_answers_with_its_usage_so_far(tmp_path, monkeypatch):
    """``inspect --usage`` (CLI) and ``RunHandle.usage()`` (API): the figures while it runs."""
    monkeypatch.delenv("PROCESSKIT_CONTAINMENT", raising=False)
    import processkit

    ready, go = tmp_path / "ready", tmp_path / "go"
    hold = (
        "import os, sys, time\nblock = bytearray(64 << 20)\nfor i in range(0, len(block), 4096): block[i] = 1\n"
        "open(sys.argv[1], 'w').close()\nwhile not os.path.exists(sys.argv[2]): time.sleep(0.005)"
    )
    handle = processkit.start([PY, "-c", hold, str(ready), str(go)])
    try:
        wait_for_file(ready)
        usage = handle.usage()
        proc = run_cli("inspect", "--run-id", handle.run_id, "--usage", "--json")
        assert proc.returncode == 0, proc.stderr
        reply = json_out(proc)
        assert reply["usage_version"] == 1 and reply["run_id"] == handle.run_id
        assert reply["total_cpu_ms"] is not None and "total_cpu_ms" in reply["sources"], reply
        if v1_usable():
            assert usage.peak_memory_bytes >= 64 * MiB, usage
        shown = run_cli("inspect", "--run-id", handle.run_id, "--usage").stdout.decode().splitlines()
        assert [line.split() for line in shown if line.startswith("read_error:")] == [["read_error:", "false"]]
        snapshot = run_cli("inspect", "--run-id", handle.run_id, "--json")
        check_schema("inspect", json_out(snapshot))  # the reference's snapshot keeps its shape
    finally:
        go.touch()
    assert handle.wait() == 0


def test_a_v2_group_with_its_controllers_gives_every_figure(tmp_path):
    """Where the parent delegates memory, pids and io (not this project's hosts): the
    controllers are switched on, and the group's own files give each figure (a fake group)."""
    from processkit.containment import cgroup_v2

    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (parent / "cgroup.subtree_control").write_text("")
    cgroup_v2.enable_accounting(str(parent))
    assert (parent / "cgroup.subtree_control").read_text() == "+memory +pids +io"
    (parent / "cgroup.subtree_control").write_text("")
    cgroup_v2.enable_accounting(str(parent))  # a batch's next run: once per parent and process
    assert (parent / "cgroup.subtree_control").read_text() == ""
    group = parent / "run"
    group.mkdir()
    (group / "cpu.stat").write_text("usage_usec 250000\nuser_usec 200000\nsystem_usec 50000\n")
    (group / "memory.peak").write_text(f"{210 * MiB}\n")
    (group / "pids.peak").write_text("3\n")
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 0\noom 1\noom_kill 1\n")
    (group / "io.stat").write_text("254:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n")
    usage = v2_usage(group)
    assert (usage.peak_memory_bytes, usage.total_cpu_ms, usage.user_cpu_ms, usage.system_cpu_ms) == (
        210 * MiB,
        250,
        200,
        50,
    )
    assert (usage.peak_process_count, usage.oom_kills, usage.io_read_bytes, usage.io_write_bytes) == (3, 1, 4096, 8192)
    assert usage.cpu_ns == 250_000_000 and usage.sources["peak_memory_bytes"] == "memory.peak (v2)"


@pytest.mark.parametrize("emptied", [False, True])
def test_prune_finds_the_groups_a_dead_run_recorded(tmp_path, monkeypatch, emptied, own_tmp):
    """A sweeper that does not make groups where the dead run did (another v1 group, another
    session: here ``PROCESSKIT_CGROUP_V1_ROOT`` hides the real hierarchies from ``prune``) still
    ends the run's v1 groups, from the record in its run directory; also when an older sweeper
    already took the lock away (``emptied``) and left only the record."""
    if not v1_usable():
        pytest.skip("no writable v1 hierarchies")
    monkeypatch.delenv("PROCESSKIT_CONTAINMENT", raising=False)
    runner_pid, groups = killed_holding_run(tmp_path)
    run_dir = run_dir_of(own_tmp, runner_pid)
    if emptied:
        os.unlink(os.path.join(run_dir, "live.lock"))
    hidden = tmp_path / "no-v1"
    hidden.mkdir()
    env = dict(os.environ, PROCESSKIT_CGROUP_V1_ROOT=str(hidden))
    proc = run_cli("prune", "--json", "--report-reaped", env=env)
    assert proc.returncode == 0, proc.stderr
    assert [group for group in groups if os.path.lexists(group)] == [], json.loads(proc.stdout)
    assert not os.path.lexists(run_dir)


def run_dir_of(tmp: OwnTmp, pid: int) -> str:
    """The killed runner's one run directory, as the test sees it: in the test's own /tmp, which
    no other worker's prune or sweep reaps before this test's own prune looks at it."""
    (found,) = tmp.run_dirs(f"pkc-{pid}-*")
    return tmp.outside(found)


def test_the_usage_counts_what_members_did_until_teardown_killed_them(tmp_path, layout):
    """The stream's summary is read before teardown (the reference's order, and its figures: the
    live members' on cgroup v2, none on the fallback); the usage file is the whole tree's, read
    once the tree is gone, so CPU burnt during the grace by a SIGTERM handler is in.

    The run is stopped once the child says its handler is in place: a ``--timeout`` fired at a
    fixed time, which an interpreter's start-up could outlast on a loaded host (the SIGTERM then
    ended the child before it had a handler, and nothing burnt)."""
    code = """
import signal, sys, time
def burn(*_):
    end = time.process_time() + 0.4
    while time.process_time() < end:
        pass
    sys.exit(0)
signal.signal(signal.SIGTERM, burn)
open(sys.argv[1], "w").close()
time.sleep(60)
"""
    usage_file, jsonl, handled = tmp_path / "usage.json", tmp_path / "run.jsonl", tmp_path / "f"
    runner = start_cli(
        "run", "--jsonl", jsonl, "--no-echo", "--grace", "30s", "--usage-file", usage_file,
        "--", *python_child(code), handled,
    )  # fmt: skip
    try:
        wait_for_file(handled, timeout=60)
        runner.send_signal(signal.SIGTERM)  # a stop: the tree is stopped gracefully, as by a timeout
        assert runner.wait(60) == 107
    finally:
        runner.kill()
        runner.wait()
    events = check_stream(jsonl, 107)
    summary, usage = reference_summary(events, forced=True), json.loads(usage_file.read_text())
    assert usage["total_cpu_ms"] >= (summary["total_cpu_ms"] or 0) + 350, (summary, usage)


def test_a_forged_group_record_is_ignored(tmp_path, monkeypatch, own_tmp):
    """The record is the run's owner's to write: a path outside a cgroup hierarchy, here a
    directory named like the run's group holding a ``cgroup.procs`` that names a bystander, is
    neither signalled nor removed by ``prune``; the real groups still go."""
    if not v1_usable():
        pytest.skip("no writable v1 hierarchies")
    monkeypatch.delenv("PROCESSKIT_CONTAINMENT", raising=False)
    bystander = start_cli("run", "--jsonl", tmp_path / "bystander.jsonl", "--no-echo", "--", "sleep", "60")
    try:
        runner_pid, groups = killed_holding_run(tmp_path)
        run_dir = run_dir_of(own_tmp, runner_pid)
        forged = tmp_path / os.path.basename(groups[0])
        forged.mkdir()
        (forged / "cgroup.procs").write_text(f"{bystander.pid}\n")
        with open(os.path.join(run_dir, "groups"), "a") as record:
            record.write(f"{forged}\n{forged}/../{forged.name}\n")
        proc = run_cli("prune", "--json", "--report-reaped")
        assert proc.returncode == 0, proc.stderr
        assert bystander.poll() is None, "prune signalled a process a forged record named"
        assert forged.is_dir() and str(forged) not in json.loads(proc.stdout)["reaped"]["groups"]
        assert [group for group in groups if os.path.lexists(group)] == []
    finally:
        bystander.terminate()  # a cancel: the bystander's run tears down and removes its groups
        bystander.wait()

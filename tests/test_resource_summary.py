"""``resource_summary`` follows the reference's rule: memory and CPU summed over the members live
at its read point (the ending decided, the teardown not begun), so numbers on a cgroup v2 run's
forced ending and null after a natural exit; the peak process count only from the pids group of
a run capped by ``--max-processes``; every figure null, ``read_error`` false, on the
process-group fallback. The whole tree's figures are the usage file's, the API's and a batch
line's (test_accounting.py covers them mechanism by mechanism)."""

from __future__ import annotations

import json
import os
import re
import signal

import pytest

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_file
from streams import PY, check_stream, python_child, reference_summary, require_mechanism, run_checked

MiB = 1024 * 1024
HOLD = """
import sys, time
block = bytearray(64 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
end = time.process_time() + 0.2
while time.process_time() < end:
    pass
open(sys.argv[1], "w").close()
time.sleep(60)
"""
BURN = "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass"


def test_a_natural_exit_reports_no_memory_or_cpu(tmp_path, containment):
    usage_file = tmp_path / "usage.json"
    _, events = run_checked(tmp_path, "--usage-file", usage_file, command=["sh", "-c", "exit 0"], returncode=0)
    require_mechanism(events, containment)
    summary = reference_summary(events, forced=False)
    assert (summary["read_error"], summary["peak_memory_bytes"], summary["total_cpu_ms"]) == (False, None, None)
    assert json.loads(usage_file.read_text())["total_cpu_ms"] is not None  # the whole tree's is kept there


def test_a_timeout_reports_the_live_members_memory_and_cpu_on_cgroup_v2_only(tmp_path, containment):
    """The reference's own case: its read precedes the soft stop, while the tree still runs."""
    args = ("--timeout", "1s", "--grace", "200ms")
    _, events = run_checked(tmp_path, *args, command=["sh", "-c", "sleep 300"], returncode=106)
    require_mechanism(events, containment)
    summary = reference_summary(events, forced=True)
    assert (summary["total_cpu_ms"] is not None) is (containment == "cgroup_v2"), summary


def _terminated(tmp_path, containment: str, *command) -> tuple[dict, dict]:
    """Runs ``command`` (given the path of a file to create once ready), SIGTERMs the runner once
    the file is there (a forced ending, 107); the stream's summary and the usage file's figures."""
    jsonl, ready, usage_file = tmp_path / "run.jsonl", tmp_path / "ready", tmp_path / "usage.json"
    runner = start_cli("run", "--jsonl", jsonl, "--no-echo", "--usage-file", usage_file, "--", *command, ready)
    try:
        wait_for_file(ready)
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(SAFETY_NET) == 107
    finally:
        runner.kill()
        runner.wait()
    events = check_stream(jsonl, 107)
    require_mechanism(events, containment)
    return reference_summary(events, forced=True), json.loads(usage_file.read_text())


def test_a_forced_ending_sums_the_live_members_memory_and_cpu(tmp_path, containment):
    summary, usage = _terminated(tmp_path, containment, PY, "-c", HOLD)
    if containment == "cgroup_v2":
        assert summary["peak_memory_bytes"] >= 64 * MiB and summary["total_cpu_ms"] >= 150, summary
    # the usage: the whole tree's, on either mechanism
    assert usage["peak_memory_bytes"] >= 64 * MiB and usage["total_cpu_ms"] >= 150, usage


def test_a_forced_ending_counts_the_live_members_own_cpu_not_their_reaped_childrens(tmp_path, containment):
    """The reference sums utime and stime of each live member: a child that burned CPU and was
    reaped by the live shell before the ending counts in the whole tree's figures only."""
    script = f'{PY} -c "$1"; : > "$2"; exec sleep 300'  # the shell reaps the burner, then sleeps live
    summary, usage = _terminated(tmp_path, containment, "sh", "-c", script, "sh", BURN.replace("0.2", "0.5"))
    if containment == "cgroup_v2":
        assert summary["total_cpu_ms"] < 250, summary  # the sleeping shell's own, not the burner's 500
    assert usage["total_cpu_ms"] >= 450, usage  # the whole tree's keeps it


def test_only_a_run_capped_by_max_processes_reports_its_peak_process_count(tmp_path, containment):
    _, plain = run_checked(tmp_path, command=["sh", "-c", "exit 0"], returncode=0)
    require_mechanism(plain, containment)
    assert reference_summary(plain, forced=False)["peak_process_count"] is None
    _, capped = run_checked(tmp_path, "--max-processes", "50", command=["sh", "-c", "exit 0"], returncode=0)
    expected = 1 if containment == "cgroup_v2" else None
    assert reference_summary(capped, forced=False)["peak_process_count"] == expected


def test_the_whole_trees_cpu_is_kept_after_a_natural_exit(tmp_path, monkeypatch):
    """Where the stream reports none, the usage file, the API's result and a batch's line keep
    the whole tree's CPU."""
    monkeypatch.delenv("PROCESSKIT_CONTAINMENT", raising=False)
    import processkit

    usage_file = tmp_path / "usage.json"
    _, events = run_checked(tmp_path, "--usage-file", usage_file, command=python_child(BURN), returncode=0)
    assert reference_summary(events, forced=False)["total_cpu_ms"] is None
    assert json.loads(usage_file.read_text())["total_cpu_ms"] >= 150
    (jsonl,) = tmp_path.glob("run-*.jsonl")
    for args, cpu in (((), "not measured"), (("--usage-file", usage_file), r"[0-9]{3,}ms")):  # report's page
        assert run_cli("report", jsonl, *args, "-o", tmp_path / "page.html").returncode == 0
        assert re.search(f"<dt>CPU</dt><dd>{cpu}</dd>", (tmp_path / "page.html").read_text()), args
    result = processkit.run([PY, "-c", BURN], jsonl=tmp_path / "api.jsonl")
    assert reference_summary(check_stream(tmp_path / "api.jsonl", 0), forced=False)["total_cpu_ms"] is None
    assert result.resources.total_cpu_ms >= 150 and result.usage.total_cpu_ms == result.resources.total_cpu_ms
    manifest, out = tmp_path / "jobs.jsonl", tmp_path / "out"
    manifest.write_text(json.dumps({"id": "burn", "args": [PY, "-c", BURN]}) + "\n")
    assert run_cli("batch", manifest, "--out", out, "--keep", "all").returncode == 0
    assert reference_summary(check_stream(out / "burn" / "events.jsonl", 0), forced=False)["total_cpu_ms"] is None
    assert json.loads((out / "summary.jsonl").read_text())["resources"]["total_cpu_ms"] >= 150


def test_events_says_a_natural_exits_summary_has_no_figures_at_its_read_point(tmp_path):
    """``events``' human line for a summary with every figure null said "no resource figures on
    this mechanism", which after ref64 is every natural exit of a run whose mechanism does count:
    it names the read point and where the whole tree's figures are."""
    stream = tmp_path / "run.jsonl"
    assert run_cli("run", "--jsonl", stream, "--", "true").returncode == 0
    shown = run_cli("events", "--file", stream)
    assert shown.returncode == 0, shown.stderr
    assert b"no resource figures at this read point (the whole tree's: run --usage-file)" in shown.stdout
    assert b"on this mechanism" not in shown.stdout


def test_a_member_alive_at_the_end_has_its_io_in_a_batch_lines_figures(tmp_path, monkeypatch):
    """On the process-group fallback the whole tree's I/O is the subreaper's rusage plus the
    members live at the read point (``/proc/<pid>/io``, read only where a mechanism's figures
    take it: ``Container.live_io``): a batch line, read once before teardown, counts the MiB a
    member still alive after the root's exit had its reaped writer write."""
    if not _write_bytes_counted(tmp_path):
        pytest.skip("the kernel counts no write bytes on this file system (tmpfs)")
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    os.mkfifo(tmp_path / "written")
    writer = 'head -c 1048576 /dev/zero > "$0/f"; echo > "$0/written"; exec sleep 60'
    script = 'sh -c "$1" "$0" & read done < "$0/written"'
    manifest, out = tmp_path / "jobs.jsonl", tmp_path / "out"
    manifest.write_text(json.dumps({"id": "w", "args": ["sh", "-c", script, str(tmp_path), writer]}) + "\n")
    done = run_cli("batch", manifest, "--out", out)
    assert done.returncode == 0, done.stderr
    line = json.loads((out / "summary.jsonl").read_text())
    assert (tmp_path / "f").stat().st_size == MiB
    written = line["resources"]["io_write_bytes"]
    assert written is not None and written >= MiB, line


def _write_bytes(io: str) -> int:
    return int(next(row.split()[1] for row in io.splitlines() if row.startswith("write_bytes:")))


def _write_bytes_counted(directory) -> bool:
    """Whether a write into ``directory`` moves ``/proc/self/io``'s write_bytes (tmpfs's do not)."""
    before = _write_bytes(open("/proc/self/io").read())
    (directory / "probe").write_bytes(b"x" * 65536)
    return _write_bytes(open("/proc/self/io").read()) > before

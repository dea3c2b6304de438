"""What a batch's inputs may cost in memory, held to the bounds docs/batch.md gives (issue 46): a
manifest within its bounds is checked and read again as a stream, so its size does not become the
batch's memory; a summary drawn as a page past its bounds is refused with one line, never a
MemoryError (104)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import cli_command, run_cli


# Runs its arguments as a child and prints the child's peak RSS (KiB): a fresh process, so no
# earlier child of this test session's counts.
MEASURED = """
import resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
sys.stderr.buffer.write(proc.stderr)
print(proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _peak_rss_mib(argv: list[str]) -> tuple[int, str, float]:
    """``argv``'s exit status, stderr and peak RSS in MiB."""
    proc = subprocess.run([sys.executable, "-c", MEASURED, *argv], capture_output=True, text=True, timeout=300)
    code, peak = proc.stdout.split()
    return int(code), proc.stderr, int(peak) / 1024


def test_a_large_manifest_is_checked_in_flat_memory(tmp_path):
    """24 lines of about 1 MiB each (a command of 100,000 short words), the last one bad: the
    batch refuses it (100) before anything starts, having held one line at a time. Holding every
    job, as a manifest read into a list did, took about 15 times its 24 MiB."""
    words = [f"w{n}" for n in range(100_000)]
    manifest = tmp_path / "m.jsonl"
    with open(manifest, "w") as handle:
        for number in range(24):
            handle.write(json.dumps({"args": ["true", *words], "id": f"j{number}"}) + "\n")
        handle.write('{"args": "not a list"}\n')
    assert manifest.stat().st_size > 20 * 1024 * 1024
    code, stderr, peak = _peak_rss_mib([*cli_command(), "batch", str(manifest), "--out", str(tmp_path / "out")])
    assert code == 100, stderr
    assert "manifest line 25" in stderr and stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()
    assert peak < 100, f"checking a 24 MiB manifest took {peak:.0f} MiB"


def test_a_summary_past_the_pages_bounds_is_refused_in_one_line(tmp_path):
    out = tmp_path / "big"
    out.mkdir()
    with open(out / "summary.jsonl", "wb") as handle:
        handle.truncate(257 * 1024 * 1024)  # sparse: refused by its size, never read
    proc = run_cli("report", out, "-o", tmp_path / "page.html")
    assert proc.returncode == 111, proc.stderr
    assert b"256 MiB" in proc.stderr and proc.stderr.count(b"\n") == 1

    many = tmp_path / "many"
    many.mkdir()
    (many / "summary.jsonl").write_text("".join(f'{{"id":"j{n}","exit_code":0}}\n' for n in range(200_001)))
    proc = run_cli("report", many, "-o", tmp_path / "page.html")
    assert proc.returncode == 114, proc.stderr
    assert b"more than 200000 lines" in proc.stderr and proc.stderr.count(b"\n") == 1
    assert not (tmp_path / "page.html").exists()


def test_a_kept_jobs_stream_is_held_within_a_bound(tmp_path):
    """``--keep failed`` holds a job's stream in a memfd: a job snapshotting 200 processes every
    millisecond no longer grows the batch's heap with every event (about 100 MiB before);
    its stream, kept because it failed, is whole."""
    from streams import CROWD_DEADLINE, CROWD_UNREAD, check_stream, snapshotted_crowd

    manifest = tmp_path / "m.jsonl"
    # It ends (1, a failure, so its stream is kept) once its members were read 150 times, its 200 members each time.
    crowd = snapshotted_crowd(200, 150, 1)
    manifest.write_text(json.dumps({"args": crowd, "id": "tree", "snapshot_interval": "1ms"}) + "\n")
    out = tmp_path / "out"
    code, stderr, peak = _peak_rss_mib([*cli_command(), "batch", str(manifest), "--out", str(out), "--keep", "failed"])
    assert code == 117, stderr
    [line] = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert line["exit_code"] == 1, f"the crowd saw too few reads ({CROWD_UNREAD}: none for {CROWD_DEADLINE} s)"
    events = check_stream(out / "tree" / "events.jsonl", 1)
    assert sum(event["event"] == "members_snapshot" for event in events) > 100
    assert peak < 60, f"the batch took {peak:.0f} MiB"

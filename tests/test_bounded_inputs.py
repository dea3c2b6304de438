"""Rule 3 as the attacker tried it: endless, huge, deep and misshapen inputs named to each reader
of the CLI (events --file, report and its --usage-file, a manifest, a --resume summary), each
a clear error within a timeout and bounded memory (the process's own VmHWM), never a hang, a
traceback or gigabytes of RSS (docs/threat-model.md, "Rule 3: every reader is bounded")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import SAFETY_NET, run_cli
from streams import PY

# The CLI's own main, with the process's peak resident memory (KiB) as stderr's last line. VmHWM,
# not ru_maxrss: at exec the kernel folds the parent's peak into ru_maxrss.
PEAK = (
    "import sys; from processkit.cli.main import main\n"
    "try:\n    rc = main(sys.argv[1:])\nexcept SystemExit as exc:\n    rc = exc.code\n"
    "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')), file=sys.stderr)\n"
    "sys.exit(rc)"
)


def run_measured(*args, timeout: float = SAFETY_NET, **kwargs) -> tuple[int, str, float]:
    """(exit code, stderr without the peak line, peak MiB) of ``processkit-cli ARGS``."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    proc = subprocess.run([PY, "-c", PEAK, *map(str, args)], capture_output=True, timeout=timeout, **kwargs)
    lines = proc.stderr.decode(errors="replace").splitlines()
    return proc.returncode, "\n".join(lines[:-1]), int(lines[-1]) / 1024


def test_events_file_dev_zero_is_refused_at_once(tmp_path):
    """It read /dev/zero for ever: 6 GB RSS in 12 s."""
    code, err, peak = run_measured("events", "--file", "/dev/zero")
    assert code == 111, err
    assert err == (
        "processkit-cli: cannot read the events stream /dev/zero: it is a character device, not a stream it takes"
    )
    assert peak < 100


def test_events_reads_a_huge_file_a_part_at_a_time(tmp_path):
    """A 96 MiB file of one endless line (and a valid event after it) is read in bounded memory:
    all of it was read into one buffer before a line was looked at."""
    stream = tmp_path / "big.jsonl"
    event = {"schema_version": 1, "event": "x"}
    with open(stream, "wb") as handle:
        handle.write(b"\0" * (96 << 20) + b"\n" + json.dumps(event).encode() + b"\n")
    code, err, peak = run_measured("events", "--json", "--file", stream, timeout=60)
    assert code == 0, err
    assert "line 1: line exceeds the 1048576-byte limit and was skipped" in err
    assert peak < 64, f"events held the file: peak {peak:.0f} MiB"


def test_report_usage_file_dev_zero_and_a_fifo_are_refused(tmp_path):
    """``report --usage-file /dev/zero`` reached 7.8 GB; a FIFO there waited for ever in open()."""
    stream = tmp_path / "s.jsonl"
    stream.write_text(json.dumps({"schema_version": 1, "event": "x"}) + "\n")
    fifo = tmp_path / "usage.fifo"
    os.mkfifo(fifo)
    for usage, kind in (("/dev/zero", "a character device"), (fifo, "a FIFO")):
        code, err, peak = run_measured("report", stream, "--usage-file", usage, "-o", tmp_path / "r.html")
        assert code == 114, err
        assert err == f"processkit-cli: cannot read the --usage-file {usage}: it is {kind}, not a regular file"
        assert peak < 100


def test_report_usage_file_nested_deeply_or_too_large_is_refused(tmp_path):
    stream = tmp_path / "s.jsonl"
    stream.write_text(json.dumps({"schema_version": 1, "event": "x"}) + "\n")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    large = tmp_path / "large.json"
    large.write_text('{"a": "' + "x" * (2 << 20) + '"}')
    code, err, _ = run_measured("report", stream, "--usage-file", deep, "-o", tmp_path / "r.html")
    assert (code, err) == (
        114,
        f"processkit-cli: the --usage-file {deep}: arrays and objects are nested more than 64 deep",
    )
    code, err, _ = run_measured("report", stream, "--usage-file", large, "-o", tmp_path / "r.html")
    assert code == 114 and err.startswith(
        f"processkit-cli: the --usage-file {large} holds 2097161 bytes, more than 1 MiB"
    )


def test_report_of_an_endless_pipe_stops_at_its_total(tmp_path):
    """``cat /dev/zero | report /dev/stdin`` read for ever; it stops at 256 MiB, in small memory."""
    zeros = subprocess.Popen(["cat", "/dev/zero"], stdout=subprocess.PIPE)
    try:
        code, err, peak = run_measured(
            "report", "/dev/stdin", "-o", tmp_path / "r.html", stdin=zeros.stdout, timeout=60
        )
    finally:
        zeros.kill()
        zeros.wait()
    assert code == 111, err
    assert err == "processkit-cli: the events stream /dev/stdin is larger than 256 MiB, the most a report reads"
    assert peak < 100


def test_report_of_dev_zero_or_a_fifo_without_writer_does_not_wait(tmp_path):
    fifo = tmp_path / "s.fifo"
    os.mkfifo(fifo)
    code, err, _ = run_measured("report", "/dev/zero", "-o", tmp_path / "r.html")
    assert code == 111 and "it is a character device" in err, err
    code, err, _ = run_measured("report", fifo, "-o", tmp_path / "r.html")
    assert code == 114 and "it is empty" in err, err  # no writer: an empty stream, at once


def _one_job_batch(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"args": ["true"], "id": "a"}) + "\n")
    out = tmp_path / "out"
    assert run_cli("batch", manifest, "--out", out).returncode == 0
    return manifest, out


def test_resume_over_a_deeply_nested_summary_line_skips_the_line(tmp_path):
    """A summary line of 100k nested brackets was 104 (RecursionError); it is skipped like any
    line that is no summary object, and the job the earlier lines show done is skipped."""
    manifest, out = _one_job_batch(tmp_path)
    with open(out / "summary.jsonl", "a") as handle:
        handle.write('{"id": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    proc = run_cli("batch", manifest, "--out", out, "--resume", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert b"1 skipped (--resume: passed before)" in proc.stderr


@pytest.mark.parametrize("shape", ["fifo", "long line"])
def test_resume_over_a_summary_no_bounded_reader_takes_is_refused(tmp_path, shape):
    """A FIFO at summary.jsonl waited in open(); a 2 MiB line is past the line bound."""
    manifest, out = _one_job_batch(tmp_path)
    summary = out / "summary.jsonl"
    if shape == "fifo":
        summary.unlink()
        os.mkfifo(summary)
        expected = f"processkit-cli: cannot resume the batch: cannot read the batch summary {summary}: it is a FIFO, not a regular file"
    else:
        summary.write_text('{"id": "' + "a" * (2 << 20) + '"}\n')
        expected = f"processkit-cli: cannot resume the batch: batch summary line 1 is longer than 1 MiB, the most a line may hold ({summary})"
    proc = run_cli("batch", manifest, "--out", out, "--resume")
    assert proc.returncode == 111, proc.stderr
    assert proc.stderr.decode().splitlines() == [expected]


def test_a_manifest_past_its_total_is_refused_before_it_is_read(tmp_path):
    """A 1 GB manifest reached 1.97 GB RSS before it was refused at its last line: a regular
    file over 256 MiB is refused by its size, before a line is read (a sparse file here)."""
    manifest = tmp_path / "m.jsonl"
    with open(manifest, "wb") as handle:
        handle.write(json.dumps({"args": ["true"]}).encode() + b"\n")
        handle.truncate(1 << 30)
    out = tmp_path / "out"
    code, err, peak = run_measured("batch", manifest, "--out", out)
    assert code == 100, err
    assert err == f"processkit-cli: the manifest {manifest} holds {1 << 30} bytes, more than 256 MiB, the most it may"
    assert peak < 100 and not out.exists()


def test_an_endless_manifest_on_a_pipe_stops_at_its_total_in_bounded_memory(tmp_path):
    """Valid lines without end on stdin: every line was read before one was parsed (then refused
    at 10^6 jobs, past 1 GB RSS); now each is parsed as it comes and the read stops at 256 MiB."""
    line = json.dumps({"args": ["true", "x" * 900]}) + "\n"
    writer = subprocess.Popen(
        [sys.executable, "-c", f"import sys\nwhile True: sys.stdout.write({line!r} * 1000)"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        code, err, peak = run_measured("batch", "-", "--out", tmp_path / "out", stdin=writer.stdout, timeout=120)
    finally:
        writer.kill()
        writer.wait()
    assert code == 100, err
    assert err.startswith("processkit-cli: manifest line ") and err.endswith(
        " goes past 256 MiB, the most a manifest may hold (stdin)"
    )
    assert peak < 768, f"peak {peak:.0f} MiB"


def test_a_manifest_that_is_a_device_is_refused_without_waiting(tmp_path):
    """A character device would never end: refused before a byte is read. (A FIFO manifest waits
    for its writer, as parallel and cat do, and a stop ends that wait: test_batch_fifo_writer.py.)"""
    code, err, _ = run_measured("batch", "/dev/zero", "--out", tmp_path / "out")
    assert code == 111 and "it is a character device" in err, err


@pytest.mark.parametrize("shape", ["deep", "large"])
def test_a_bench_export_nested_deeply_or_too_large_is_a_clear_error(tmp_path, shape):
    """``report`` of a crafted export: 100k nested brackets were 104 (RecursionError); one past
    64 MiB (a sparse file here) is refused by its size before it is read."""
    export = tmp_path / "b.json"
    if shape == "deep":
        export.write_text('{"results": ' + "[" * 100_000 + "]" * 100_000 + "}")
        expected = f"processkit-cli: the benchmark export {export}: arrays and objects are nested more than 64 deep"
    else:
        with open(export, "wb") as handle:
            handle.write(b'{"results": []}')
            handle.truncate(1 << 30)
        expected = (
            f"processkit-cli: the benchmark export {export} holds {1 << 30} bytes, more than 64 MiB, the most it may"
        )
    code, err, peak = run_measured("report", export, "-o", tmp_path / "r.html")
    assert (code, err) == (114, expected)
    assert peak < 100

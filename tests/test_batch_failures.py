"""``batch``: a failure named from whichever stream holds it, a cancelled job called cancelled,
and an earlier batch's attempts gone from a job that now passes. Process-level: the real CLI,
real children (the page's side of these is in tests/test_report_browser.py)."""

from __future__ import annotations

import errno
import json
import os
import re
import signal

import pytest

from conftest import SAFETY_NET, registry_entries, run_cli, start_cli
from streams import PY
from test_batch import left_by, sleeping_batch, start_batch, summary, write_manifest  # noqa: F401 (start_batch: a fixture)

BATCH_FAILED = 117

# What a pytest shard prints when a test fails: everything on stdout, nothing on stderr.
PYTEST_SHARD = (
    "print('============================= test session starts =============================='); "
    "print('tests/test_x.py F                                                          [100%]'); "
    "print('=================================== FAILURES ==================================='); "
    "[print(f'E   detail {n}') for n in range(8)]; "
    "print('=========================== short test summary info ============================'); "
    "print('FAILED tests/test_x.py::test_y - assert 1 == 2'); "
    "print('============================== 1 failed in 0.02s ==============================='); "
    "raise SystemExit(1)"
)


def failure_block(stderr: bytes) -> list[str]:
    lines = stderr.decode().splitlines()
    start = next(n for n, line in enumerate(lines) if re.fullmatch(r"batch: [0-9]+ jobs? (failed|timed out).*:", line))
    return lines[start:]


def test_the_end_shows_the_tail_of_every_stream_that_holds_something(tmp_path):
    """A pytest shard fails on stdout: its FAILED line is on screen without --show-output, under
    its stream's name and path; a job that wrote on both streams shows both, each labelled; an
    empty capture is not named."""
    jobs = [
        {"args": [PY, "-c", PYTEST_SHARD], "id": "shard"},
        {"args": ["sh", "-c", "echo 'to stdout'; echo 'to stderr' >&2; exit 2"], "id": "both"},
    ]
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, "--jobs", "1")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    capture = {job: out / job / "capture" for job in ("shard", "both")}
    assert failure_block(proc.stderr) == [
        "batch: 2 jobs failed:",
        "  shard: exit 1",
        f"    stdout: {capture['shard'] / 'stdout.log'} (its 6 line(s) that say why and its last 5 line(s) of 557 B shown)",
        "    ... 3 lines not shown",
        *(f"    | E   detail {n}" for n in range(6)),
        "    | E   detail 6",
        "    | E   detail 7",
        "    | =========================== short test summary info ============================",
        "    | FAILED tests/test_x.py::test_y - assert 1 == 2",
        "    | ============================== 1 failed in 0.02s ===============================",
        "  both: exit 2",
        f"    stdout: {capture['both'] / 'stdout.log'}",
        "    | to stdout",
        f"    stderr: {capture['both'] / 'stderr.log'}",
        "    | to stderr",
        "batch: 0 of 2 jobs exited 0, 2 failed",
    ]


def test_the_end_says_when_the_lines_it_shows_are_not_all_a_job_printed(tmp_path):
    """A compiler's first error comes first: it is shown (a line that says why), then the lines
    not shown are counted, then the last five of a 30-line stderr; the path's line says what is
    shown of how much (as the page's box does); a stream shown whole carries no such words."""
    noisy = "echo 'a.c:1: error: first' >&2; for i in $(seq 2 30); do echo note $i >&2; done; echo out; exit 1"
    jobs = [{"args": ["sh", "-c", noisy], "id": "cc"}]
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out)
    assert proc.returncode == BATCH_FAILED, proc.stderr
    size = (out / "cc" / "capture" / "stderr.log").stat().st_size
    block = failure_block(proc.stderr)
    assert block[1:4] == [
        "  cc: exit 1",
        f"    stdout: {out / 'cc' / 'capture' / 'stdout.log'}",
        "    | out",
    ]
    shown = "its 1 line(s) that say why and its last 5 line(s)"
    assert block[4] == f"    stderr: {out / 'cc' / 'capture' / 'stderr.log'} ({shown} of {size} B shown)"
    assert block[5:7] == ["    | a.c:1: error: first", "    ... 24 lines not shown"]
    assert block[7:12] == [f"    | note {n}" for n in range(26, 31)]


def test_the_end_shows_the_end_of_one_long_line(tmp_path):
    """A job whose stderr is one line longer than the tail read (a JSON log, a progress line):
    its end, where the error is, is shown, marked as a part; it was dropped unsaid."""
    job = "import sys; sys.stderr.write('x' * 5000 + ' FATAL: disk quota'); sys.exit(1)"
    proc = run_cli("batch", "--out", tmp_path / "out", "--", PY, "-c", job, ":::", "a")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    block = failure_block(proc.stderr)
    assert block[2].endswith("stderr.log (its last 1 line(s) of 4.9 KiB shown)"), block
    assert block[3] == "    | ..." + ("x" * 5000 + " FATAL: disk quota")[-197:]


def test_the_end_shows_the_end_of_any_long_line_it_shows(tmp_path):
    """A whole line over LINE_CHARS (the read did not cut it) shows its end too, where its
    error is: its head was shown, and the error dropped."""
    job = "import sys; sys.stderr.write('x' * 3000 + ' FATAL: disk quota\\nexit now\\n'); sys.exit(1)"
    proc = run_cli("batch", "--out", tmp_path / "out", "--", PY, "-c", job, ":::", "a")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    block = failure_block(proc.stderr)
    assert block[3:5] == ["    | ..." + ("x" * 3000 + " FATAL: disk quota")[-197:], "    | exit now"], block


def test_jobs_ended_by_ctrl_c_are_cancelled_not_failed(tmp_path, start_batch):
    """Ctrl-C ends the running jobs: the closing line counts them cancelled (and the one never
    started so), names none of them among failures, and their summary lines say cancelled."""
    batch, out = sleeping_batch(start_batch, tmp_path, 3)
    batch.send_signal(signal.SIGINT)
    _, err = batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == -signal.SIGINT, err
    said = err.decode().splitlines()
    assert said[-1] == "batch: 0 of 3 jobs exited 0, 2 cancelled, 1 not started, cancelled by Ctrl-C"
    assert not any(re.fullmatch("batch: .*(failed|timed out).*:", line) for line in said), said
    assert [line for line in said if line.startswith(("batch: s0:", "batch: s1:"))] == [
        line for line in said if line.startswith(("batch: s0: cancelled", "batch: s1: cancelled"))
    ]
    lines = summary(out)
    assert all((lines[f"s{n}"]["exit_code"], lines[f"s{n}"]["source"]) == (107, "cancelled") for n in (0, 1))
    assert (lines["s2"]["exit_code"], lines["s2"]["source"]) == (None, "cancelled")


FLAKY = "test -e {flag} || {{ echo 'not yet' >&2; exit 1; }}"


@pytest.mark.parametrize("keep", ["failed", "all"])
def test_a_job_that_passes_on_resume_keeps_no_earlier_batchs_attempts(tmp_path, keep):
    """An earlier batch failed the job twice (--retries 1: attempt-1/ and its last files); it
    passes now under --resume: nothing the earlier batch left reads as this job's attempts."""
    flag = tmp_path / "flag"
    jobs = [{"args": ["sh", "-c", FLAKY.format(flag=flag)], "id": "flaky"}, {"args": ["true"], "id": "fine"}]
    manifest, out = write_manifest(tmp_path / "m.jsonl", jobs), tmp_path / "out"
    first = run_cli("batch", manifest, "--out", out, "--keep", keep, "--retries", "1")
    assert first.returncode == BATCH_FAILED, first.stderr
    assert (out / "flaky" / "attempt-1" / "capture" / "stderr.log").read_text() == "not yet\n"
    flag.touch()
    again = run_cli("batch", manifest, "--out", out, "--keep", keep, "--retries", "1", "--resume")
    assert again.returncode == 0, again.stderr
    line = summary_last(out)["flaky"]
    assert (line["exit_code"], line["attempts"], line["earlier_attempts"]) == (0, 1, [])
    if keep == "failed":
        assert not (out / "flaky").exists(), sorted(os.listdir(out / "flaky"))
    else:
        assert sorted(os.listdir(out / "flaky")) == ["capture", "events.jsonl"]


def test_a_job_retried_on_resume_keeps_this_batchs_attempts_only(tmp_path):
    """The earlier batch's attempt-1/ is no obstacle to this batch's: the retried job's first
    attempt goes into attempt-1/ again, holding this batch's stream and capture alone."""
    flag = tmp_path / "flag"
    script = f"if test -e {flag}; then echo second >&2; exit 0; fi; echo first >&2; touch {flag}; exit 1"
    jobs = [{"args": ["sh", "-c", "echo old >&2; exit 1"], "id": "flaky"}]
    manifest, out = write_manifest(tmp_path / "m.jsonl", jobs), tmp_path / "out"
    assert run_cli("batch", manifest, "--out", out, "--retries", "2").returncode == BATCH_FAILED
    assert sorted(os.listdir(out / "flaky")) == ["attempt-1", "attempt-2", "capture", "events.jsonl"]
    write_manifest(tmp_path / "m.jsonl", [{"args": ["sh", "-c", script], "id": "flaky"}])
    again = run_cli("batch", manifest, "--out", out, "--retries", "2", "--resume")
    assert again.returncode == 0, again.stderr
    line = summary_last(out)["flaky"]
    assert (line["exit_code"], line["attempts"]) == (0, 2)
    assert [attempt["dir"] for attempt in line["earlier_attempts"]] == ["attempt-1"]
    assert sorted(os.listdir(out / "flaky")) == ["attempt-1", "capture", "events.jsonl"]
    assert (out / "flaky" / "attempt-1" / "capture" / "stderr.log").read_text() == "first\n"
    assert (out / "flaky" / "capture" / "stderr.log").read_text() == "second\n"


def summary_last(out) -> dict[str, dict]:
    """Each job's last line (a --resume appends)."""
    return {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}


def test_a_passing_jobs_capture_cut_at_its_cap_is_said_on_its_line(tmp_path):
    """A job that exits 0 with a capture cut at its cap (or short of it by a failed write) was
    said nothing of: its line read `exit 0` and the closing block names failed jobs alone, so the
    file, its only record (no echo), lacked most of the output without a word, where `run` warns."""
    out = tmp_path / "out"
    proc = run_cli(
        "batch",
        "--out",
        out,
        "--capture-max-bytes",
        "100",
        "--",
        "sh",
        "-c",
        "head -c 5000 /dev/zero; echo ok >&2",
        ":::",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    line = next(text for text in proc.stderr.decode().splitlines() if text.startswith("batch: 1: exit 0"))
    assert line.endswith(
        "; stdout's capture (cut at capture_max_bytes: 100 B of 4.9 KiB kept: the stream's last 4.8 KiB are "
        "not in the file (capture_keep head-tail keeps the end too))"
    ), line
    assert "stderr's" not in line, "a capture that fits is said nothing of"


@pytest.mark.parametrize("keep", ["all", "failed"])
def test_a_capture_cut_at_its_cap_says_so_beside_the_lines_shown(tmp_path, keep):
    """A job whose stderr went past its cap: the file keeps the stream's head, so the lines shown
    are not the stream's last (its final error is in the bytes dropped). The block says the cut
    and where it is, under either --keep (the page and the JUnit too); with head-tail the gap is
    inside the file and the stream's own last line is shown; a capture that fits is said nothing
    of. The head's line names the keep that holds the end: a pytest shard's assertion, printed
    last, was gone with no hint of ``capture_keep head-tail``."""
    noisy = "seq 1 3000 >&2; echo LAST-ERROR >&2; exit 4"
    jobs = [
        {"args": ["sh", "-c", noisy], "id": "head", "capture_max_bytes": "1k"},
        {"args": ["sh", "-c", noisy], "id": "ends", "capture_max_bytes": "1k", "capture_keep": "head-tail"},
        {"args": ["sh", "-c", "echo fits >&2; exit 5"], "id": "fits", "capture_max_bytes": "1k"},
    ]
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    proc = run_cli("batch", manifest, "--out", out, "--jobs", "1", "--keep", keep, "--junit", tmp_path / "j.xml")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    block = failure_block(proc.stderr)
    seen = len("".join(f"{n}\n" for n in range(1, 3001))) + len("LAST-ERROR\n")
    dropped = (seen - 1024) / 1024
    head = block.index("  head: exit 4")
    assert block[head + 1] == (
        f"    stderr: {out / 'head' / 'capture' / 'stderr.log'} (cut at capture_max_bytes: 1 KiB of "
        f"{seen / 1024:.1f} KiB kept: the stream's last {dropped:.1f} KiB are not in the file "
        "(capture_keep head-tail keeps the end too); "
        "its first 5 and last 5 line(s) of 1 KiB shown)"
    )
    assert block[head + 2 : head + 7] == [f"    | {n}" for n in range(1, 6)]
    assert re.fullmatch(r"    \.\.\. [0-9]+ lines not shown", block[head + 7]), block
    assert "LAST-ERROR" not in block[head + 8 : head + 13]
    ends = block.index("  ends: exit 4")
    assert block[ends + 1].endswith(
        "of the stream are not in the file, after its first 512 B; its first 5 and last 5 line(s) of 1 KiB shown)"
    )
    assert block[ends + 12] == "    | LAST-ERROR"
    fits = block.index("  fits: exit 5")
    assert block[fits + 1] == f"    stderr: {out / 'fits' / 'capture' / 'stderr.log'}"
    page = (out / "index.html").read_text()  # the page says it too, beside the same lines
    assert f"the stream&#39;s last {dropped:.1f} KiB are not in the file" in page
    assert "of the stream are not in the file, after its first 512 B;" in page
    junit = (tmp_path / "j.xml").read_text()  # and the JUnit, below the tail it carries
    assert f"[cut at capture_max_bytes: 1 KiB of {seen / 1024:.1f} KiB kept: the stream's last" in junit


def test_a_job_killed_by_a_signal_is_said_killed_not_only_its_exit(tmp_path):
    """A child that dies of SIGKILL has exit 137, as one that calls exit(137) does: its line, the
    closing block, the summary (``signal``, only on such a line) and the page name the signal,
    so the two are told apart, as parallel's joblog does with its Signal column."""
    jobs = [
        {"args": ["sh", "-c", "echo dying >&2; kill -9 $$"], "id": "killed"},
        {"args": ["sh", "-c", "exit 137"], "id": "exited"},
    ]
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, "--jobs", "1")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    said = proc.stderr.decode().splitlines()
    assert any(line.startswith("batch: killed: killed by signal 9 (SIGKILL), exit 137 in ") for line in said), said
    assert any(line.startswith("batch: exited: exit 137 in ") for line in said), said
    block = failure_block(proc.stderr)
    assert "  killed: killed by signal 9 (SIGKILL), exit 137" in block and "  exited: exit 137" in block
    lines = summary(out)
    assert lines["killed"]["signal"] == 9 and lines["killed"]["exit_code"] == 137
    assert "signal" not in lines["exited"] and lines["exited"]["exit_code"] == 137
    assert "killed by signal 9 (SIGKILL), exit 137" in (out / "index.html").read_text()


def test_show_output_says_when_the_block_shown_is_cut_at_the_cap(tmp_path):
    """--show-output copies a job's capture file: one cut at its cap is not the job's whole
    output, and a line on stderr says so below it; a whole one is said nothing of."""
    jobs = [
        {"args": ["sh", "-c", "seq 1 1000; echo LAST"], "id": "cut", "capture_max_bytes": "100"},
        {"args": ["sh", "-c", "echo whole"], "id": "whole", "capture_max_bytes": "100"},
    ]
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, "--show-output", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    seen = len("".join(f"{n}\n" for n in range(1, 1001))) + len("LAST\n")
    assert b"LAST" not in proc.stdout and b"whole\n" in proc.stdout
    said = [line for line in proc.stderr.decode().splitlines() if " above " in line]
    assert said == [
        f"batch: cut: stdout above (cut at capture_max_bytes: 100 B of {seen / 1024:.1f} KiB kept: "
        f"the stream's last {(seen - 100) / 1024:.1f} KiB are not in the file "
        "(capture_keep head-tail keeps the end too))"
    ]


def _file_size_limit(limit: int):
    """A child's ``RLIMIT_FSIZE`` (``ulimit -f``): the batch's writes past it fail (EFBIG: Python
    ignores SIGXFSZ), as on a full disk, while its small summary and JUnit still fit."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("cap", [[], ["--capture-max-bytes", "200000"]], ids=["no-cap", "cap-above-the-failure"])
def test_a_capture_a_failed_write_cut_says_so_where_its_tail_is_shown(tmp_path, cap):
    """A capture whose writes failed (``write_error``: a full disk) keeps the stream's head: the
    failures' list, the JUnit and the page said only a cap's cut, so this file's last lines read
    as the stream's last; and with a cap the stream passed too, they said the cap alone."""
    job = "head -c 300000 /dev/zero | tr '\\0' x; exit 1"
    proc = run_cli(
        "batch",
        "--out",
        tmp_path / "o",
        "--junit",
        "/dev/stdout",
        *cap,
        "--",
        "sh",
        "-c",
        job,
        ":::",
        "1",
        preexec_fn=_file_size_limit(100 << 10),
    )  # fmt: skip (the JUnit to a pipe: it holds the 100 KiB kept, past the limit for a file)
    assert proc.returncode == BATCH_FAILED, proc.stderr
    (line,) = summary(tmp_path / "o").values()
    stdout = line["capture"]["stdout"]
    assert stdout["write_error"] and stdout["truncated"] == bool(cap) and stdout["bytes_written"] == 100 << 10
    said = "(a write to it failed: 100 KiB of 293 KiB kept: the stream's last 193 KiB are not in the file)"
    assert f"{said[:-1]}; its last 1 line(s) of 100 KiB shown)" in proc.stderr.decode(), proc.stderr
    assert f"[{said[1:-1]}]" in proc.stdout.decode()
    page = (tmp_path / "o" / "index.html").read_text()  # beside the last lines the box shows
    assert "of 100 KiB shown; the stream&#39;s last 193 KiB are not in the file;" in page


def test_a_summary_that_cannot_be_written_stops_the_batch_as_a_setup_failure(tmp_path, small_tmpfs):
    """A full disk under ``--out``: the summary's line failed with a bare OSError, an internal
    error (104) with the jobs' lines lost unsaid. Now 111, naming the file and why."""
    out_fs = small_tmpfs("out", "size=64k")
    job = f"head -c 200000 /dev/zero > {out_fs / 'filler'}; exit 1"
    proc = run_cli("batch", "--out", out_fs / "o", "--", "sh", "-c", job, ":::", "1")
    assert proc.returncode == 111, proc.stderr
    assert f"cannot write {out_fs / 'o' / 'summary.jsonl'}: No space left on device".encode() in proc.stderr
    assert b"internal error" not in proc.stderr


def test_a_summary_that_cannot_be_written_leaves_nothing_behind_with_jobs_queued(
    tmp_path, small_tmpfs, isolated_registry
):
    """The summary's first line failing with jobs still queued: each unstarted job's line
    raised again in the batch's last steps, which were skipped, so the batch left its lodging,
    its registry record and its jobs' cgroups. Now the failure is said once and all goes."""
    out_fs = small_tmpfs("out", "size=64k")
    jobs = [
        {"id": "filler", "args": ["sh", "-c", f"head -c 200000 /dev/zero > {out_fs / 'filler'}; exit 1"]},
        {"id": "slow", "args": ["sleep", "120"]},
        {"id": "quick", "args": ["true"]},
    ]
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    batch = start_cli("batch", "--out", out_fs / "o", "-j", "1", manifest)
    _, stderr = batch.communicate(timeout=60)
    assert batch.returncode == 111, stderr
    assert stderr.count(b"cannot write ") == 1, stderr
    assert b"filler" in stderr, "the failing job's own line is still shown"
    assert left_by(batch.pid) == []
    assert registry_entries(isolated_registry) == []


def test_a_template_batch_whose_summary_fails_says_every_queued_job_not_started(tmp_path, small_tmpfs):
    """A template's ``:::`` jobs were made only as they were taken: the summary's first line
    failing with jobs queued, those never made got no line at all, where a manifest's queued
    jobs are each said not started. Now the template's are too."""
    out_fs = small_tmpfs("out", "size=64k")
    job = f"if [ {{}} = filler ]; then head -c 200000 /dev/zero > {out_fs / 'filler'}; exit 1; fi; sleep 120"
    proc = run_cli("batch", "--out", out_fs / "o", "-j", "1", "--", "sh", "-c", job, ":::", "filler", "slow", "quick")
    assert proc.returncode == 111, proc.stderr
    said = proc.stderr.decode().splitlines()
    assert [line for line in said if line.startswith(("batch: slow:", "batch: quick:"))] == [
        "batch: slow: not started",
        "batch: quick: not started",
    ], said
    assert (
        said.count(
            f"processkit-cli: cannot write {out_fs / 'o' / 'summary.jsonl'}: No space left on device; the batch stops"
        )
        == 1
    )


def test_a_halted_template_batch_records_the_jobs_it_never_made(tmp_path):
    """``--halt-on-failure`` over ``:::`` arguments: the jobs not yet made when it halted were
    missing from the summary and the closing count (``0 of 1 jobs``); each now has its
    ``halted`` line, as a manifest's do. (A pipe's producer may never end: it is not read then.)"""
    out = tmp_path / "out"
    proc = run_cli(
        "batch", "--out", out, "-j", "1", "--halt-on-failure", "--", "sh", "-c", "exit {}", ":::", "3", "0", "4"
    )
    assert proc.returncode == BATCH_FAILED, proc.stderr
    assert proc.stderr.decode().splitlines()[-1] == (
        "batch: 0 of 3 jobs exited 0, 1 failed, 2 not started, halted by --halt-on-failure"
    )
    lines = summary(out)
    assert [(job, lines[job]["exit_code"], lines[job]["source"]) for job in ("3", "0", "4")] == [
        ("3", 3, "child_exit"),
        ("0", None, "halted"),
        ("4", None, "halted"),
    ]


def test_a_summary_line_that_fails_part_way_leaves_no_torn_line(tmp_path):
    """A summary write that stops part way (a file size limit, a full disk) left the line's
    first bytes in the file, read as a broken line, and glued to the next line a ``--resume``
    appends."""
    proc = run_cli("batch", "--out", tmp_path / "o", "--", "true", ":::", "1", preexec_fn=_file_size_limit(300))
    assert proc.returncode == 111, proc.stderr
    assert b"cannot write " in proc.stderr, proc.stderr
    assert (tmp_path / "o" / "summary.jsonl").read_bytes() == b""


def test_resume_after_a_torn_last_line_writes_its_lines_whole(tmp_path):
    """A summary whose last line was torn (a crash mid-write): ``--resume`` appended its first
    line to the torn one, and both were lost to every reader. Now the torn line is ended first,
    skipped as no job's line, and the job it was cut from runs again."""
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": "a", "args": ["true"]}, {"id": "b", "args": ["true"]}])
    out = tmp_path / "o"
    assert run_cli("batch", "--out", out, manifest).returncode == 0
    path = out / "summary.jsonl"
    first, second = path.read_bytes().splitlines(keepends=True)
    cut = json.loads(second)["id"]  # the two jobs run side by side: lines come in finishing order
    path.write_bytes(first + second[:100])  # the second line, torn
    proc = run_cli("batch", "--out", out, "--resume", manifest)
    assert proc.returncode == 0, proc.stderr
    torn, *whole = path.read_bytes().splitlines()[1:]
    assert torn == second[:100]
    assert [json.loads(line)["id"] for line in whole] == [cut]


def test_a_resumed_summary_line_that_fails_part_way_is_cut_back_to_the_whole_lines(tmp_path):
    """The torn part cut back on ``--resume`` too: to the end of the lines already there, with
    the newline that ended an earlier torn line."""
    manifest = write_manifest(tmp_path / "m.jsonl", [{"id": "a", "args": ["true"]}, {"id": "b", "args": ["true"]}])
    out = tmp_path / "o"
    assert run_cli("batch", "--out", out, manifest).returncode == 0
    path = out / "summary.jsonl"
    first, second = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(first + second[:100])
    kept = len(first) + 100 + 1  # the torn line ended
    proc = run_cli("batch", "--out", out, "--resume", manifest, preexec_fn=_file_size_limit(kept + 50))
    assert proc.returncode == 111 and b"cannot write " in proc.stderr, proc.stderr
    assert path.read_bytes() == first + second[:100] + b"\n"


def test_a_summary_line_is_written_without_asking_the_files_size(tmp_path, monkeypatch):
    """Each line asked the summary's size first, to cut a torn line back to it: an ``fstat``
    that failed left that size unset, and the batch ended in a NameError's traceback."""
    from processkit.batching.recorder import Recorder

    recorder = Recorder(str(tmp_path / "o"), [])
    fd = recorder._fd

    def failing(_):
        raise OSError(errno.EIO, "fstat failed")

    monkeypatch.setattr(os, "fstat", failing)
    assert recorder._write(fd, b'{"id":"a"}\n') is None
    monkeypatch.undo()
    recorder.close()
    assert (tmp_path / "o" / "summary.jsonl").read_bytes() == b'{"id":"a"}\n'


def test_the_end_says_how_a_retried_or_flaky_jobs_earlier_attempts_ended(tmp_path):
    """``--show-output`` shows only a job's last attempt, and the closing block said only "3
    attempts": a flaky job's failure, or a retried job's earlier deaths by a signal, were on no
    screen. The block now names each earlier attempt's end and where its files are, a flaky
    job's too (as nextest lists its FLAKY tests at the end)."""
    flag = tmp_path / "flag"
    jobs = [
        {"args": ["sh", "-c", f"test -e {flag} && exit 0; touch {flag}; echo 'not yet' >&2; exit 1"], "id": "flaky"},
        {"args": ["sh", "-c", "echo dying >&2; kill -9 $$"], "id": "dies"},
    ]
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, "--retries", "2", "--show-output")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    lines = proc.stderr.decode().splitlines()
    start = lines.index("batch: 1 flaky job:")
    assert lines[start : start + 3] == [
        "batch: 1 flaky job:",
        "  flaky: exit 0 on attempt 2",
        f"    attempt 1: exit 1, in {out}/flaky/attempt-1/",
    ]
    assert failure_block(proc.stderr)[:4] == [
        "batch: 1 job failed (killed by a signal):",
        "  dies: killed by signal 9 (SIGKILL), exit 137",
        f"    attempt 1: killed by signal 9 (SIGKILL), exit 137, in {out}/dies/attempt-1/",
        f"    attempt 2: killed by signal 9 (SIGKILL), exit 137, in {out}/dies/attempt-2/",
    ]
    assert lines[-1] == "batch: 1 of 2 jobs exited 0, 1 failed, 1 flaky"


def test_the_flaky_block_counts_every_flaky_job_past_the_twenty_named(tmp_path):
    """The flaky block named its first 20 jobs and counted only those: 22 flaky jobs said
    ``batch: 20 flaky jobs:``. It now counts them all, and says the ones not named, as the
    failed jobs' block does."""
    flags = [str(tmp_path / f"f{number:02}") for number in range(22)]
    script = 'test -e "$0" && exit 0; touch "$0"; exit 1'
    proc = run_cli("batch", "--out", tmp_path / "out", "--retries", "1", "--", "sh", "-c", script, ":::", *flags)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.decode().splitlines()
    start = lines.index("batch: 22 flaky jobs:")
    assert lines[start + 41] == f"  ... and 2 more (see {tmp_path / 'out'}/summary.jsonl)", lines[start:]
    assert lines[-1] == "batch: 22 of 22 jobs exited 0, 22 flaky"


def test_the_end_block_says_how_its_jobs_ended_as_their_lines_do(tmp_path):
    """The block at the end was headed ``3 failed jobs:`` for jobs that timed out or were killed,
    and named a timed-out job ``exit 106 (timeout)`` where its own line said ``timed out (exit
    106)``. Its heading now counts them as the closing sentence does, saying how many of the
    failed were killed by a signal (nextest's FAIL, SIGSEGV, TIMEOUT), and each is named in its
    line's words."""
    script = "case $1 in hangs) exec sleep 30;; segv) kill -SEGV $$;; *) exit 3;; esac"
    proc = run_cli(
        "batch", "--out", tmp_path / "out", "--timeout", "200ms", "--jobs", "1",
        "--", "sh", "-c", script, "sh", ":::", "segv", "three", "hangs",
    )  # fmt: skip
    assert proc.returncode == BATCH_FAILED, proc.stderr
    block = failure_block(proc.stderr)
    assert block[0] == "batch: 2 jobs failed (1 killed by a signal), 1 timed out:", block
    named = [line for line in block if line.startswith("  ") and not line.startswith("    ")]
    assert named == [
        "  segv: killed by signal 11 (SIGSEGV), exit 139",
        "  three: exit 3",
        "  hangs: timed out (exit 106)",
    ]
    said = proc.stderr.decode().splitlines()
    assert "batch: hangs: timed out (exit 106)" in [line.split(" in ")[0] for line in said], said
    assert said[-1] == "batch: 0 of 3 jobs exited 0, 2 failed, 1 timed out", said


def test_the_json_envelope_leads_its_named_jobs_by_how_they_ended(tmp_path):
    """``--error-format json``'s one line led every named job with ``failed``, a timed-out one
    too (``failed three: exit 3; hangs: timed out (exit 106)``): the lead now says how they ended."""
    script = "case $1 in hangs) exec sleep 30;; *) exit 3;; esac"
    for given, lead in ((("three", "hangs"), "failed or timed out"), (("hangs",), "timed out")):
        out = tmp_path / "-".join(given)
        proc = run_cli(
            "--error-format", "json", "batch", "--out", out, "--timeout", "200ms", "--jobs", "1",
            "--", "sh", "-c", script, "sh", ":::", *given,
        )  # fmt: skip
        assert proc.returncode == BATCH_FAILED, proc.stderr
        named = "; ".join(f"{job}: {'timed out (exit 106)' if job == 'hangs' else 'exit 3'}" for job in given)
        message = json.loads(proc.stderr)["message"]
        assert message.endswith(f"; {lead} {named}; see {out}/summary.jsonl"), message

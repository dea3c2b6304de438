"""The batch's closing line says what happened in words that fit it: one line for a batch with no
job, saying what it did with its reports; a count's noun agreeing with it (``text.plural``)."""

from __future__ import annotations

import os

from conftest import run_cli

BATCH_FAILED = 117


def test_an_empty_batch_into_an_earlier_batchs_out_closes_with_one_line_saying_what_it_wrote(tmp_path):
    """It printed two closing lines, ``no jobs in the manifest`` then ``0 of 0 jobs exited 0``,
    and neither said that the earlier batch's summary and page were replaced by empty ones; then
    it said that, but not that the earlier batch's job directory was left there as it was."""
    out, report = tmp_path / "out", tmp_path / "junit.xml"
    (tmp_path / "one.jsonl").write_text('{"id": "one", "args": ["true"]}\n')
    (tmp_path / "empty.jsonl").write_text("")
    assert run_cli("batch", tmp_path / "one.jsonl", "--out", out).returncode == 0
    proc = run_cli("batch", tmp_path / "empty.jsonl", "--out", out)
    assert proc.returncode == 0, proc.stderr
    left = f"processkit-cli: warning: {out} holds 1 job directory an earlier batch wrote that this one did not (one): "
    said = f"{left}its files are not this batch's\nbatch: no jobs in the manifest; wrote an empty summary and page in {out}\n"
    assert proc.stderr.decode() == said
    assert (out / "summary.jsonl").read_text() == ""
    proc = run_cli("batch", tmp_path / "empty.jsonl", "--out", out, "--junit", report)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode() == said.replace(f"{out}\n", f"{out}, and an empty --junit {report}\n")
    assert 'tests="0"' in report.read_text()


def test_a_batch_of_one_job_counts_it_as_one_job(tmp_path):
    """``0 of 1 jobs exited 0``: the noun now agrees with the count it follows."""
    (tmp_path / "m.jsonl").write_text('{"id": "fails", "args": ["false"]}\n')
    proc = run_cli("batch", tmp_path / "m.jsonl", "--out", tmp_path / "out")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    assert proc.stderr.decode().splitlines()[-1] == "batch: 0 of 1 job exited 0, 1 failed"


def test_a_batch_into_an_earlier_batchs_out_names_the_job_directories_it_did_not_write(tmp_path):
    """A job the earlier batch had and this one has not, or one this batch never started (the
    halt), kept its directory, a failure's stream and capture in it, unsaid, beside a summary
    and page of this batch that do not name it; the jobs it ran, and a ``--resume``, say nothing."""
    out = tmp_path / "out"
    (tmp_path / "old.jsonl").write_text(
        '{"id": "gone", "args": ["sh", "-c", "echo stale >&2; exit 3"]}\n{"id": "late", "args": ["true"]}\n'
    )
    (tmp_path / "new.jsonl").write_text('{"id": "first", "args": ["false"]}\n{"id": "late", "args": ["true"]}\n')
    assert run_cli("batch", tmp_path / "old.jsonl", "--out", out).returncode == BATCH_FAILED
    proc = run_cli("batch", tmp_path / "new.jsonl", "--out", out, "--halt-on-failure", "-j", "1")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    lines = proc.stderr.decode().splitlines()
    left = [line for line in lines if "an earlier batch wrote" in line]
    assert left == [
        f"processkit-cli: warning: {out} holds 2 job directories an earlier batch wrote that this one did not "
        "(gone, late): their files are not this batch's"
    ], lines
    assert lines[-1].endswith("halted by --halt-on-failure"), lines  # the batch's own words stay last
    proc = run_cli("batch", tmp_path / "new.jsonl", "--out", out)  # every job of it ran: only gone's is left
    assert [line for line in proc.stderr.decode().splitlines() if "earlier batch" in line] == [
        f"processkit-cli: warning: {out} holds 1 job directory an earlier batch wrote that this one did not "
        "(gone): its files are not this batch's"
    ]
    proc = run_cli("batch", tmp_path / "new.jsonl", "--out", out, "--resume")  # the old lines are kept: said apart
    assert b"job directory" not in proc.stderr and b"job directories" not in proc.stderr, proc.stderr


def test_an_earlier_batchs_job_directory_is_named_whatever_its_files_times_say(tmp_path):
    """They were judged by the stream's time against the batch's start: a stream stamped ahead of
    it (another host's clock, under Dask on a shared file system) was taken for this batch's. The
    first five in order are named, and how many more."""
    out = tmp_path / "out"
    old = [f'{{"id": "{name}", "args": ["false"]}}\n' for name in ("ahead", "b6", "b5", "b4", "b3", "b2", "b1", "kept")]
    (tmp_path / "old.jsonl").write_text("".join(old))
    (tmp_path / "new.jsonl").write_text('{"id": "kept", "args": ["true"]}\n')
    assert run_cli("batch", tmp_path / "old.jsonl", "--out", out).returncode == BATCH_FAILED
    later = os.stat(out / "ahead" / "events.jsonl").st_mtime_ns + 3600 * 10**9
    os.utime(out / "ahead" / "events.jsonl", ns=(later, later))
    proc = run_cli("batch", tmp_path / "new.jsonl", "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stderr.decode().splitlines() if "earlier batch" in line] == [
        f"processkit-cli: warning: {out} holds 7 job directories an earlier batch wrote that this one did not "
        "(ahead, b1, b2, b3, b4 and 2 more): their files are not this batch's"
    ], proc.stderr


def test_a_job_the_halt_left_unstarted_says_why_on_its_own_line(tmp_path):
    """A CI log, read from a job's line (grepped by its id), said ``batch: c: not started`` for a
    job ``--halt-on-failure`` kept from starting: why was only on the closing line, far below."""
    proc = run_cli(
        "batch", "--out", tmp_path / "out", "-j", "1", "--halt-on-failure", "--", "sh", "-c", 'exit "$0"',
        ":::", "0", "4", "0", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == BATCH_FAILED, proc.stderr
    lines = proc.stderr.decode().splitlines()
    assert "batch: 0-3: not started, halted by --halt-on-failure" in lines, lines
    assert lines[-1].startswith("batch: 1 of 3 jobs exited 0, 1 failed, 1 not started, halted by --halt-on-failure")

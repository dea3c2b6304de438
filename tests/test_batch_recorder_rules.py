"""The batch recorder's own rules, in process: its counts and closing sentence (which the exit
code and the last line of every batch follow), a never-started job's line, and the summary file
it makes. A mutation pass (bench/README.md, "Mutation testing") found these unpinned by the
process-level tests."""

from __future__ import annotations

import json
import os
import stat

import pytest

from processkit.batching.manifest import Job
from processkit.batching.counts import JobCounts
from processkit.batching.recorder import Recorder
from processkit.errors import Failure
from processkit.summary_line import JobLine


def line(exit_code, source="child_exit") -> JobLine:
    found = JobLine.read({"id": "j", "exit_code": exit_code, "source": source})
    assert found is not None
    return found


def test_a_fresh_count_has_nothing_to_say_but_the_total():
    counts = JobCounts(3)
    assert counts.sentence() == "0 of 3 jobs exited 0"
    assert counts.unsuccessful == 0


def test_each_end_is_counted_once_where_it_belongs():
    counts = JobCounts(6)
    for each in (line(0), line(0), line(1), line(137, "timeout"), line(None, "halted"), line(2, "signal")):
        counts.count(each)
    assert (counts.succeeded, counts.failed, counts.timed_out, counts.not_started) == (2, 2, 1, 1)
    assert counts.unsuccessful == 4  # every job that did not exit 0, one never started among them
    assert (
        counts.sentence() == "2 of 6 jobs exited 0, 2 failed, 1 timed out, 1 not started, halted by --halt-on-failure"
    )


def test_the_sentence_names_a_resume_and_a_stop():
    counts = JobCounts(4)
    counts.skipped = 3
    counts.count(line(0))
    counts.cancelled_by = "sigterm"
    assert counts.sentence() == "1 of 1 job to run exited 0, 3 skipped (--resume: passed before), cancelled by SIGTERM"


def test_a_job_never_started_by_default_made_no_attempt(tmp_path):
    """What a Dask batch's recorder writes for a job its halt left unstarted."""
    recorder = Recorder(str(tmp_path / "out"), [Job("a", ["true"], None)])
    recorder.record_not_started(next(iter(recorder.todo)))
    recorder.close()
    written = json.loads((tmp_path / "out" / "summary.jsonl").read_text())
    assert (written["id"], written["attempts"], written["exit_code"], written["source"]) == ("a", 0, None, "halted")
    assert recorder.lines[0].attempts == 0


def test_the_summary_is_the_users_to_read_and_others_to_read_only(tmp_path):
    old = os.umask(0o022)
    try:
        Recorder(str(tmp_path / "out"), []).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "out" / "summary.jsonl").st_mode) == 0o644


def test_a_summary_that_is_a_link_is_refused_as_one(tmp_path):
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    (tmp_path / "elsewhere").write_text("")
    (out / "summary.jsonl").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(Failure) as refused:
        Recorder(str(out), [], resume=True)
    assert "it is a symbolic link, and a link is never followed" in str(refused.value)


def test_closing_a_recorder_closes_its_summary(tmp_path):
    """A runner service carries batch after batch in one process: a summary left open at each
    batch's end would add a descriptor per batch until the open-file limit refused the next."""
    before = sorted(os.listdir("/proc/self/fd"))
    recorder = Recorder(str(tmp_path / "out"), [])
    assert len(os.listdir("/proc/self/fd")) == len(before) + 2  # the summary and out's lock, open while it records
    recorder.close()
    assert sorted(os.listdir("/proc/self/fd")) == before

"""What CI asks of a batch, through the real CLI: ``--junit`` (read back by ElementTree and, where
installed, by ``junitparser``, a real JUnit reader from PyPI), flaky jobs, ``--retry-delay``,
and ``--partition`` shares whose union is every job exactly once."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

import pytest

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_event
from processkit.text import milliseconds
from streams import PY

BATCH_FAILED, USAGE = 117, 100
# Fails (exit 2, with words on stderr) on its first attempt, passes on its second: the marker
# file says which attempt this is.
FLAKY = "import os,sys\nif os.path.exists(sys.argv[1]): print('fine'); sys.exit(0)\nopen(sys.argv[1],'w').close()\nprint('boom <&>', file=sys.stderr)\nsys.exit(2)"


def manifest(tmp_path, jobs) -> str:
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    return str(path)


def summary(out) -> dict[str, dict]:
    return {line["id"]: line for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines())}


def ci_batch(tmp_path):
    jobs = [
        {"id": "flaky", "args": [PY, "-c", FLAKY, str(tmp_path / "marker")]},
        {
            "id": "bad",
            "args": [
                PY,
                "-c",
                "import sys; print('out'); print('err \\x01 \\ud800 end', file=sys.stderr); sys.exit(3)",
            ],
        },
        {"id": "good", "args": ["true"]},
        {"id": "below-bad", "args": ["true"], "needs": ["bad"]},
        {"id": "no-program", "args": [str(tmp_path / "absent")]},
    ]
    out = tmp_path / "out"
    junit = tmp_path / "junit.xml"
    result = run_cli("batch", manifest(tmp_path, jobs), "--out", out, "--retries", "2", "--junit", junit)
    return result, out, junit


def test_junit_is_what_ci_reporters_read(tmp_path):
    result, out, junit = ci_batch(tmp_path)
    assert result.returncode == BATCH_FAILED, result.stderr
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    assert suite.get("tests") == "5" and suite.get("failures") == "1" and suite.get("errors") == "1"
    assert suite.get("skipped") == "1" and suite.get("hostname") == socket.gethostname()
    datetime.fromisoformat(suite.get("timestamp"))
    assert float(suite.get("time")) > 0
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert set(cases) == {"flaky", "bad", "good", "below-bad", "no-program"}
    failure = cases["bad"].find("failure")
    assert failure.get("message") == "exit 3" and "err" in failure.text and "\x01" not in failure.text
    assert len(cases["bad"].findall("rerunFailure")) == 2
    assert cases["bad"].find("system-out").text == "out\n"
    assert cases["below-bad"].find("skipped").get("message").startswith("its need bad did not exit 0")
    assert cases["no-program"].find("error") is not None
    flaky = cases["flaky"]
    assert flaky.find("failure") is None and len(flaky.findall("flakyFailure")) == 1
    assert "boom <&>" in flaky.find("flakyFailure").find("system-err").text
    assert cases["good"].find("failure") is None and cases["good"].find("skipped") is None


def test_junit_timestamp_names_its_zone(tmp_path):
    """The suite's start is UTC: written without an offset, Ant's convention (and JavaScript's
    Date, which GitHub's reporters parse with) reads it as the reader's local time, hours off."""
    out = tmp_path / "out"
    junit = tmp_path / "junit.xml"
    jobs = [{"id": "one", "args": ["true"]}]
    env = {**os.environ, "TZ": "Asia/Tokyo"}
    result = run_cli("batch", manifest(tmp_path, jobs), "--out", out, "--junit", junit, env=env)
    assert result.returncode == 0, result.stderr
    written = ET.parse(junit).getroot().find("testsuite").get("timestamp")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", written), written  # as nextest's
    stamp = datetime.fromisoformat(written)
    assert stamp.utcoffset() is not None, stamp  # the instant, whatever the reader's zone
    started = datetime.fromisoformat(summary(out)["one"]["started_at"].replace("Z", "+00:00"))
    assert abs((started - stamp).total_seconds()) < 1


@pytest.mark.parametrize("crafted", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_junit_timestamp_of_a_crafted_start_is_still_a_date(tmp_path, crafted):
    """A ``--resume``'d summary line is read back: one whose start is before the epoch in UTC
    (year 1 at +14:00) made the timestamp's date overflow (104); one past year 9999 in UTC would
    too. The line is an earlier batch's (by its id, whatever its clock says): the timestamp is
    this batch's own start, which ran none."""
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    path = manifest(tmp_path, [{"id": "a", "args": ["true"]}])
    assert run_cli("batch", path, "--out", out, cwd=tmp_path).returncode == 0
    line = summary(out)["a"]
    line["started_at"] = crafted
    (out / "summary.jsonl").write_text(json.dumps(line) + "\n")
    began = datetime.now(timezone.utc)
    result = run_cli("batch", path, "--out", out, "--resume", "--junit", junit, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    said = ET.parse(junit).getroot().find("testsuite").get("timestamp")
    assert abs((datetime.fromisoformat(said) - began).total_seconds()) < 60, said


def test_junit_parses_with_junitparser(tmp_path):
    junitparser = pytest.importorskip("junitparser")
    result, out, junit = ci_batch(tmp_path)
    assert result.returncode == BATCH_FAILED, result.stderr
    xml = junitparser.JUnitXml.fromfile(str(junit))
    suites = list(xml) if isinstance(xml, junitparser.JUnitXml) else [xml]
    (suite,) = suites
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (5, 1, 1, 1)
    by_name = {case.name: case for case in suite}
    assert by_name["good"].is_passed and by_name["flaky"].is_passed
    assert by_name["below-bad"].is_skipped
    assert any(isinstance(item, junitparser.Failure) for item in by_name["bad"].result)


def test_a_job_that_passes_on_a_retry_is_flaky_everywhere(tmp_path):
    result, out, _ = ci_batch(tmp_path)
    lines = summary(out)
    assert lines["flaky"]["flaky"] is True and lines["flaky"]["attempts"] == 2
    assert "flaky" not in lines["good"] and "flaky" not in lines["bad"], "only where it says something"
    stderr = result.stderr.decode()
    assert "batch: FLAKY 2/3 flaky: exit 0" in stderr and "1 flaky" in stderr
    assert "flaky (passed on attempt 2)" in (out / "index.html").read_text()


def test_retry_delay_pauses_before_each_retry_and_may_double(tmp_path):
    jobs = [{"id": "always", "args": ["false"]}]
    out = tmp_path / "out"
    result = run_cli("batch", manifest(tmp_path, jobs), "--out", out, "--retries", "2", "--retry-delay", "exp:300ms")
    assert result.returncode == BATCH_FAILED
    line = summary(out)["always"]
    starts = [attempt["started_at"] for attempt in line["earlier_attempts"]] + [line["started_at"]]
    times = [datetime.fromisoformat(text.replace("Z", "+00:00")) for text in starts]
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(times, times[1:])]
    assert gaps[0] >= 0.3 and gaps[1] >= 0.6, gaps
    refused = run_cli("batch", manifest(tmp_path, jobs), "--out", out, "--retry-delay", "soon")
    assert refused.returncode == USAGE


@pytest.mark.parametrize("kind", ["", "count:", "hash:"])
def test_partitions_are_deterministic_and_together_run_every_job_once(tmp_path, kind):
    jobs = [{"id": f"job{n}", "args": ["true"]} for n in range(11)]
    path = manifest(tmp_path, jobs)
    seen: list[str] = []
    for share in (1, 2, 3):
        out = tmp_path / f"out{share}"
        result = run_cli("batch", path, "--out", out, "--partition", f"{kind}{share}/3")
        assert result.returncode == 0, result.stderr
        ids = sorted(summary(out))
        again = tmp_path / f"again{share}"
        run_cli("batch", path, "--out", again, "--partition", f"{kind}{share}/3")
        assert sorted(summary(again)) == ids, "the same share every time"
        seen += ids
    assert sorted(seen) == sorted(job["id"] for job in jobs)
    if kind != "hash:":
        assert sorted(summary(tmp_path / "out1")) == ["job0", "job3", "job6", "job9"]


@pytest.mark.parametrize("kind", ["", "hash:"])
def test_a_dry_runs_listing_is_its_partitions_share(tmp_path, kind):
    """``--dry-run --partition 2/3`` printed every job, with no word that the share was not
    applied: a dry run shows what would run, the same jobs the share runs."""
    template = ["--", "true", ":::", *(f"job{n}" for n in range(7))]
    listed = run_cli("batch", "--dry-run", "--partition", f"{kind}2/3", *template, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    ids = [json.loads(line)["id"] for line in listed.stdout.splitlines()]
    ran = run_cli("batch", "--out", tmp_path / "out", "--partition", f"{kind}2/3", *template, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert sorted(ids) == sorted(summary(tmp_path / "out")), listed.stdout
    if not kind:
        assert ids == ["job1", "job4"]


def test_a_flaky_jobs_page_keeps_its_oom_kills_beside_its_leak(tmp_path):
    """The page's flaky outcome kept a leak but dropped the OOM killer's kills (its other outcomes
    said both): one summary line read back with both, as a batch under a memory cap writes it."""
    out, page = tmp_path / "out", tmp_path / "page.html"
    path = manifest(tmp_path, [{"id": "flaky", "args": [PY, "-c", FLAKY, str(tmp_path / "marker")]}])
    result = run_cli("batch", path, "--out", out, "--retries", "1")
    assert result.returncode == 0, result.stderr
    line = summary(out)["flaky"]
    assert line["flaky"] is True
    line.update(oom_kills=2, leaked=1)
    (out / "summary.jsonl").write_text(json.dumps(line) + "\n")
    drawn = run_cli("report", out, "-o", page)
    assert drawn.returncode == 0, drawn.stderr
    said = re.search(r"flaky \(passed on attempt 2\)[^<]*", page.read_text()).group()
    assert "OOM killer ended 2 process(es) of its tree) (left 1 process running" in said, said


def test_a_share_with_no_job_still_writes_its_outputs(tmp_path):
    """More machines than jobs: the last share gets none. It wrote nothing, so the CI read the
    JUnit and summary an earlier batch left in the workspace (here one with a failure), or found
    no report at all; it now writes an empty summary, page and JUnit, and says why."""
    jobs = [{"id": "passes", "args": ["true"]}, {"id": "fails", "args": ["false"]}]
    path = manifest(tmp_path, jobs)
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    earlier = run_cli("batch", path, "--out", out, "--junit", junit)
    assert earlier.returncode == BATCH_FAILED and ET.parse(junit).getroot().get("failures") == "1"
    before = datetime.now(timezone.utc).replace(microsecond=0)
    result = run_cli("batch", path, "--out", out, "--junit", junit, "--partition", "3/3")
    after = datetime.now(timezone.utc)
    assert result.returncode == 0, result.stderr
    assert "batch: share 3/3 holds no job" in result.stderr.decode()
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures")) == ("0", "0")
    stamp = datetime.fromisoformat(root.find("testsuite").get("timestamp"))
    assert before <= stamp <= after, stamp  # the batch's own start (it was 1970 without a job's)
    assert summary(out) == {} and "0 jobs" in (out / "index.html").read_text()
    page = run_cli("report", out, "-o", tmp_path / "page.html")  # drawn again, as any batch's --out
    assert page.returncode == 0, page.stderr
    assert "0 jobs" in (tmp_path / "page.html").read_text()
    (out / "summary.jsonl").write_text('{"no": "id"}\nnot JSON\n')  # lines, but no job's: still refused
    refused = run_cli("report", out, "-o", tmp_path / "page.html")
    assert refused.returncode == 114 and b"holds no job's line" in refused.stderr, refused.stderr


def test_an_empty_share_under_dask_writes_its_outputs_without_the_scheduler(tmp_path):
    """``--dask-scheduler`` with a share that holds no job: nothing to send, so the scheduler is
    not contacted (it once waited 30 s for an unreachable one, exited 111 and wrote nothing)."""
    path = manifest(tmp_path, [{"id": "one", "args": ["true"]}])
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    with socket.socket() as scheduler:
        scheduler.bind(("127.0.0.1", 0))
        scheduler.listen()
        scheduler.setblocking(False)
        address = f"tcp://127.0.0.1:{scheduler.getsockname()[1]}"
        env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
        args = ("--junit", junit, "--partition", "count:2/2", "--dask-scheduler", address)
        result = run_cli("batch", path, "--out", out, *args, env=env, timeout=60)
        with pytest.raises(BlockingIOError):  # no connection waits: none was made
            scheduler.accept()
    assert result.returncode == 0, result.stderr
    assert "batch: share count:2/2 holds no job" in result.stderr.decode()
    assert summary(out) == {} and ET.parse(junit).getroot().get("tests") == "0"


def test_a_bad_partition_is_a_usage_error(tmp_path):
    path = manifest(tmp_path, [{"id": "a", "args": ["true"]}, {"id": "b", "args": ["true"], "needs": ["a"]}])
    for value in ("0/3", "4/3", "1/0", "x/3", "mod:1/2", "1-2"):
        result = run_cli("batch", path, "--out", tmp_path / "out", "--partition", value)
        assert result.returncode == USAGE, (value, result.stderr)
    graphed = run_cli("batch", path, "--out", tmp_path / "out", "--partition", "1/2")
    assert graphed.returncode == USAGE and b"cannot split a job graph" in graphed.stderr
    assert not (tmp_path / "out").exists()


def test_a_large_batch_junit_still_shows_why_a_job_failed(tmp_path):
    """All tails share 64 MiB: 8200 passing jobs of 4 KiB a stream spent it before the failing
    job's turn, and its ``failure`` was empty, without a word. Failures take their share first,
    and a tail cut or left out says so."""
    noisy = "import sys; sys.stdout.write('o' * 5000 + '\\n'); sys.stderr.write('e' * 5000 + '\\n')"
    jobs = [
        {"id": "ok", "args": [PY, "-c", noisy]},
        {"id": "bad", "args": [PY, "-c", "import sys; print('THE-REAL-ERROR', file=sys.stderr); sys.exit(3)"]},
    ]
    path, out, junit = manifest(tmp_path, jobs), tmp_path / "out", tmp_path / "junit.xml"
    assert run_cli("batch", path, "--out", out).returncode == BATCH_FAILED
    lines = summary(out)
    # a large batch's, first; job_sha256 None on purpose: a summary from before lines carried a
    # digest, which --resume skips as passed (each ok{n}'s line is ok's, copied: its digest need not match)
    many = [{**lines["ok"], "id": f"ok{n}", "job_sha256": None} for n in range(8200)]
    (out / "summary.jsonl").write_text("".join(json.dumps(line) + "\n" for line in [*many, lines["bad"]]))
    path = manifest(tmp_path, [{**jobs[0], "id": line["id"]} for line in many] + jobs[1:])  # skipped, not left out
    result = run_cli("batch", path, "--out", out, "--resume", "--junit", junit)
    assert result.returncode == BATCH_FAILED, result.stderr
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    assert "THE-REAL-ERROR" in cases["bad"].find("failure").text
    assert cases["ok0"].find("system-out").text.startswith("[the last 4 KiB of the 4.9 KiB in ")
    assert cases["ok8199"].find("system-err") is None, "a passing job's output left out is said by no note"


def test_junit_notes_what_the_budget_left_out_only_for_failures_and_keeps_their_message(tmp_path):
    """Every passing job past the 64 MiB of tails got a ``left out`` note (a large batch's file
    grew with them), and a failure whose stderr tail was left out lost its message to the note;
    a skipped job (a stop's) got the note too, which docs/batch.md gives failures alone.

    A renderer test (``junit_xml`` over a crafted summary): spending the budget on failures at
    process level takes 8,200 failing jobs run, as ``--resume`` now leaves out the lines its
    manifest lacks and runs its failures again. The CLI path (``batch --resume --junit`` with
    the budget spent) is ``test_a_large_batch_junit_still_shows_why_a_job_failed``'s, a
    skipped job's line in a batch's JUnit ``test_junit_is_what_ci_reporters_read``'s."""
    noisy = "import sys; sys.stdout.write('o' * 5000 + '\\n'); sys.stderr.write('e' * 5000 + '\\n'); sys.exit({})"
    jobs = [{"id": "ok", "args": [PY, "-c", noisy.format(0)]}, {"id": "bad", "args": [PY, "-c", noisy.format(3)]}]
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    assert run_cli("batch", manifest(tmp_path, jobs), "--out", out).returncode == BATCH_FAILED
    lines = summary(out)
    many = [{**lines["bad"], "id": f"bad{n}"} for n in range(8200)]  # failures enough to spend the budget
    last = {**lines["bad"], "id": "last", "message": "THE-MESSAGE"}
    skip = {**lines["bad"], "id": "skip", "exit_code": None, "child_code": None, "source": "sigterm"}
    written = [lines["ok"], *many, last, skip]
    (out / "summary.jsonl").write_text("".join(json.dumps(line) + "\n" for line in written))
    # Drawn from that summary as the batch draws its JUnit (a --resume now leaves out the jobs its
    # manifest has not, and running 8,200 failures for it would take minutes).
    from processkit.report.batch_model import load
    from processkit.report.junit import junit_xml

    junit.write_text(junit_xml(load(str(out)), str(out), time.time_ns()))
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    assert cases["ok"].find("system-out") is None and cases["ok"].find("system-err") is None
    body = cases["last"].find("failure").text
    assert body.startswith("THE-MESSAGE\n[stdout]\n[left out: this report's 64 MiB for output tails"), body
    assert cases["last"].find("system-err").text.startswith("[left out: ")
    assert cases["skip"].find("skipped") is not None
    assert cases["skip"].find("system-err") is None, "a skipped job's output left out is said by no note"


def test_a_passing_jobs_capture_is_not_opened_once_the_tails_budget_is_spent(tmp_path, monkeypatch):
    """Once all ``TAILS_BYTES`` were spent, every passing job's capture was still opened and
    stat'ed, only to give nothing (a passing job's tail says nothing of what was left out)."""
    from processkit.report import junit, why_lines

    capture = tmp_path / "stdout.log"
    capture.write_bytes(b"line\n")

    def refused(*args, **kwargs):
        raise AssertionError("the capture was opened")

    monkeypatch.setattr(why_lines, "opened", refused)
    assert junit._tail_of(str(capture), [0], say_left_out=False) == ""
    monkeypatch.undo()
    assert "was spent" in junit._tail_of(str(capture), [0], say_left_out=True)


SETUP = 111


def test_a_junit_report_not_written_fails_the_batch_in_one_line(tmp_path):
    """A CI that asked for a JUnit report and got none passed, on a warning: the batch now ends
    111 (a setup failure, as nextest ends a run whose JUnit it cannot write) when no job failed, and says
    why on its last line, after the closing count. Here the job itself puts a directory where
    the report goes, after the start's check of the place."""
    junit = tmp_path / "junit.xml"
    jobs = [{"id": "a", "args": ["mkdir", str(junit)]}]
    result = run_cli("batch", manifest(tmp_path, jobs), "--out", tmp_path / "out", "--junit", junit)
    assert result.returncode == SETUP, result.stderr
    lines = result.stderr.decode().splitlines()
    assert lines[-2] == "batch: 1 of 1 job exited 0"
    assert lines[-1] == f"processkit-cli: could not write the JUnit file `{junit}`: Is a directory (os error 21)"
    assert summary(tmp_path / "out")["a"]["exit_code"] == 0, "the job's own record stands"
    quiet = run_cli(
        "--error-format", "json", "batch", manifest(tmp_path, jobs), "--out", tmp_path / "out2", "--junit", junit
    )
    assert quiet.returncode == SETUP  # refused at the start now: the place is a directory already
    assert json.loads(quiet.stderr)["kind"] == "setup"


def test_failed_jobs_keep_117_when_the_junit_report_is_not_written(tmp_path):
    """Failed jobs and a JUnit report not written ended 111, and the 117 was lost: under
    ``--error-format json`` the one envelope held no sign a job failed. Failed jobs keep their
    117 (the envelope names them), and the report's failure is said beside it."""
    for quiet, junit in ((False, tmp_path / "j1.xml"), (True, tmp_path / "j2.xml")):
        jobs = [{"id": "a", "args": ["sh", "-c", 'mkdir "$0"; exit 3', str(junit)]}]
        flags = ["--error-format", "json"] if quiet else []
        out = tmp_path / f"out-{quiet}"
        result = run_cli(*flags, "batch", manifest(tmp_path, jobs), "--out", out, "--junit", junit)
        assert result.returncode == BATCH_FAILED, result.stderr
        unwritten = f"could not write the JUnit file `{junit}`: Is a directory (os error 21)"
        if quiet:
            envelope = json.loads(result.stderr)
            assert envelope["kind"] == "batch_failed"
            failed = f"0 of 1 job exited 0, 1 failed; failed a: exit 3; see {out}/summary.jsonl"
            assert envelope["message"] == f"{failed}; {unwritten}"
        else:
            lines = result.stderr.decode().splitlines()
            assert lines[-2:] == ["batch: 0 of 1 job exited 0, 1 failed", f"processkit-cli: warning: {unwritten}"]


@pytest.mark.parametrize("flag", ["--junit", "--trace"])
def test_a_junit_at_the_out_directory_is_refused_before_any_job(tmp_path, flag):
    out = tmp_path / "out"
    result = run_cli("batch", "--out", out, flag, out, "--", "touch", tmp_path / "ran", ":::", "a")
    assert result.returncode == SETUP, result.stderr
    assert result.stderr == f"processkit-cli: cannot write {out}: it is the --out directory\n".encode()
    assert not (tmp_path / "ran").exists()


def test_a_stop_in_the_retry_delay_keeps_the_attempt_that_ran_as_the_jobs(tmp_path):
    """SIGTERM while a failed job waits out ``--retry-delay``: its line said ``"attempts": 2``,
    exit 107 and ``started_at`` null, and attempt 1's stream and capture were moved into
    ``attempt-1/`` beside a cancelled stream for an attempt that never ran. Now the line is
    attempt 1's (its exit, its run, its files where a job's are, ``"attempts": 1``) and says the
    retry was not started, in the summary and on the job's terminal line. The stop is sent once
    attempt 1's stream has its ``runner_exit``: the batch takes that attempt's result (and queues
    the retry) before its loop next reads a signal."""
    out = tmp_path / "out"
    jobs = [{"id": "a", "args": ["sh", "-c", "echo ran; exit 5"]}]
    batch = start_cli("batch", manifest(tmp_path, jobs), "--out", out, "--retries", "1", "--retry-delay", "1h")
    try:
        wait_for_event(out / "a" / "events.jsonl", "runner_exit")
        batch.send_signal(signal.SIGTERM)  # the stop
        _, stderr = batch.communicate(timeout=SAFETY_NET)
    finally:
        if batch.poll() is None:  # the wait failed, or the stop did not end it: its own batch, by handle
            batch.kill()
            batch.wait()
    assert batch.returncode == 107, stderr
    said = "run cancelled (SIGTERM): the retry (attempt 2) was not started"
    line = summary(out)["a"]
    assert (line["message"], line["source"], line["exit_code"]) == (said, "child_exit", 5)
    run_id = wait_for_event(out / "a" / "events.jsonl", "run_started")["run_id"]  # the one stream there
    assert (line["attempts"], line["earlier_attempts"], line["run_id"]) == (1, [], run_id)
    assert line["capture"]["stdout"]["path"] == str(out / "a" / "capture" / "stdout.log")
    assert (out / "a" / "capture" / "stdout.log").read_text() == "ran\n"
    assert sorted(os.listdir(out / "a")) == ["capture", "events.jsonl"], "no attempt-1/, no stream of a retry"
    assert f"batch: a: exit 5 in {milliseconds(line['duration_ms'])}: {said}" in stderr.decode().splitlines()
    assert stderr.decode().splitlines()[-1] == "batch: 0 of 1 job exited 0, 1 failed, cancelled by SIGTERM"


def test_a_retry_the_halt_comes_before_keeps_the_attempt_that_ran_as_the_jobs(tmp_path):
    """``--halt-on-failure``: a job that fails after the halt, with retries left, was recorded
    ``halted`` (never started, exit null) with an earlier attempt in ``attempt-1/``, a directory
    never made. Its line is now that attempt's (exit 5, ``"attempts": 1``, its files in place),
    saying the halt kept its retry from starting. ``b`` fails both its attempts first; ``a``
    exits once ``b``'s second attempt's stream has its ``runner_exit`` (the halt is recorded as
    that attempt ends, before the batch's loop next hears a child); its ``attempt-1/`` stream is
    there once the second attempt's stream is the job's."""
    out = tmp_path / "out"
    b_done = f"[ -e {out}/b/attempt-1/events.jsonl ] && grep -qs runner_exit {out}/b/events.jsonl"  # its 2nd ended
    jobs = [
        {"id": "b", "args": ["sh", "-c", "exit 1"]},
        {"id": "a", "args": ["sh", "-c", f"until {b_done}; do sleep 0.01; done; exit 5"]},
    ]
    result = run_cli("batch", manifest(tmp_path, jobs), "--out", out, "-j2", "--retries", "1", "--halt-on-failure")
    assert result.returncode == BATCH_FAILED, result.stderr
    line = summary(out)["a"]
    said = "halted by --halt-on-failure: the retry (attempt 2) was not started"
    assert (line["message"], line["exit_code"], line["attempts"], line["earlier_attempts"]) == (said, 5, 1, [])
    assert sorted(os.listdir(out / "a")) == ["capture", "events.jsonl"]
    assert f"batch: a: exit 5 in {milliseconds(line['duration_ms'])}: {said}" in result.stderr.decode().splitlines()


@pytest.mark.parametrize("named", ["the manifest", "the --history summary", "the batch's summary", "the batch's page"])
def test_a_trace_at_a_file_the_batch_reads_or_writes_is_refused_before_any_job(tmp_path, named):
    """``--trace`` naming the manifest, ``--history`` or the summary was only a warning once every
    job had run; it is refused up front as ``--junit`` is (111, the same words, nothing run)."""
    out = tmp_path / "out"
    jobs = manifest(tmp_path, [{"id": "a", "args": ["touch", str(tmp_path / "ran")]}])
    history = tmp_path / "history.jsonl"
    history.write_text("")
    trace = {
        "the manifest": jobs,
        "the --history summary": history,
        "the batch's summary": out / "summary.jsonl",
        "the batch's page": out / "index.html",
    }[named]
    result = run_cli("batch", jobs, "--out", out, "--history", history, "--trace", trace)
    assert result.returncode == SETUP, result.stderr
    assert result.stderr == f"processkit-cli: cannot write {trace}: it is {named}\n".encode()
    assert not (tmp_path / "ran").exists()


# A batch whose halt is told from elsewhere, as a Dask client tells a worker's chunk
# (``run_batch``'s ``halted``): here, once the file argv[2] exists.
HALTED_ELSEWHERE = """import json, os, sys
from processkit.batching.ci import RetryDelay
from processkit.batching.manifest import jobs_from
from processkit.batching.on_host import Settings, run_batch
out, flag, jobs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
settings = Settings(out, 2, retries=1, halt_on_failure=True, retry_delay=RetryDelay(3_600_000, False))
lines, _ = run_batch(jobs_from(jobs), settings, signals=False, halted=lambda: os.path.exists(flag))
print(json.dumps({line.id: [line.exit_code, line.attempts, line.message] for line in lines}))
"""


def test_a_halt_during_the_retry_delay_ends_the_pause_and_starts_no_retry(tmp_path):
    """The halt came while a failed job waited out ``--retry-delay``: the pause went on (an
    hour here) and the retry then started, though no job starts after the halt. The halt now
    ends the pause (a Dask halt, told from elsewhere, is asked each second) and the job's line
    is its attempt that ran. ``b`` says the halt once ``a``'s first attempt has ended."""
    out, flag = tmp_path / "out", tmp_path / "halted"
    said = f"while ! grep -qs runner_exit {out}/a/events.jsonl; do sleep 0.01; done; touch {flag}"
    jobs = [{"id": "a", "args": ["sh", "-c", "exit 5"]}, {"id": "b", "args": ["sh", "-c", said]}]
    result = subprocess.run(
        [PY, "-c", HALTED_ELSEWHERE, out, flag, json.dumps(jobs)], capture_output=True, timeout=SAFETY_NET
    )
    assert result.returncode == 0, result.stderr
    lines = json.loads(result.stdout)
    assert lines["a"] == [5, 1, "halted by --halt-on-failure: the retry (attempt 2) was not started"]
    assert not (out / "a" / "attempt-1").exists()


# A batch whose first retry starts at once and whose next ones wait an hour, as two jobs' pauses
# overlap under one --retry-delay (the first to fail retries and fails for good while the other
# waits): each pause handed out is said by a file (argv[2] + its count).
HALTED_IN_A_PAUSE = """import json, sys
from processkit.batching.ci import RetryDelay
from processkit.batching.manifest import jobs_from
from processkit.batching.on_host import Settings, run_batch
out, said, jobs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
class FirstAtOnce(RetryDelay):
    __slots__ = ("given",)
    def before(self, attempt):
        self.given = getattr(self, "given", 0) + 1
        open(f"{said}{self.given}", "w").close()
        return 0 if self.given == 1 else 3_600_000
settings = Settings(out, 2, retries=1, halt_on_failure=True, retry_delay=FirstAtOnce(3_600_000, False))
lines, _ = run_batch(jobs_from(jobs), settings, signals=False)
print(json.dumps({line.id: [line.exit_code, line.attempts, line.message] for line in lines}))
"""


def test_the_halt_of_this_batch_ends_another_jobs_retry_delay(tmp_path):
    """A job's last failure halts the batch while another job waits out its ``--retry-delay``
    pause: the halt ends that pause (``on_host``'s wake of the paused jobs), so the batch ends
    now, not after the pause, and the paused job's line is its attempt that ran. ``b`` fails,
    its retry handed no pause; ``a`` fails once that is so, and its retry is handed the hour's;
    ``b``'s retry fails once that is so, the batch's one failure for good."""
    out, said = tmp_path / "out", tmp_path / "pause-"
    b_twice = f"if [ -e {tmp_path}/b-ran ]; then until [ -e {said}2 ]; do sleep 0.01; done; else touch {tmp_path}/b-ran; fi; exit 1"
    jobs = [
        {"id": "b", "args": ["sh", "-c", b_twice]},
        {"id": "a", "args": ["sh", "-c", f"until [ -e {said}1 ]; do sleep 0.01; done; exit 5"]},
    ]
    result = subprocess.run(
        [PY, "-c", HALTED_IN_A_PAUSE, out, said, json.dumps(jobs)], capture_output=True, timeout=SAFETY_NET
    )
    assert result.returncode == 0, result.stderr
    lines = json.loads(result.stdout)
    assert lines["b"][:2] == [1, 2]
    assert lines["a"] == [5, 1, "halted by --halt-on-failure: the retry (attempt 2) was not started"]
    assert not (out / "a" / "attempt-1").exists()


def test_an_earlier_attempts_stdout_is_in_its_junit_element(tmp_path):
    """A flaky job that said why on stdout (a pytest shard's ``FAILED`` line): its
    ``flakyFailure`` carried only the attempt's stderr, so the CI page showed nothing of the
    failure; a ``rerunFailure`` likewise. Each now has its attempt's ``system-out`` too. Its
    ``type`` is the attempt's ``source``, as the ``failure``'s is: it was the page's state
    (``failed``, ``timed_out``) beside a ``failure`` typed ``child_exit`` or ``timeout``."""
    flaky = "import os,sys\nif os.path.exists(sys.argv[1]): sys.exit(0)\nopen(sys.argv[1],'w').close()\nprint('FAILED t.py::x')\nsys.exit(1)"
    jobs = [
        {"id": "flaky", "args": [PY, "-c", flaky, str(tmp_path / "marker")]},
        {"id": "bad", "args": [PY, "-c", "print('FAILED t.py::y'); raise SystemExit(1)"]},
        {"id": "hangs", "args": ["sleep", "60"], "timeout": "100ms"},  # never ends: times out each time
    ]
    junit = tmp_path / "junit.xml"
    result = run_cli("batch", manifest(tmp_path, jobs), "--out", tmp_path / "out", "--retries", "1", "--junit", junit)
    assert result.returncode == BATCH_FAILED, result.stderr
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    (earlier,) = cases["flaky"].findall("flakyFailure")
    assert earlier.find("system-out").text == "FAILED t.py::x\n" and earlier.find("system-err") is None
    (earlier,) = cases["bad"].findall("rerunFailure")
    assert earlier.find("system-out").text == "FAILED t.py::y\n"
    for id, source in (("flaky", "child_exit"), ("bad", "child_exit"), ("hangs", "timeout")):
        reruns = cases[id].findall("flakyFailure") + cases[id].findall("rerunFailure")
        assert [rerun.get("type") for rerun in reruns] == [source], id
        assert cases[id].find("failure") is None or cases[id].find("failure").get("type") == source

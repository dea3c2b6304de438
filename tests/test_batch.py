"""``processkit-cli batch``: a manifest of jobs run by one process, each a full run.

Process-level: the real CLI, real children. Every job's stream is checked as ``run``'s would be
(tests/streams.py), every summary line against what the job did.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from processkit import rundir

from conftest import SAFETY_NET, cli_command, event_names, pid_alive, run_cli, start_cli, wait_for_event
from fifo_ends import opened_for_writing
from run_groups import groups_of
from streams import PY, check_stream, event_time, one, read_to_the_end, reference_summary

BATCH_FAILED, CANCELLED, USAGE = 117, 107, 100


@pytest.fixture
def start_batch():
    """``start_cli`` for a batch the test lets go of: one still running at the end (the test
    failed) is stopped, so its jobs do not outlive the test."""
    started = []

    def start(*args, **kwargs):
        started.append(start_cli("batch", *args, **kwargs))
        return started[-1]

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.communicate(timeout=SAFETY_NET)
            except subprocess.TimeoutExpired:  # a batch stuck where no signal ends it (a broken build)
                proc.kill()
                proc.communicate()


def write_manifest(path, jobs) -> str:
    path.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    return str(path)


def sleeping_batch(start, tmp_path, count: int, *options, **kwargs):
    """A batch (``start``: the ``start_batch`` fixture) of ``count`` jobs that sleep, two at a
    time: it and its --out, once the first two jobs have started."""
    jobs = [{"args": ["sleep", "30"], "id": f"s{n}"} for n in range(count)]
    out = tmp_path / "out"
    batch = start(write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out), "--jobs", "2", *options, **kwargs)
    for n in (0, 1):
        wait_for_event(out / f"s{n}" / "events.jsonl", "run_started")
    return batch, out


def summary(out) -> dict[str, dict]:
    lines = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    by_id = {line["id"]: line for line in lines}
    assert len(by_id) == len(lines), "one line per job"
    return by_id


def left_by(pid: int) -> list[str]:
    """Run directories and cgroups (those since the test began) a process with this pid made and
    left (a batch's directory may be in any of the bases)."""
    return [path for base in rundir.bases() for path in glob.glob(f"{base}/pkc-{pid}-*")] + groups_of(pid)


MIXED = [
    {"args": ["true"], "id": "zero"},
    {"args": ["sh", "-c", "echo out; echo err >&2; exit 3"], "id": "three"},
    {"args": ["sh", "-c", "kill -9 $$"], "id": "killed"},
    {"args": ["sleep", "30"], "id": "late", "timeout": 0.3, "grace": 0.1},
    {"args": ["/nonexistent/program"], "id": "nospawn"},
    # A shell, not Python: SIGTERM ignored within a millisecond of the start, well inside the idle
    # timeout (an interpreter's start-up could outlast 0.5 s on a loaded host, and the SIGTERM
    # would then end it before its handler existed: no escalation). ``sleep`` inherits the SIG_IGN.
    {
        "args": ["sh", "-c", "trap '' TERM; echo up; exec sleep 30"],
        "id": "stubborn",
        "idle_timeout": 0.5,
        "grace": 0.2,
    },
    {"args": [PY, "-c", "import sys; sys.stdout.buffer.write(b'x' * 3_000_000)"], "id": "flood"},
]


def test_a_templates_output_unshown_is_said_where_it_is_kept(tmp_path):
    """GNU parallel prints each job's output; ``batch`` keeps it in files: the closing line says
    where, and how to see it, when a job it names nowhere else printed something (human form
    only; not with ``--show-output``, which printed it, nor for jobs that printed nothing)."""
    out = tmp_path / "out"
    kept = f"batch: 2 of 2 jobs exited 0; each job's output is in {out}/<id>/capture/ (--show-output prints it)"
    said = run_cli("batch", "--out", out, "--", "echo", "{}", ":::", "a", "b")
    assert said.returncode == 0 and said.stdout == b"" and said.stderr.decode().splitlines()[-1] == kept
    shown = run_cli("batch", "--out", out, "--show-output", "--", "echo", "{}", ":::", "a", "b")
    assert shown.stderr.decode().splitlines()[-1] == "batch: 2 of 2 jobs exited 0", shown.stderr
    silent = run_cli("batch", "--out", out, "--", "true", "{}", ":::", "a", "b")
    assert silent.stderr.decode().splitlines()[-1] == "batch: 2 of 2 jobs exited 0", silent.stderr
    unkept = run_cli("batch", "--out", out, "--keep", "failed", "--", "echo", "{}", ":::", "a", "b")
    assert unkept.stderr.decode().splitlines()[-1] == "batch: 2 of 2 jobs exited 0", unkept.stderr


def test_a_mixed_manifest_reports_every_job_as_run_would(tmp_path):
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", MIXED), "--out", str(out), "--jobs", "3")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    assert proc.stdout == b"", "the children's output goes only to the capture files"
    kept = f"; each job's output is in {out}/<id>/capture/ (--show-output prints it)"  # flood's
    assert proc.stderr.decode().splitlines()[-1] == "batch: 2 of 7 jobs exited 0, 3 failed, 2 timed out" + kept
    lines = summary(out)
    expected = {"zero": 0, "three": 3, "killed": 137, "late": 106, "nospawn": 101, "stubborn": 106, "flood": 0}
    assert {key: line["exit_code"] for key, line in lines.items()} == expected
    for job in MIXED:
        line = lines[job["id"]]
        raw = b"\0".join(os.fsencode(arg) for arg in job["args"])
        assert line["args_sha256"] == hashlib.sha256(raw).hexdigest()
        assert line["attempts"] == 1
        events = check_stream(out / job["id"] / "events.jsonl", expected[job["id"]])
        if job["id"] == "nospawn":
            assert line["source"] == "spawn_error" and line["duration_ms"] is None
            continue
        started = one(events, "run_started")
        assert started["run_id"] == line["run_id"] and started["labels"]["batch"]
        captured = one(events, "output_captured")
        assert line["capture"] == {"stdout": captured["stdout"], "stderr": captured["stderr"]}
        for name in ("stdout", "stderr"):
            data = (out / job["id"] / "capture" / f"{name}.log").read_bytes()
            assert captured[name]["sha256"] == hashlib.sha256(data).hexdigest()
        # the stream's figures are the reference's; the line keeps the whole tree's, read at the
        # same point: the same group's IO and process count, at least the live members' CPU and
        # memory where the stream has them, and a CPU figure after a natural exit too
        figures = reference_summary(events, forced=line["source"] != "child_exit")
        resources = line["resources"]
        assert resources.keys() == figures.keys() - {"schema_version", "time", "event"}
        assert resources["read_error"] is False and resources["total_cpu_ms"] is not None, line
        for field in ("io_read_bytes", "io_write_bytes", "peak_process_count"):
            assert figures[field] is None or resources[field] == figures[field], (field, line, figures)
        assert figures["total_cpu_ms"] is None or resources["total_cpu_ms"] >= figures["total_cpu_ms"], line
        assert figures["peak_memory_bytes"] is None or resources["peak_memory_bytes"] is not None, line
    assert (out / "three" / "capture" / "stdout.log").read_bytes() == b"out\n"
    assert lines["flood"]["capture"]["stdout"]["bytes"] == 3_000_000
    assert lines["killed"]["child_code"] == 137 and lines["three"]["source"] == "child_exit"
    assert lines["late"]["source"] == "timeout" and lines["stubborn"]["source"] == "timeout"
    stubborn = check_stream(out / "stubborn" / "events.jsonl")
    assert one(stubborn, "cleanup_finished")["shutdown"]["escalated"] is True
    assert "index.html" in os.listdir(out)
    assert "zero" in (out / "index.html").read_text()


def test_a_job_may_choose_its_capture_cap_and_keep_the_tail(tmp_path):
    """The capture keywords go through as they would for ``run`` (the batch gives the directory):
    the file keeps the stream's last bytes, and its layout record is written beside it."""
    out = tmp_path / "out"
    job = {"args": ["seq", "1", "100000"], "id": "tail", "capture_max_bytes": 1024, "capture_keep": "tail"}
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", [job]), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    check_stream(out / "tail" / "events.jsonl", 0)
    kept = (out / "tail" / "capture" / "stdout.log").read_bytes()
    assert len(kept) == 1024 and kept.endswith(b"99999\n100000\n")
    assert (out / "tail" / "capture" / "capture-keep.json").is_file()


# A job of six that marks its start and end in a shared log, and ends only once the job after it
# has started (the last one at once): so two jobs are always seen together whatever the host's
# speed, and a job that never gets a neighbour (the batch running one at a time) exits 3 after
# 45 s instead of passing by luck. The 0.2 s it then stays cannot make a batch that keeps the
# bound fail (the log's order is exact); it gives a third job a batch let start beside the two
# the time to show up in the log.
CHAINED = """
import os, sys, time
log, me, total = sys.argv[1], sys.argv[2], 6
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(fd, f"+{me}\\n".encode())
def started():
    return [line[1:] for line in open(log).read().split() if line[0] == "+"]
position = started().index(me) + 1
deadline = time.monotonic() + 45
while position < total and len(started()) <= position:
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.005)
time.sleep(0.2)
os.write(fd, f"-{me}\\n".encode())
"""


def test_jobs_bounds_how_many_run_at_once(tmp_path):
    log = tmp_path / "log"
    jobs = [{"args": [PY, "-c", CHAINED, str(log), f"j{n}"], "id": f"j{n}"} for n in range(6)]
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(tmp_path / "out"), "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    level = peak = 0
    for mark in log.read_text().split():  # appended whole (O_APPEND), in the order they happened
        level += 1 if mark[0] == "+" else -1
        peak = max(peak, level)
    assert peak == 2


def test_a_job_whose_stdin_fifo_has_no_writer_holds_up_no_other_job(tmp_path, start_batch):
    """The FIFO's open would block the batch's one thread. ``fed``'s FIFO gets its writer only
    once ``free`` has ended (the test waits for free's ``runner_exit``, not for a time): free
    ran while fed waited, and fed then gets its bytes. ``unfed``'s FIFO never gets one: it ends
    at its own timeout."""
    fifo, never = tmp_path / "fifo", tmp_path / "never"
    os.mkfifo(fifo)
    os.mkfifo(never)
    jobs = [
        {"args": ["cat"], "id": "fed", "stdin_file": str(fifo)},
        {"args": ["cat"], "id": "unfed", "stdin_file": str(never), "timeout": "1s"},
        {"args": ["true"], "id": "free"},
    ]
    out = tmp_path / "out"
    batch = start_batch(write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, "--jobs", "3")
    wait_for_event(out / "free" / "events.jsonl", "runner_exit", timeout=120)
    assert "runner_exit" not in event_names(out / "fed" / "events.jsonl"), "fed ended before its writer came"
    with open(opened_for_writing(fifo, what="fed's open of its FIFO"), "wb") as writer:
        writer.write(b"late\n")
    _, stderr = batch.communicate(timeout=120)
    assert batch.returncode == BATCH_FAILED, stderr
    lines = summary(out)
    assert (lines["unfed"]["exit_code"], lines["unfed"]["source"]) == (106, "timeout")
    assert (lines["free"]["exit_code"], lines["fed"]["exit_code"]) == (0, 0)
    assert (out / "fed" / "capture" / "stdout.log").read_bytes() == b"late\n"
    for job in ("free", "fed"):
        check_stream(out / job / "events.jsonl", 0)


def test_a_job_that_fails_before_its_child_runs_says_why_in_its_line_and_on_stderr(tmp_path):
    """No stream or capture holds a setup or spawn failure's reason: the summary line does, and
    the job's stderr line, as ``run`` would have printed it."""
    jobs = [
        {"args": ["cat"], "id": "nostdin", "stdin_file": str(tmp_path / "absent")},
        {"args": [str(tmp_path / "no-such-program")], "id": "noprog"},
        {"args": ["sh", "-c", "exit 3"], "id": "three"},
    ]
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out)
    assert proc.returncode == BATCH_FAILED, proc.stderr
    lines = summary(out)
    assert (lines["nostdin"]["exit_code"], lines["nostdin"]["message"]) == (
        111,
        f"could not open stdin file `{tmp_path / 'absent'}`: No such file or directory (os error 2)",
    )
    assert lines["noprog"]["exit_code"] == 101 and "no-such-program" in lines["noprog"]["message"]
    assert lines["three"]["message"] is None, "a child's own exit needs no words"
    err = proc.stderr.decode()
    assert f"batch: nostdin: exit 111: {lines['nostdin']['message']}\n" in err
    assert f"batch: noprog: exit 101: {lines['noprog']['message']}\n" in err
    assert "batch: three: exit 3 in " in err


def test_a_summary_that_is_a_link_is_refused_and_not_followed(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.jsonl").symlink_to(tmp_path / "victim")
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", [{"args": ["true"]}]), "--out", out)
    assert proc.returncode == 111, proc.stderr
    assert (
        proc.stderr
        == f"processkit-cli: cannot write the summary {out / 'summary.jsonl'}: it is a symbolic link, and a link is never followed\n".encode()
    )
    assert not (tmp_path / "victim").exists()


def test_more_jobs_at_once_than_the_open_file_limit_allows_wait_instead_of_failing(tmp_path):
    """Each job in flight holds a dozen descriptors: under ``ulimit -n 160`` forty at once
    would fail to spawn (EMFILE) past the first few. The batch runs fewer at a time, says so
    once, and every job runs."""
    import resource

    jobs = [{"args": ["sleep", "0.2"], "id": f"j{n}"} for n in range(40)]
    out = tmp_path / "out"

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))

    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    proc = run_cli("batch", manifest, "--out", out, "--jobs", "40", preexec_fn=low_limit)
    assert proc.returncode == 0, proc.stderr
    assert b"40 jobs at once would need more open files than this process may have (ulimit -n: 160)" in proc.stderr
    assert all(line["exit_code"] == 0 for line in summary(out).values()) and len(summary(out)) == 40


def test_retries_run_a_failed_job_again_and_count_attempts(tmp_path):
    marker = tmp_path / "second-time"
    code = "import os, sys; p = sys.argv[1]; ok = os.path.exists(p); open(p, 'w').close(); sys.exit(0 if ok else 5)"
    jobs = [{"args": [PY, "-c", code, str(marker)], "id": "flaky"}, {"args": ["false"], "id": "bad"}]
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out), "--retries", "2")
    assert proc.returncode == BATCH_FAILED
    lines = summary(out)
    assert (lines["flaky"]["exit_code"], lines["flaky"]["attempts"]) == (0, 2)
    assert (lines["bad"]["exit_code"], lines["bad"]["attempts"]) == (1, 3)


def test_retries_keep_every_attempts_stream_and_capture(tmp_path):
    jobs = [
        {
            "args": [
                "sh",
                "-c",
                f"n=$(ls {tmp_path}/tries | wc -l); touch {tmp_path}/tries/$n; echo attempt$n >&2; exit $((n < 2 ? 4 : 0))",
            ],
            "id": "flaky",
        }
    ]
    (tmp_path / "tries").mkdir()
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out), "--retries", "2")
    assert proc.returncode == 0, proc.stderr
    line = summary(out)["flaky"]
    assert (line["exit_code"], line["attempts"]) == (0, 3)
    assert [(a["attempt"], a["dir"], a["exit_code"]) for a in line["earlier_attempts"]] == [
        (1, "attempt-1", 4),
        (2, "attempt-2", 4),
    ]
    for n in (1, 2):
        kept = out / "flaky" / f"attempt-{n}"
        events = check_stream(kept / "events.jsonl", 4)
        assert one(events, "run_started")["run_id"] == line["earlier_attempts"][n - 1]["run_id"]
        assert (kept / "capture" / "stderr.log").read_text() == f"attempt{n - 1}\n"
    assert (out / "flaky" / "capture" / "stderr.log").read_text() == "attempt2\n"
    check_stream(out / "flaky" / "events.jsonl", 0)


def test_halt_on_failure_starts_nothing_after_the_first_failure(tmp_path):
    jobs = [{"args": ["false"], "id": "first"}] + [{"args": ["true"], "id": f"later{n}"} for n in range(3)]
    out = tmp_path / "out"
    proc = run_cli(
        "batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out), "--jobs", "1", "--halt-on-failure"
    )
    assert proc.returncode == BATCH_FAILED
    lines = summary(out)
    assert lines["first"]["exit_code"] == 1
    assert all(lines[f"later{n}"]["source"] == "halted" and lines[f"later{n}"]["exit_code"] is None for n in range(3))
    assert not (out / "later0").exists()
    # the closing line says why they never started, as it names a stop (``cancelled by ...``);
    # it said only ``3 not started``, where parallel says it is starting no more jobs
    assert proc.stderr.decode().splitlines()[-1] == (
        "batch: 0 of 4 jobs exited 0, 1 failed, 3 not started, halted by --halt-on-failure"
    )


def test_resume_runs_only_what_did_not_exit_0(tmp_path):
    needed = tmp_path / "needed"
    jobs = [{"args": ["true"], "id": "fine"}, {"args": ["test", "-e", str(needed)], "id": "needs"}]
    manifest, out = write_manifest(tmp_path / "m.jsonl", jobs), tmp_path / "out"
    assert run_cli("batch", manifest, "--out", str(out)).returncode == BATCH_FAILED
    first_stream = (out / "fine" / "events.jsonl").read_bytes()
    needed.touch()
    proc = run_cli("batch", manifest, "--out", str(out), "--resume")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    ran = [(line["id"], line["exit_code"]) for line in lines]
    # the first batch's two jobs run side by side, and lines come in finishing order
    assert sorted(ran[:2]) == [("fine", 0), ("needs", 1)] and ran[2:] == [("needs", 0)]
    assert (out / "fine" / "events.jsonl").read_bytes() == first_stream, "a job that exited 0 is not run again"


def test_a_resumed_batch_counts_the_jobs_it_ran_apart_from_those_that_passed_before(tmp_path):
    """The closing line read ``0 of 4 jobs exited 0 ... 2 skipped (--resume)`` after a resume in
    which every job run passed: it counts the jobs this batch was to run, the skipped apart."""
    first, second = tmp_path / "first", tmp_path / "second"
    jobs = [{"args": ["true"], "id": "a"}, {"args": ["true"], "id": "b"}]
    jobs += [{"args": ["test", "-e", str(flag)], "id": flag.name} for flag in (first, second)]
    manifest, out = write_manifest(tmp_path / "m.jsonl", jobs), tmp_path / "out"
    proc = run_cli("batch", manifest, "--out", out)
    assert proc.returncode == BATCH_FAILED
    assert proc.stderr.decode().splitlines()[-1] == "batch: 2 of 4 jobs exited 0, 2 failed"
    first.touch()
    proc = run_cli("batch", manifest, "--out", out, "--resume")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    said = "batch: 1 of 2 jobs to run exited 0, 1 failed, 2 skipped (--resume: passed before)"
    assert proc.stderr.decode().splitlines()[-1] == said
    second.touch()
    proc = run_cli("batch", manifest, "--out", out, "--resume")
    assert proc.returncode == 0, proc.stderr
    said = "batch: 1 of 1 job to run exited 0, 3 skipped (--resume: passed before)"
    assert proc.stderr.decode().splitlines()[-1] == said
    proc = run_cli("batch", manifest, "--out", out, "--resume")  # every job passed before
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode().splitlines()[-1] == "batch: no job to run: 4 skipped (--resume: passed before)"
    ran = [(line["id"], line["exit_code"]) for line in summary_lines(out)]
    assert sorted(ran[:4]) == [("a", 0), ("b", 0), ("first", 1), ("second", 1)]
    assert sorted(ran[4:6]) == [("first", 0), ("second", 1)] and ran[6:] == [("second", 0)]


def test_resume_runs_again_a_job_whose_command_env_or_cwd_changed(tmp_path):
    jobs = [
        {"args": ["true"], "id": "same"},
        {"args": ["true"], "id": "env", "env": {"MODE": "a"}},
        {"args": ["true"], "id": "cmd"},
        {"args": ["pwd"], "id": "cwd", "cwd": str(tmp_path)},
    ]
    out = tmp_path / "out"
    assert run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out).returncode == 0
    first = {line["id"]: line for line in summary_lines(out)}
    assert len({line["job_sha256"] for line in first.values()}) == 4
    jobs[1]["env"] = {"MODE": "b"}
    jobs[2]["args"] = ["true", "--again"]
    jobs[3]["cwd"] = "/"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, "--resume")
    assert proc.returncode == 0, proc.stderr
    rerun = [line["id"] for line in summary_lines(out)[4:]]
    # jobs run side by side (one per CPU), and lines come in finishing order
    assert sorted(rerun) == ["cmd", "cwd", "env"]
    err = proc.stderr.decode()
    for job_id in rerun:
        assert f"{job_id}: the job changed since it exited 0 (job_sha256 {first[job_id]['job_sha256']} is now" in err
    assert "same:" not in err


def summary_lines(out) -> list[dict]:
    return [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]


def test_a_stop_signal_cancels_the_running_jobs_and_starts_no_more(tmp_path, start_batch):
    batch, out = sleeping_batch(start_batch, tmp_path, 5, stderr=subprocess.PIPE)
    batch.send_signal(signal.SIGTERM)
    _, err = batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == CANCELLED, err
    lines = summary(out)
    for n in (0, 1):
        events = check_stream(out / f"s{n}" / "events.jsonl", CANCELLED)
        assert one(events, "cancelled")["source"] == "sigterm"
        assert lines[f"s{n}"]["exit_code"] == CANCELLED
    assert all(lines[f"s{n}"]["source"] == "cancelled" and lines[f"s{n}"]["exit_code"] is None for n in (2, 3, 4))
    assert "cancelled by SIGTERM" in err.decode().splitlines()[-1]
    assert left_by(batch.pid) == []


def test_ctrl_c_cancels_the_jobs_then_the_batch_dies_by_sigint(tmp_path, start_batch):
    """A shell loop stops at Ctrl-C only when its command died by SIGINT (130): the batch
    cancels and releases every job first, its summary says cancelled, then it dies so."""
    batch, out = sleeping_batch(start_batch, tmp_path, 3, stderr=subprocess.PIPE)
    batch.send_signal(signal.SIGINT)
    _, err = batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == -signal.SIGINT, err
    lines = summary(out)
    for n in (0, 1):
        assert one(check_stream(out / f"s{n}" / "events.jsonl", CANCELLED), "cancelled")["source"] == "ctrl_c"
        assert lines[f"s{n}"]["exit_code"] == CANCELLED
    assert lines["s2"]["source"] == "cancelled"
    assert "cancelled by Ctrl-C" in err.decode().splitlines()[-1]
    assert left_by(batch.pid) == []
    # As a terminal's Ctrl-C: SIGINT to the whole foreground group, the shell looping included.
    manifest = write_manifest(tmp_path / "loop.jsonl", [{"args": ["sleep", "30"], "id": "looped"}])
    loop = 'for i in 1 2; do "$@"; echo "after $?"; done'
    shell = subprocess.Popen(
        ["bash", "-c", loop, "loop", *cli_command(), "batch", manifest, "--out", str(tmp_path / "o2")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_event(tmp_path / "o2" / "looped" / "events.jsonl", "run_started")
        os.killpg(shell.pid, signal.SIGINT)
        said, _ = shell.communicate(timeout=SAFETY_NET)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
    assert b"after" not in said, said  # the shell took the SIGINT death as a reason to stop


def test_list_shows_a_live_job_and_cancel_ends_only_that_one(tmp_path, start_batch):
    release = tmp_path / "release"
    waiter = [PY, "-c", "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)", str(release)]
    jobs = [{"args": waiter, "id": "victim", "run_id": "batch-victim"}, {"args": waiter, "id": "bystander"}]
    out = tmp_path / "out"
    batch = start_batch(
        write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out), "--jobs", "2", stderr=subprocess.PIPE
    )
    for name in ("victim", "bystander"):
        wait_for_event(out / name / "events.jsonl", "run_started")
    listed = run_cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    runs = {run["run_id"]: run for run in map(json.loads, listed.stdout.splitlines())}
    assert "batch-victim" in runs and runs["batch-victim"]["labels"]["batch"]
    assert run_cli("inspect", "--run-id", "batch-victim").returncode == 0
    assert run_cli("cancel", "--run-id", "batch-victim").returncode == 0
    wait_for_event(out / "victim" / "events.jsonl", "runner_exit")
    assert "runner_exit" not in (out / "bystander" / "events.jsonl").read_text()
    release.touch()
    _, err = batch.communicate(timeout=SAFETY_NET)
    assert batch.returncode == BATCH_FAILED, err
    lines = summary(out)
    assert (lines["victim"]["exit_code"], lines["victim"]["source"]) == (108, "control_cancel")
    assert lines["bystander"]["exit_code"] == 0


@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"args": ["true"]}', "not json"], "manifest line 2: not JSON"),
        (['{"args": ["true"], "id": "../escape"}'], "manifest line 1: 'id'"),
        (['{"args": ["true"], "id": "a"}', '{"args": ["true"], "id": "a"}'], "manifest line 2: duplicate id 'a'"),
        (['{"args": ["true"], "timeout": "soon"}'], "manifest line 1: invalid value"),
        (['{"args": "true"}'], "manifest line 1: args must be a list"),
        (['{"args": ["true"], "jsonl": "/tmp/x"}'], "manifest line 1: 'jsonl' is not a job keyword"),
        (['{"args": ["true"], "bogus": 1}'], "manifest line 1: got an unexpected keyword argument 'bogus'"),
        (["[1, 2]"], "manifest line 1: a job is a JSON object"),
        (['{"args": ["true", "\\ud800"]}'], "manifest line 1: args item 1 holds a lone surrogate"),
        (['{"args": ["true", "a\\u0000b"]}'], "manifest line 1: args item 1 holds a NUL character (at offset 1)"),
        (
            ['{"args": ["true"]}', '{"args": ["true"], "id": "summary.jsonl"}'],
            "manifest line 2: the id 'summary.jsonl' is reserved",
        ),
        (['{"args": ["true"], "id": "index.html"}'], "manifest line 1: the id 'index.html' is reserved"),
        (
            ['{"args": ["true"]}', '{"args": ["true"], "args": ["false"]}'],
            "manifest line 2: the key 'args' is given twice",
        ),
        (['{"args": ["true"], "env": {"A": "1", "A": "2"}}'], "manifest line 1: the key 'A' is given twice"),
        (
            ['{"args": ["true"], "x": ' + "[" * 100_000 + "]" * 100_000 + "}"],
            "manifest line 1: arrays and objects are nested more than 64 deep",
        ),
        (
            ['{"args": ["true"], "env": {"A=B": "c"}}'],
            "manifest line 1: invalid value for 'env': an environment key may not contain control characters or '='",
        ),
        (
            ['{"args": ["true"], "run_id": "r"}', '{"args": ["true"]}', '{"args": ["true"], "run_id": "r"}'],
            "manifest line 3: duplicate run_id 'r' (first on line 1)",
        ),
    ],
)
def test_a_bad_manifest_is_refused_before_anything_starts(tmp_path, lines, message):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    proc = run_cli("batch", str(manifest), "--out", str(out))
    assert proc.returncode == USAGE, proc.stderr
    assert message in proc.stderr.decode(), proc.stderr
    assert not out.exists()


def test_an_empty_manifest_is_no_jobs_and_no_failure(tmp_path):
    """Nothing is made, nor written into an ``--out`` that is a directory of the user's own (one
    holding no batch's summary)."""
    (tmp_path / "empty.jsonl").write_text("\n\n")
    proc = run_cli("batch", tmp_path / "empty.jsonl", "--out", tmp_path / "out")
    assert (proc.returncode, proc.stderr) == (0, b"batch: no jobs in the manifest\n")
    assert not (tmp_path / "out").exists()
    own = tmp_path / "mine"
    own.mkdir()
    (own / "notes.txt").write_text("mine\n")
    proc = run_cli("batch", tmp_path / "empty.jsonl", "--out", own)
    assert (proc.returncode, proc.stderr) == (0, b"batch: no jobs in the manifest\n")
    assert sorted(path.name for path in own.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("given", ["--junit", "--trace", "--out"])
def test_an_empty_batch_leaves_no_earlier_report_to_pass_for_its_own(tmp_path, given):
    """A CI step whose manifest came out empty (no test changed) exited 0 having made nothing: the
    JUnit, trace and summary an earlier batch left (here with a failure) were read as this run's.
    With a ``--junit``, a ``--trace`` or an ``--out`` holding a summary it now writes them empty,
    as an empty share does."""
    out, report = tmp_path / "out", tmp_path / "report"
    (tmp_path / "fails.jsonl").write_text('{"id": "fails", "args": ["false"]}\n')
    (tmp_path / "empty.jsonl").write_text("")
    flag = "--trace" if given == "--trace" else "--junit"
    earlier = run_cli("batch", tmp_path / "fails.jsonl", "--out", out, flag, report)
    assert earlier.returncode == BATCH_FAILED, earlier.stderr
    assert "fails" in report.read_text()
    reports = [] if given == "--out" else [given, report]
    proc = run_cli("batch", tmp_path / "empty.jsonl", "--out", out, *reports)
    assert proc.returncode == 0 and b"batch: no jobs in the manifest; wrote an empty summary" in proc.stderr
    said = proc.stderr.decode().splitlines()  # the earlier failure's directory, left as it was, named above
    assert len(said) == 2 and said[0].endswith("did not (fails): its files are not this batch's"), said
    assert (out / "summary.jsonl").read_text() == ""
    assert "fails" not in (out / "index.html").read_text()
    if given != "--out":
        assert "fails" not in report.read_text()
    if given == "--junit":
        assert 'tests="0" failures="0"' in report.read_text()


def test_a_missing_manifest_is_a_setup_error_as_the_docs_say(tmp_path):
    proc = run_cli("batch", tmp_path / "absent.jsonl")
    assert proc.returncode == 111 and b"cannot read the manifest" in proc.stderr
    docs = (Path(__file__).parents[1] / "docs" / "batch.md").read_text()
    assert "111 when the manifest cannot be read" in docs


def test_help_shows_every_default(tmp_path):
    text = run_cli("batch", "--help").stdout.decode()
    assert "default: batch-out" in text and "default: 0" in text and "default: the CPUs" in text
    assert "N+1 in all" in text


def test_a_manifest_line_that_is_not_utf8_is_refused(tmp_path):
    """JSON given as bytes would be guessed at (UTF-16 from a BOM): a manifest is UTF-8."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(b'{"args": ["true"]}\n' + '{"args": ["true"]}'.encode("utf-16") + b"\n")
    out = tmp_path / "out"
    proc = run_cli("batch", str(manifest), "--out", str(out))
    assert proc.returncode == USAGE and b"manifest line 2: not UTF-8 (byte 1)" in proc.stderr, proc.stderr
    assert not out.exists()


def test_an_env_file_that_is_a_fifo_is_refused_before_anything_starts(tmp_path):
    """The batch reads a job's env file in its one thread: a FIFO would hold up every job."""
    fifo = tmp_path / "env.fifo"
    os.mkfifo(fifo)
    jobs = [{"args": ["true"]}, {"args": ["env"], "env_file": [str(fifo)]}]
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out)
    assert proc.returncode == USAGE, proc.stderr
    assert f"manifest line 2: env_file {fifo} is a FIFO, not a regular file or /dev/null".encode() in proc.stderr
    assert not out.exists()


def test_an_overlong_manifest_line_is_refused(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(b'{"args": ["true"], "id": "' + b"a" * (2 * 1024 * 1024) + b'"}\n')
    proc = run_cli("batch", str(manifest), "--out", str(tmp_path / "out"))
    assert proc.returncode == USAGE and b"manifest line 1 is longer than" in proc.stderr


def test_an_out_directory_another_user_could_write_is_refused(tmp_path):
    out = tmp_path / "shared"
    out.mkdir()
    out.chmod(0o777)
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", [{"args": ["true"]}]), "--out", str(out))
    assert proc.returncode == 111 and b"others may write to it" in proc.stderr
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", [{"args": ["true"]}]), "--out", str(link))
    assert proc.returncode == 111 and b"a link is never followed" in proc.stderr


def test_a_job_directory_left_writable_by_others_is_refused_and_a_new_one_is_writable_by_none(tmp_path):
    """A job directory the batch makes is writable by the caller alone (0755 under the umask: the
    batch skips checking what it has just made); one already in a reused ``--out`` is checked
    before the job writes there (a writable one fails that job, 111, and the batch goes on)."""
    out = tmp_path / "out"
    (out / "open").mkdir(parents=True)
    (out / "open").chmod(0o777)
    jobs = [{"args": ["true"], "id": "open"}, {"args": ["true"], "id": "fresh"}]
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out)
    lines = summary(out)
    assert proc.returncode == 117, proc.stderr
    assert lines["open"]["exit_code"] == 111 and "others may write to it" in lines["open"]["message"]
    assert lines["fresh"]["exit_code"] == 0
    assert (out / "fresh").stat().st_mode & 0o777 == 0o755 & ~os.umask(os.umask(0))
    assert not (out / "open" / "events.jsonl").exists()


def test_the_manifest_may_come_on_stdin_and_show_output_prints_blocks(tmp_path):
    """Each job's block starts with a header naming it; its stderr goes to stderr, after the
    job's own line there."""
    jobs = [{"args": ["sh", "-c", f"echo one{n}; echo two{n}; echo err{n} >&2"], "id": f"j{n}"} for n in range(4)]
    data = "".join(json.dumps(job) + "\n" for job in jobs).encode()
    proc = run_cli("batch", "-", "--out", str(tmp_path / "out"), "--show-output", "--jobs", "2", stdin=None, input=data)
    assert proc.returncode == 0, proc.stderr
    blocks = proc.stdout.decode().splitlines()
    triples = list(zip(blocks[::3], blocks[1::3], blocks[2::3]))
    assert sorted(triples) == [(f"==> j{n} (exit 0) <==", f"one{n}", f"two{n}") for n in range(4)]
    err = proc.stderr.decode().splitlines()
    for n in range(4):
        assert err[err.index(f"err{n}") - 1].startswith(f"batch: j{n}: exit 0")
    assert "err" not in proc.stdout.decode()


def test_the_end_names_every_failed_job_with_its_stderr_and_last_lines(tmp_path):
    compile_error = "echo 'cc -c broken.c' >&2; for i in 1 2 3 4 5 6 7; do echo noise$i >&2; done; echo 'broken.c:3: error: expected ;' >&2; exit 1"
    jobs = [
        {"args": ["true"], "id": "fine"},
        {"args": ["sh", "-c", compile_error], "id": "broken"},
        {"args": ["/nonexistent/cc"], "id": "missing"},
    ]
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out), "--jobs", "1")
    assert proc.returncode == BATCH_FAILED
    err = proc.stderr.decode().splitlines()
    block = err[err.index("batch: 2 jobs failed:") :]
    # its first lines (the command) and its last 5 are all of its 9: shown whole, said so by no words
    assert block[1:3] == ["  broken: exit 1", f"    stderr: {out / 'broken' / 'capture' / 'stderr.log'}"]
    assert block[3:12] == [
        "    | cc -c broken.c",
        "    | noise1",
        "    | noise2",
        "    | noise3",
        "    | noise4",
        "    | noise5",
        "    | noise6",
        "    | noise7",
        "    | broken.c:3: error: expected ;",
    ]
    assert block[12].startswith("  missing: exit 101 (spawn_error)") and "nonexistent" in block[13]
    assert block[-1].startswith("batch: 1 of 3 jobs exited 0")


def test_show_output_copies_a_large_capture_without_holding_it(tmp_path):
    """A job may raise its capture cap far; --show-output then prints 96 MiB, byte for byte, and the
    batch process's peak memory stays far below that (it copies a chunk at a time)."""
    size = 96 << 20
    jobs = [{"args": ["head", "-c", str(size), "/dev/urandom"], "id": "big", "capture_max_bytes": "1g"}]
    # VmHWM, not ru_maxrss: at exec the kernel folds the old memory's peak into ru_maxrss, and a
    # child spawned by vfork had the test process's (the whole suite's pytest, past 100 MiB).
    code = (
        "import sys; from processkit.cli.main import main; rc = main(sys.argv[1:]);"
        "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')), file=sys.stderr);"
        "sys.exit(rc)"
    )
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", jobs)
    proc = subprocess.run(
        [PY, "-c", code, "batch", manifest, "--out", str(out), "--show-output"], capture_output=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    header = b"==> big (exit 0) <==\n"
    shown = proc.stdout
    captured = (out / "big" / "capture" / "stdout.log").read_bytes()
    assert len(captured) == size
    ends_a_line = b"" if captured.endswith(b"\n") else b"\n"  # random bytes end with one 1 time in 256
    assert shown.startswith(header) and len(shown) == len(header) + size + len(ends_a_line)
    assert shown == header + captured + ends_a_line  # the block ends a line
    peak_mib = int(proc.stderr.decode().splitlines()[-1]) / 1024
    assert peak_mib < 64, f"the batch held the capture: peak {peak_mib:.0f} MiB"


def test_a_sigkilled_batch_leaves_nothing_prune_cannot_end(tmp_path, start_batch, monkeypatch):
    runtime = tmp_path / "runtime"  # the batch's directory where no other worker's prune looks first
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    batch, out = sleeping_batch(start_batch, tmp_path, 3)
    roots = [one(check_stream_prefix(out / f"s{n}" / "events.jsonl"), "run_started")["root_pid"] for n in (0, 1)]
    batch.kill()
    batch.communicate(timeout=SAFETY_NET)
    assert left_by(batch.pid), "the killed batch left its jobs' run directories: the test shows nothing"
    proc = run_cli("prune", "--json")
    assert proc.returncode == 0, proc.stderr
    assert left_by(batch.pid) == []
    assert not any(pid_alive(pid) for pid in roots)


def check_stream_prefix(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_one_jobs_grace_period_never_holds_up_the_others(tmp_path):
    """A job that ignores SIGTERM spends its whole grace in teardown; the jobs beside it (which
    wait for that SIGTERM to have come) run and finish within that grace. A teardown that held
    the loop would keep each of them waiting until the grace was over."""
    termed = tmp_path / "termed"
    # A shell, not Python: its trap is set within a millisecond of the start, well inside the idle
    # timeout even on a loaded machine (an interpreter's start-up could outlast 0.3 s there, and
    # the SIGTERM would then kill it before its handler existed). The group's SIGTERM ends each
    # `sleep`; the trap marks it and the loop goes on, so the job lasts its whole grace.
    stubborn = ["sh", "-c", "trap 'touch \"$0\"' TERM; echo up; while :; do sleep 0.05; done", str(termed)]
    waiter = [PY, "-c", "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)", str(termed)]
    jobs = [{"args": stubborn, "id": "stubborn", "idle_timeout": 1, "grace": 5}]
    jobs += [{"args": waiter, "id": f"quick{n}"} for n in range(6)]
    out = tmp_path / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(out), "--jobs", "2")
    assert proc.returncode == BATCH_FAILED, proc.stderr
    events = check_stream(out / "stubborn" / "events.jsonl", 106)
    shutdown = one(events, "cleanup_finished")["shutdown"]
    assert shutdown["escalated"] is True
    # An order: each quick job ended inside the other's grace. The 5 s of grace is the margin: the
    # six quick jobs, one after another in the one free slot, take a fraction of it even on a
    # loaded host, while a loop held by the teardown would end none of them before it is over.
    grace_over = event_time(one(events, "cleanup_started")) + shutdown["elapsed_ms"] / 1000
    for n in range(6):
        ended = one(check_stream(out / f"quick{n}" / "events.jsonl", 0), "runner_exit")
        assert event_time(ended) < grace_over, f"quick{n} waited for the other job's grace"


def on_a_terminal(tmp_path, jobs, *flags) -> str:
    """What a batch of ``jobs`` wrote to its stderr, a terminal, once it exited 0."""
    return batch_on_a_terminal(write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(tmp_path / "out"), *flags)


def batch_on_a_terminal(*args, exit_code: int = 0) -> str:
    """What ``batch ARGS`` wrote to its stderr, a terminal, once it exited ``exit_code``."""
    proc, controller = start_on_a_terminal(*args)
    data = read_to_the_end(controller)
    os.close(controller)
    assert proc.wait(timeout=SAFETY_NET) == exit_code, data
    return data.decode()


def start_on_a_terminal(*args, stdin=subprocess.DEVNULL, cwd=None) -> tuple[subprocess.Popen, int]:
    """``batch ARGS`` started with its stderr a terminal: the process and the terminal's master."""
    import pty

    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [*cli_command(), "batch", *args], stdin=stdin, stdout=subprocess.DEVNULL, stderr=terminal, cwd=cwd
    )
    os.close(terminal)
    return proc, controller


def test_on_a_terminal_stderr_gets_a_progress_bar_below_the_job_lines(tmp_path):
    text = on_a_terminal(tmp_path, [{"args": ["true"], "id": f"j{n}"} for n in range(3)], "--jobs", "1")
    assert "[" + "#" * 30 + "] 3/3: 3 exited 0, 0 failed, ETA 0s" in text
    assert "\r\x1b[Kbatch: 3 of 3 jobs exited 0" in text


def test_a_dumb_terminal_gets_the_job_lines_and_no_bar(tmp_path, monkeypatch):
    # TERM=dumb (an editor's shell buffer) shows a cursor move or an erase as text
    monkeypatch.setenv("TERM", "dumb")
    text = on_a_terminal(tmp_path, [{"args": ["true"], "id": f"j{n}"} for n in range(3)], "--jobs", "1")
    assert "batch: j2: exit 0" in text and "batch: 3 of 3 jobs exited 0" in text
    assert "\x1b" not in text and "] 3/3:" not in text


def test_a_templates_bar_counts_its_jobs_from_its_arguments(tmp_path):
    # ``::: a b c`` names every job from the start: the bar said 1/? with no ETA to the end
    text = batch_on_a_terminal("--out", tmp_path / "out", "--jobs", "1", "--", "true", ":::", "a", "b", "c")
    assert (
        "] 0/3: 0 exited 0, 0 failed, ETA" in text
        and "] 3/3: 3 exited 0, 0 failed, ETA 0s" in text
        and "/?" not in text
    )


def test_off_a_terminal_nothing_is_animated(tmp_path):
    jobs = [{"args": ["true"], "id": f"j{n}"} for n in range(3)]
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", str(tmp_path / "out"))
    lines = proc.stderr.decode().splitlines()
    assert b"\r" not in proc.stderr and b"\x1b" not in proc.stderr
    assert len(lines) == 4 and all(line.startswith("batch: j") and ": exit 0 in " in line for line in lines[:3])
    assert lines[3] == "batch: 3 of 3 jobs exited 0"


def test_an_out_directory_inside_one_others_can_change_is_refused(tmp_path):
    """``--out`` is this user's own only when no one else can rename or replace what leads to it:
    a directory others may write (without the sticky bit) on its path is refused before any job."""
    shared = tmp_path / "open"
    shared.mkdir()
    shared.chmod(0o777)
    out = shared / "out"
    proc = run_cli("batch", write_manifest(tmp_path / "m.jsonl", [{"args": ["true"]}]), "--out", str(out))
    assert proc.returncode == 111 and b"other users can write" in proc.stderr, proc.stderr
    assert not out.exists()


def _directory_flags(path) -> int | None:
    """The inode flags of ``path`` (``lsattr``'s), or None where the file system has none."""
    import fcntl
    import struct

    from processkit.batching.outdir import _GET_FLAGS

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = bytearray(struct.calcsize("l"))
        fcntl.ioctl(fd, _GET_FLAGS, flags)
        return struct.unpack_from("i", flags)[0]
    except OSError:
        return None
    finally:
        os.close(fd)


def test_an_empty_out_is_marked_a_top_directory_and_a_used_one_left_alone(tmp_path):
    from processkit.batching.outdir import TOPDIR_FLAG

    if _directory_flags(tmp_path) is None:
        pytest.skip("the temp directory's file system keeps no inode flags")
    manifest = write_manifest(tmp_path / "m.jsonl", [{"args": ["true"]}])
    fresh, empty, used = tmp_path / "fresh", tmp_path / "empty", tmp_path / "used"
    empty.mkdir()
    used.mkdir()
    (used / "notes.txt").write_text("the user's\n")
    for out in (fresh, empty, used):
        proc = run_cli("batch", manifest, "--out", str(out))
        assert proc.returncode == 0, proc.stderr
    assert _directory_flags(fresh) & TOPDIR_FLAG
    assert _directory_flags(empty) & TOPDIR_FLAG
    assert not _directory_flags(used) & TOPDIR_FLAG


def test_history_starts_the_longest_jobs_first(tmp_path):
    """With one slot the start order is the schedule: the jobs an earlier summary timed, longest
    first, after the one it never saw."""
    history = tmp_path / "history.jsonl"
    took = {"short": 1.0, "long": 900.0, "middle": 40.0}
    history.write_text(
        "".join(json.dumps({"id": job, "duration_ms": ms, "exit_code": 0}) + "\n" for job, ms in took.items())
    )
    jobs = [{"args": ["true"], "id": job} for job in ("short", "new", "long", "middle")]
    out = tmp_path / "out"
    proc = run_cli(
        "batch", write_manifest(tmp_path / "m.jsonl", jobs), "--out", out, "--jobs", "1", "--history", history
    )
    assert proc.returncode == 0, proc.stderr
    started = sorted(summary_lines(out), key=lambda line: line["started_at"])
    assert [line["id"] for line in started] == ["new", "long", "middle", "short"]


def test_trace_is_chrome_trace_json_with_an_event_per_attempt(tmp_path):
    jobs = [{"args": ["sleep", "0.1"], "id": f"s{n}"} for n in range(3)]
    jobs.append({"args": ["false"], "id": "retried"})
    out = tmp_path / "out"
    trace = tmp_path / "trace.json"
    proc = run_cli(
        "batch",
        write_manifest(tmp_path / "m.jsonl", jobs),
        "--out",
        out,
        "--jobs",
        "2",
        "--retries",
        "1",
        "--trace",
        trace,
    )
    assert proc.returncode == BATCH_FAILED, proc.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    complete = [event for event in events if event["ph"] == "X"]
    assert sorted(event["name"] for event in complete) == ["retried", "retried", "s0", "s1", "s2"]
    assert sorted(e["args"]["attempt"] for e in complete if e["name"] == "retried") == [1, 2]
    lanes = {event["tid"] for event in complete}
    assert lanes == {1, 2}
    names = {event["tid"]: event["args"]["name"] for event in events if event["name"] == "thread_name"}
    assert names == {1: "slot 1", 2: "slot 2"}
    for event in complete:
        assert event["dur"] > 0 and event["ts"] >= 0 and event["cat"] in ("ok", "failed")
    # no two events of one lane overlap
    for lane in lanes:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in complete if e["tid"] == lane)
        assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))


def test_on_a_terminal_the_bar_ticks_each_second_naming_the_longest_running_job(tmp_path):
    """Between job ends the bar still moves: each second it says how many jobs run and which one
    has run longest, for how long."""
    jobs = [{"args": ["sleep", "2.6"], "id": "slow"}, {"args": ["sleep", "1.3"], "id": "brief"}]
    text = on_a_terminal(tmp_path, jobs, "--jobs", "2")
    bars = [part for part in re.split(r"\r\x1b\[K|\n", text) if part.startswith("[")]
    assert any(bar.endswith("] 0/2: 0 exited 0, 0 failed, ETA 0s, running 2, longest slow (1s)") for bar in bars), bars
    assert any(
        "] 1/2: 1 exited 0, 0 failed, " in bar and bar.endswith(", running 1, longest slow (2s)") for bar in bars
    ), bars
    assert bars[-1].startswith("[" + "#" * 30 + "] 2/2: 2 exited 0, 0 failed, ETA 0s") and "running" not in bars[-1]

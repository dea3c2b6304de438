"""The batch's index.html is a batch page, drawn from ``summary.jsonl``: job ids first, the jobs'
commands, failures first with their stderr, the jobs that never started and why, totals and a
timeline; ``report DIR`` on a batch's ``--out`` draws the same page."""

from __future__ import annotations

import html
import json
import os
import signal
import re
import sys
import time

import pytest

from conftest import SAFETY_NET, pid_alive, run_cli, start_cli, wait_for_event

STAMP = re.compile(rb"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC")


def page(path) -> bytes:
    return STAMP.sub(b"<generated>", path.read_bytes())


def text(path) -> str:
    """The page's words, tags dropped (what a reader sees, roughly)."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", path.read_text())))


def write(path, jobs) -> str:
    path.write_text("".join(json.dumps(job) + "\n" for job in jobs))
    return str(path)


def summary(out) -> list[dict]:
    return [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]


def report_dir(out, tmp_path) -> bytes:
    target = tmp_path / "report.html"
    proc = run_cli("report", out, "-o", target)
    assert proc.returncode == 0, proc.stderr
    assert b"a batch of" in proc.stdout
    return page(target)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A batch of five: two pass, one fails with stderr, one times out; with --halt-on-failure
    and one slot, the job after the failure never starts."""
    tmp_path = tmp_path_factory.mktemp("mixed")
    jobs = [
        {"args": ["true"], "id": "first"},
        {"args": ["sh", "-c", "echo compiling >&2; echo 'broken.c:3: error: expected ;' >&2; exit 3"], "id": "broken"},
        {"args": ["sleep", "5"], "id": "never"},
    ]
    out = tmp_path / "out"
    proc = run_cli("batch", write(tmp_path / "m.jsonl", jobs), "--out", out, "--jobs", "1", "--halt-on-failure")
    assert proc.returncode == 117, proc.stderr
    return tmp_path, out


def test_the_page_names_each_job_and_holds_every_summary_line(mixed):
    _, out = mixed
    lines = summary(out)
    words = text(out / "index.html")
    assert [line["id"] for line in lines] == ["first", "broken", "never"]
    assert "Batch: 3 jobs" in words  # every summary line, the never-started one included
    for line in lines:
        assert line["id"] in words
    assert "redacted" not in words
    assert "sh -c 'echo compiling" in words  # the command as the job gave it


def test_failures_come_first_with_the_tail_of_their_stderr(mixed):
    _, out = mixed
    html = (out / "index.html").read_text()
    failures = html.index("<h2>Failures</h2>")
    assert failures < html.index("<h2>Jobs</h2>")
    section = html[failures : html.index("</section>", failures)]
    assert "broken" in section and "exit 3" in section
    assert "broken.c:3: error: expected ;" in section  # the compiler's error, inline
    assert "stderr.log" in section


def test_jobs_that_never_started_are_listed_with_why(mixed):
    _, out = mixed
    (never,) = [line for line in summary(out) if line["id"] == "never"]
    assert never["exit_code"] is None and never["source"] == "halted"
    html = (out / "index.html").read_text()
    listed = html[html.index("<h2>Never started</h2>") :]
    assert re.search(r"never</span>: halted", listed)


def test_the_page_shows_the_summarys_own_durations(mixed):
    _, out = mixed
    (first,) = [line for line in summary(out) if line["id"] == "first"]
    value = first["duration_ms"]  # the page's one format: 3 decimals under 10 ms, else 1, no trailing zero
    places = 3 if value < 10 else 1
    shown = f"{value:.{places}f}".rstrip("0").rstrip(".") + " ms"
    row = re.search(r"<td class=\"mono\">first</td>.*?</tr>", (out / "index.html").read_text()).group(0)
    assert shown in row


def test_report_on_the_out_directory_draws_the_same_page(mixed):
    tmp_path, out = mixed
    assert report_dir(out, tmp_path) == page(out / "index.html")


def test_summary_lines_carry_the_start_time_and_the_command(tmp_path):
    jobs = [{"args": ["echo", "token"], "id": "open"}, {"args": ["echo", "s3cr3t"], "id": "hidden", "secret": True}]
    out = tmp_path / "out"
    proc = run_cli("batch", write(tmp_path / "m.jsonl", jobs), "--out", out, "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    by_id = {line["id"]: line for line in summary(out)}
    assert by_id["open"]["command"] == ["echo", "token"]
    assert by_id["hidden"]["command"] is None and by_id["hidden"]["args_sha256"]
    for line in by_id.values():
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", line["started_at"])
    assert "s3cr3t" not in (out / "index.html").read_text()
    assert "s3cr3t" not in (out / "summary.jsonl").read_text()


@pytest.mark.parametrize("slotted", [False, True], ids=["plain", "slot-in-program"])
def test_a_secret_jobs_program_is_not_named_by_its_spawn_failure(tmp_path, slotted):
    """A spawn failure's message names the program: a ``secret`` job's went into its summary
    line, and from there onto the page, into the JUnit report and onto stderr; the program it
    names is the one the run was given, its ``{%}`` already its slot."""
    program = str(tmp_path / ("no-such-s3cr3t-{%}" if slotted else "no-such-s3cr3t"))
    jobs = [{"args": [program, "x"], "id": "hidden", "secret": True} | ({"slot_args": [0]} if slotted else {})]
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    proc = run_cli("batch", write(tmp_path / "m.jsonl", jobs), "--out", out, "--junit", junit)
    assert proc.returncode != 0
    (line,) = summary(out)
    assert line["exit_code"] == 101 and "(a secret job's program)" in line["message"], line
    for written in (out / "summary.jsonl", out / "index.html", junit):
        assert "s3cr3t" not in written.read_text(), written
    assert b"s3cr3t" not in proc.stderr, proc.stderr


def test_the_timeline_has_a_lane_per_slot_and_a_bar_per_job(tmp_path):
    jobs = [{"args": ["sleep", "0.2"], "id": f"j{n}"} for n in range(4)]
    out = tmp_path / "out"
    proc = run_cli("batch", write(tmp_path / "m.jsonl", jobs), "--out", out, "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    html = (out / "index.html").read_text()
    timeline = html[html.index('<svg class="timeline"') : html.index("</svg>", html.index('<svg class="timeline"'))]
    assert timeline.count('<rect class="job st-ok"') == 4
    assert "slot 2" in timeline and "slot 3" not in timeline
    assert re.search(r"<dt>slots</dt><dd>2, \d+% busy", html)


def test_a_batch_of_one_job_gets_the_batch_page(tmp_path):
    out = tmp_path / "out"
    proc = run_cli("batch", write(tmp_path / "m.jsonl", [{"args": ["true"], "id": "only"}]), "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "Batch: 1 job" in text(out / "index.html")


def test_the_page_process_runs_this_processkit_whatever_the_working_directory_holds(tmp_path):
    """A batch started from inside another checkout (its own ``processkit`` package) still
    gets its page from this processkit."""
    elsewhere = tmp_path / "checkout"
    (elsewhere / "processkit" / "batching").mkdir(parents=True)
    for name in ("processkit/__init__.py", "processkit/batching/__init__.py", "processkit/batching/index.py"):
        (elsewhere / name).write_text("raise SystemExit(0)\n")  # a version that draws nothing
    out = tmp_path / "out"
    manifest = write(tmp_path / "m.jsonl", [{"args": ["true"], "id": "a"}, {"args": ["true"], "id": "b"}])
    proc = run_cli("batch", manifest, "--out", str(out), "--jobs", "2", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert page(out / "index.html") == report_dir(out, tmp_path)


def test_a_hostile_summary_is_drawn_from_the_lines_that_are_jobs(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    good = {"id": "fine", "exit_code": 0, "source": "child_exit", "duration_ms": 1.5, "attempts": 1}
    lines = [
        json.dumps(good),
        "[" * 100_000 + "]" * 100_000,  # deep nesting
        json.dumps({"id": 5}),
        json.dumps({"id": "odd", "exit_code": "x", "duration_ms": "1e999", "resources": [], "capture": 7}),
        "x" * (2 * 1024 * 1024),  # past the line bound
        '{"id": "digits", "exit_code": ' + "9" * 5000 + "}",  # past int()'s digit limit
        json.dumps({"id": "big", "exit_code": 3, "duration_ms": 1e300, "attempts": 10**50}),
    ]
    (out / "summary.jsonl").write_text("\n".join(lines) + "\n")
    target = tmp_path / "page.html"
    proc = run_cli("report", out, "-o", target)
    assert proc.returncode == 0, proc.stderr
    words = text(target)
    assert "Batch: 3 jobs" in words and "4 summary lines skipped" in words


def test_a_summary_that_is_a_fifo_is_refused_without_waiting(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "summary.jsonl")
    proc = run_cli("report", out, "-o", tmp_path / "page.html", timeout=60)
    assert proc.returncode == 111
    assert b"not a regular file" in proc.stderr and proc.stderr.count(b"\n") == 1


def test_report_of_a_batch_directory_refuses_the_single_stream_flags(mixed):
    tmp_path, out = mixed
    proc = run_cli("report", out, "--capture-dir", out, "-o", tmp_path / "x.html")
    assert proc.returncode == 100 and b"batch's directory" in proc.stderr


def test_report_given_the_summary_file_names_the_directory_that_draws_the_batch(mixed):
    tmp_path, out = mixed
    proc = run_cli("report", out / "summary.jsonl", "-o", tmp_path / "x.html")
    assert proc.returncode == 114 and proc.stderr.count(b"\n") == 1, proc.stderr
    assert f"(a batch's summary.jsonl: its lines are jobs; report {out} draws the batch)".encode() in proc.stderr


def test_the_api_batch_draws_the_same_page(tmp_path):
    code = (
        "import processkit, sys; processkit.batch([{'id': 'a', 'args': ['true']}, "
        "{'id': 'b', 'args': ['sh', '-c', 'echo bad >&2; exit 2']}], jobs=2, out=sys.argv[1])"
    )
    out = tmp_path / "out"
    proc = run_cli_python(code, out)
    assert proc.returncode == 0, proc.stderr
    html = (out / "index.html").read_text()
    assert "Batch: 2 jobs" in text(out / "index.html") and "bad" in html[html.index("<h2>Failures</h2>") :]


def run_cli_python(code: str, *args):
    import subprocess

    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, timeout=60)


def page_processes(batch_pid: int) -> list[int]:
    """The batch's children that are its page process (``batching.index.command``)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                argv = handle.read()
        except (OSError, ValueError):
            continue
        if parent == batch_pid and b"processkit.batching.index" in argv:
            found.append(int(name))
    return found


def test_the_page_process_waits_ready_beside_the_jobs_and_dies_with_the_batch(tmp_path):
    """Started with the batch, it is there while the first job runs; a SIGKILLed batch takes it
    along (its pipe's end of file), drawing nothing."""
    out = tmp_path / "out"
    manifest = write(tmp_path / "m.jsonl", [{"args": ["sleep", "30"], "id": "a"}])
    batch = start_cli("batch", manifest, "--out", str(out))
    try:
        wait_for_event(out / "a" / "events.jsonl", "run_started")
        drawers = page_processes(batch.pid)
        assert len(drawers) == 1, drawers
    finally:
        batch.kill()
        batch.communicate(timeout=SAFETY_NET)
    try:
        deadline = time.monotonic() + SAFETY_NET
        while pid_alive(drawers[0]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not pid_alive(drawers[0]), "the page process outlived its batch"
        assert not (out / "index.html").exists()
    finally:  # the killed batch's job (it sleeps on in its group): ended now, not by a later sweep
        pruned = run_cli("prune")
        assert pruned.returncode == 0, pruned.stderr


def test_a_failures_tail_says_it_is_the_last_lines_of_its_file(tmp_path):
    """The box holds a long capture's last 40 lines: the page said only the file's path and its
    digest, so a reader took the box for the whole output."""
    jobs = [
        {
            "id": "long",
            "args": [sys.executable, "-c", "import sys\nfor n in range(500): print(n, file=sys.stderr)\nsys.exit(1)"],
        },
        {"id": "short", "args": [sys.executable, "-c", "import sys; print('only line', file=sys.stderr); sys.exit(1)"]},
    ]
    out = tmp_path / "out"
    assert run_cli("batch", write(tmp_path / "m.jsonl", jobs), "--out", out).returncode == 117
    sections = re.findall(
        r'<section class="failure[^"]*" id="failure-(\w+)">(.*?)</section>', (out / "index.html").read_text(), re.S
    )
    said = {job: html.unescape(re.sub(r"<[^>]+>", " ", body)) for job, body in sections}
    assert "its last 40 line(s) of 1.8 KiB shown" in said["long"] and "499" in said["long"]
    assert "line(s) of" not in said["short"], "a whole file is not called a tail"


def test_a_failures_tail_of_one_long_line_shows_its_end(tmp_path):
    """A capture that ends in one line longer than the box's 64 KiB read: the box was empty
    ("its last 0 line(s)"), the line cut at the read dropped; its end is shown, marked."""
    job = "import sys; sys.stderr.write('x' * 70000 + ' FATAL: disk quota'); sys.exit(1)"
    out = tmp_path / "out"
    assert (
        run_cli(
            "batch", write(tmp_path / "m.jsonl", [{"id": "one", "args": [sys.executable, "-c", job]}]), "--out", out
        ).returncode
        == 117
    )
    sections = re.findall(
        r'<section class="failure[^"]*" id="failure-(\w+)">(.*?)</section>', (out / "index.html").read_text(), re.S
    )
    said = {job: html.unescape(re.sub(r"<[^>]+>", " ", body)) for job, body in sections}
    assert "its last 1 line(s) of 68.4 KiB shown" in said["one"] and "…xxx" in said["one"]
    assert "xxx FATAL: disk quota" in said["one"]


def test_a_failures_tail_whose_cut_line_is_followed_by_a_gap_only_shows_it(tmp_path):
    """head-tail keeps a long line's head, then the stream's last half, here blank lines: the
    line the read cut, followed by the gap's marker and no other text, was dropped (the marker
    counted as a line), leaving the box blank."""
    job = "import sys; sys.stdout.write('x' * 200000 + ' FATAL' + '\\n' * 60000); sys.exit(1)"
    out = tmp_path / "out"
    manifest = write(
        tmp_path / "m.jsonl",
        [{"id": "one", "args": [sys.executable, "-c", job], "capture_keep": "head-tail", "capture_max_bytes": 100000}],
    )
    assert run_cli("batch", manifest, "--out", out).returncode == 117
    sections = re.findall(
        r'<section class="failure[^"]*" id="failure-(\w+)">(.*?)</section>', (out / "index.html").read_text(), re.S
    )
    said = {job: html.unescape(re.sub(r"<[^>]+>", " ", body)) for job, body in sections}
    assert "…xxx" in said["one"] and "dropped here" in said["one"], said["one"]


def test_a_page_that_cannot_be_written_is_one_warning_in_the_programs_frame_once(tmp_path):
    """The page process's own line came back inside the warning, its program's name with it:
    ``warning: no index.html: processkit-cli: cannot write ...``."""
    out = tmp_path / "out"
    (out / "index.html").mkdir(parents=True)
    proc = run_cli("batch", write(tmp_path / "m.jsonl", [{"args": ["true"], "id": "a"}]), "--out", out)
    assert proc.returncode == 0, proc.stderr
    said = f"processkit-cli: warning: no index.html: cannot write {out}/index.html: Is a directory"
    assert said in proc.stderr.decode().splitlines(), proc.stderr


def test_a_page_process_killed_during_the_batch_is_said_as_killed(tmp_path):
    """The batch is its runs' subreaper, whose reaper collects every orphan: its page process is
    its own child, not an orphan, so its exit status is the page's to read (-9), not taken by the
    reaper (which left "ended before it was asked to")."""
    out, go = tmp_path / "out", tmp_path / "go"
    wait = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)"
    manifest = write(tmp_path / "m.jsonl", [{"args": [sys.executable, "-c", wait], "id": "a"}])
    batch = start_cli("batch", manifest, "--out", str(out))
    try:
        wait_for_event(out / "a" / "events.jsonl", "run_started")
        drawers = page_processes(batch.pid)
        assert len(drawers) == 1, drawers
        os.kill(drawers[0], signal.SIGKILL)
    finally:
        go.touch()
    _, err = batch.communicate(timeout=60)
    assert batch.returncode == 0, err
    assert b"no index.html: the process that draws it exited -9" in err, err


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]


def test_the_reaper_collects_orphans_past_a_page_process_left_uncollected(tmp_path):
    """The killed page process waits, a zombie, for the page's own collection at the end; the
    orphans of the jobs after it are collected all the same (the kernel shows that zombie first
    to every look at the children)."""
    out = tmp_path / "out"
    wait = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)\n"
    orphan = wait + "if os.fork() == 0:\n    time.sleep(60)\n"  # its orphan outlives it, killed by its teardown
    jobs = [
        {"args": [sys.executable, "-c", orphan, str(tmp_path / "go1")], "id": "a"},
        {"args": [sys.executable, "-c", wait, str(tmp_path / "go2")], "id": "b"},
    ]
    batch = start_cli("batch", write(tmp_path / "m.jsonl", jobs), "--jobs", "1", "--out", str(out))
    try:
        wait_for_event(out / "a" / "events.jsonl", "run_started")
        drawer = page_processes(batch.pid)[0]
        os.kill(drawer, signal.SIGKILL)
        deadline = time.monotonic() + SAFETY_NET
        while _state(drawer) != "Z":
            assert time.monotonic() < deadline, "the killed page process never became a zombie"
            time.sleep(0.01)
        (tmp_path / "go1").touch()
        wait_for_event(out / "b" / "events.jsonl", "run_started")  # a's teardown (and its reap) is over
        with open(f"/proc/{batch.pid}/task/{batch.pid}/children") as handle:
            children = [int(pid) for pid in handle.read().split()]
        zombies = [pid for pid in children if pid != drawer and _state(pid) == "Z"]
        assert zombies == [], zombies
    finally:
        (tmp_path / "go1").touch()
        (tmp_path / "go2").touch()
    _, err = batch.communicate(timeout=60)
    assert batch.returncode == 0, err


def test_a_job_argument_and_an_out_dir_that_are_not_utf8_still_get_the_page(tmp_path):
    # a legacy tree's Latin-1 file name as a job's argument, and in --out: the summary spells the
    # byte with JSON's \udcXX escape, and the page (and report DIR) shows it as U+FFFD
    out = tmp_path / os.fsdecode(b"out-\xff")
    done = run_cli("batch", "--out", out, "--", "sh", "-c", "exit 0", "sh", ":::", os.fsdecode(b"name-\xe9.py"))
    assert done.returncode == 0, done.stderr
    assert b"index.html" not in done.stderr and "name-\ufffd.py" in text(out / "index.html")
    drawn = run_cli("report", out, "-o", tmp_path / "again.html")
    assert drawn.returncode == 0, drawn.stderr
    assert "out-\ufffd" in text(tmp_path / "again.html")


def test_a_page_renders_bytes_that_are_not_utf8_by_the_events_streams_rule(tmp_path):
    # one rule for the stream, the pages and the exports (String::from_utf8_lossy's): a cut
    # sequence (\xe2\x82) is one U+FFFD, even where the text also holds a surrogate that stands
    # for no byte (JSON's \ud800, here a summary.jsonl edited by hand), which is one U+FFFD too
    out = tmp_path / "out"
    done = run_cli(
        "batch", "--out", out, "--", "sh", "-c", "exit 0", "sh", ":::", os.fsdecode(b"name-\xe2\x82-\xe9.py")
    )
    assert done.returncode == 0, done.stderr
    assert "name-\ufffd-\ufffd.py" in text(out / "index.html")
    summary = (out / "summary.jsonl").read_text()
    (out / "summary.jsonl").write_text(summary.replace('"sh","name-', '"sh\\ud800","name-'))
    drawn = run_cli("report", out, "-o", tmp_path / "again.html")
    assert drawn.returncode == 0, drawn.stderr
    page = text(tmp_path / "again.html")
    assert "name-\ufffd-\ufffd.py" in page and "sh\ufffd" in page

"""``bench`` carried on one host, as a user meets it: exports kept through a Ctrl-C, hyperfine's
iteration variable, CPU and wall time on one interval, and what a process-group run leaves."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess

import pytest

from conftest import (
    SAFETY_NET,
    cli_command,
    event_names,
    listed_when,
    published_late_by,
    run_cli,
    start_cli,
    wait_for_event,
)

DAEMON = "301.456"  # an argument no other process has


def _ctrl_c(tmp_path, streams, running: str, *args, meanwhile=lambda: None) -> bytes:
    """``bench ARGS`` given a Ctrl-C once the run ``running`` (``command-3-run-1``) has started
    (and ``meanwhile`` done); its stderr, once it died by SIGINT as hyperfine and batch do (a shell
    loop around it stops)."""
    process = start_cli("bench", "--jsonl-dir", streams, *args, cwd=tmp_path)
    try:
        wait_for_event(streams / f"{running}.jsonl", "run_started")
        meanwhile()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=SAFETY_NET)
    finally:
        process.kill()
    assert process.returncode == -signal.SIGINT, stderr
    return stderr


def test_a_ctrl_c_in_the_third_command_keeps_the_first_two_in_every_export(tmp_path):
    streams, out = tmp_path / "streams", tmp_path / "b.json"
    md, table = tmp_path / "b.md", tmp_path / "b.csv"
    stderr = _ctrl_c(
        tmp_path, streams, "command-3-run-1", "--runs", "2", "--order", "sequential",
        "--export-json", out, "--export-markdown", md, "--export-csv", table,
        "--command", '["true"]', "--command", '["sleep", "0.01"]', "--command", '["sleep", "30"]',
    )  # fmt: skip
    assert b"stopped" in stderr
    assert event_names(streams / "command-3-run-1.jsonl")[-1] == "runner_exit"
    exported = json.loads(out.read_text())
    assert [r["command"] for r in exported["results"]] == ["true", "sleep 0.01"]
    assert all(len(r["times"]) == 2 and r["exit_codes"] == [0, 0] for r in exported["results"])
    assert exported["comparison"]["fastest"] in ("true", "sleep 0.01")
    assert [r["command"] for r in csv.DictReader(io.StringIO(table.read_text()))] == ["true", "sleep 0.01"]
    assert len(md.read_text().splitlines()) == 4 and "`sleep 0.01`" in md.read_text()


def test_a_ctrl_c_amid_interleaved_rounds_keeps_the_runs_so_far_in_every_export(tmp_path):
    # the default order finishes every command in the last round: a stop before it kept nothing
    streams, out, table = tmp_path / "streams", tmp_path / "b.json", tmp_path / "b.csv"
    hangs_third = '[ "$HYPERFINE_ITERATION" != 2 ] || exec sleep 30'
    _ctrl_c(
        tmp_path, streams, "command-2-run-3", "--runs", "5", "--export-json", out, "--export-csv", table,
        "-n", "quick", "--command", '["true"]', "-n", "hangs", "--command", json.dumps(["sh", "-c", hangs_third]),
    )  # fmt: skip
    exported = json.loads(out.read_text())
    assert [(r["command"], len(r["times"])) for r in exported["results"]] == [("quick", 3), ("hangs", 2)]
    assert [r["command"] for r in csv.DictReader(io.StringIO(table.read_text()))] == ["quick", "hangs"]


def test_a_ctrl_c_amid_one_commands_runs_says_the_exports_leave_them_out(tmp_path):
    # one command's rounds are its runs in a row: like sequential order, its exports get it only
    # once its runs are done, and a stop before that left them with no results, unsaid
    streams, out = tmp_path / "streams", tmp_path / "b.json"
    hangs_third = '[ "$HYPERFINE_ITERATION" != 2 ] || exec sleep 30'
    stderr = _ctrl_c(
        tmp_path, streams, "command-1-run-3", "--runs", "5", "--export-json", out,
        "-n", "hangs", "--command", json.dumps(["sh", "-c", hangs_third]),
    )  # fmt: skip
    assert json.loads(out.read_text())["results"] == []
    said = stderr.decode().splitlines()
    assert "warning: the exports leave out 'hangs' and its 2 timed runs so far" in said[-2], said
    assert "stopped" in said[-1], said  # the stop's line stays the last


def test_a_failing_run_of_the_second_command_in_sequential_order_says_the_export_files_leave_it_out(tmp_path):
    # the first command done is in the export; the second, failed on its third run, is not: said
    out = tmp_path / "b.json"
    fails_third = '[ "$HYPERFINE_ITERATION" != 2 ] || exit 1'
    done = run_cli(
        "bench", "--runs", "3", "--order", "sequential", "--export-json", out,
        "-n", "quick", "--command", '["true"]', "-n", "fails", "--command", json.dumps(["sh", "-c", fails_third]),
    )  # fmt: skip
    assert done.returncode == 118, done.stderr
    assert [r["command"] for r in json.loads(out.read_text())["results"]] == ["quick"]
    said = done.stderr.decode().splitlines()
    assert "warning: the exports leave out 'fails' and its 2 timed runs so far" in said[-2], said


def test_a_ctrl_c_amid_the_rounds_dies_by_sigint_though_an_export_cannot_be_written(tmp_path):
    # the export written at the stop failed, and its failure (111) took the Ctrl-C's place
    streams, out = tmp_path / "streams", tmp_path / "b.json"

    def unwritable():
        out.unlink()
        out.mkdir()  # made before the first run as a file; a directory now

    hangs_second = '[ "$HYPERFINE_ITERATION" != 1 ] || exec sleep 30'
    stderr = _ctrl_c(
        tmp_path, streams, "command-2-run-2", "--runs", "3", "--export-json", out,
        "--command", '["true"]', "--command", json.dumps(["sh", "-c", hangs_second]), meanwhile=unwritable,
    )  # fmt: skip
    assert b"warning: cannot write " in stderr and b"stopped" in stderr, stderr


def test_the_exports_exist_before_the_first_run(tmp_path):
    streams, out = tmp_path / "streams", tmp_path / "b.json"
    process = start_cli("bench", "--runs", "1", "--jsonl-dir", streams, "--export-json", out, "--", "sleep", "30")
    try:
        wait_for_event(streams / "command-1-run-1.jsonl", "run_started")
        assert json.loads(out.read_text())["results"] == []
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=SAFETY_NET)
    finally:
        process.kill()
    assert process.returncode == 107


@pytest.mark.parametrize("second", ["b.json", "link"])
def test_two_exports_naming_one_file_are_refused_before_any_run(tmp_path, second):
    # the later export replaced the earlier one's every time: the JSON was lost without a word
    ran = tmp_path / "ran"
    (tmp_path / "link").symlink_to("b.json")
    done = run_cli(
        "bench", "--runs", "1", "--export-json", "b.json", "--export-csv", second, "--", "touch", ran, cwd=tmp_path
    )
    assert done.returncode == 111, done.stderr
    said = {
        "b.json": "cannot write b.json: --export-json and --export-csv both name it",
        "link": "cannot write link (--export-csv): it is the --export-json file b.json",
    }[second]
    assert done.stderr == f"processkit-cli: {said}\n".encode()
    assert not ran.exists() and not (tmp_path / "b.json").exists()  # nothing written before the refusal


def test_a_refused_pair_of_exports_leaves_every_file_as_it_was(tmp_path):
    # the first export was written before the check: b held the CSV's header and new.md was made
    (tmp_path / "b").write_text("precious\n")
    flags = ["--export-markdown", "new.md", "--export-json", "b", "--export-csv", "b"]
    done = run_cli("bench", "--runs", "1", *flags, "--", "true", cwd=tmp_path)
    assert done.returncode == 111, done.stderr
    assert sorted(os.listdir(tmp_path)) == ["b"] and (tmp_path / "b").read_text() == "precious\n"


def test_dash_is_stdout_beside_a_file_named_dash(tmp_path):
    # hyperfine's stdout target: a file named - in the working directory made the two one file
    (tmp_path / "-").write_text("kept\n")
    done = run_cli("bench", "--runs", "1", "--style", "none", "--export-json", "-", "--export-markdown", "-",
                   "--", "true", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b'"results": [' in done.stdout and b"| Command | Mean" in done.stdout
    assert (tmp_path / "-").read_text() == "kept\n"


def test_exports_to_stdout_come_in_hyperfines_order(tmp_path):
    # hyperfine's ExportManager writes AsciiDoc, JSON, CSV, Markdown, org-mode, whatever the flags'
    # order: bench wrote JSON, Markdown, CSV, AsciiDoc, so a script cutting stdout got other parts
    flags = ["--export-orgmode", "-", "--export-markdown", "-", "--export-csv", "-", "--export-json", "-"]
    done = run_cli(
        "bench", "--runs", "1", "--style", "none", *flags, "--export-asciidoc", "-", "--", "true", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    starts = [b"[cols=", b'{\n  "results"', b"command,mean,", b"| Command | Mean", b"| Command  |  Mean"]
    assert [done.stdout.find(start) for start in starts] == sorted(done.stdout.find(start) for start in starts)
    assert -1 not in [done.stdout.find(start) for start in starts], done.stdout


def test_a_table_export_over_the_baseline_is_refused_and_the_baseline_kept(tmp_path):
    # only --export-json rolls the baseline forward: a Markdown one left no baseline for the next run
    ran, baseline = tmp_path / "ran", tmp_path / "b.json"
    baseline.write_text(json.dumps({"results": [{"command": "touch", "times": [0.001, 0.001]}]}))
    kept = baseline.read_bytes()
    flags = ["--baseline", "b.json", "--export-markdown", "b.json"]
    done = run_cli("bench", "--runs", "1", *flags, "--", "touch", ran, cwd=tmp_path)
    assert done.returncode == 111, done.stderr
    assert done.stderr == b"processkit-cli: cannot write b.json: --baseline and --export-markdown both name it\n"
    assert baseline.read_bytes() == kept and not ran.exists()


def _no_file_grows():
    """A child's files cannot grow (as on a full disk): each write fails, EFBIG, unsignalled."""
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def test_a_warning_every_run_shares_is_said_once(tmp_path):
    # --jsonl-dir on a full disk said its two warnings again for every run: 2,000 lines for 1,000
    flags = ["--runs", "4", "--style", "none", "--jsonl-dir", tmp_path / "streams"]
    done = run_cli("bench", *flags, "--", "true", cwd=tmp_path, preexec_fn=_no_file_grows)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.decode().splitlines()
    assert lines and all(line.startswith("processkit-cli: warning: ") for line in lines), lines
    assert "JSONL event logging disabled: could not write a JSONL event: File too large" in lines[-1], lines
    assert len(set(lines)) == len(lines), lines


def test_each_run_sees_hyperfines_iteration_variable(tmp_path):
    log = tmp_path / "log"
    show = f'echo "$0=${{HYPERFINE_ITERATION-unset}}" >> {log}'
    done = run_cli(
        "bench", "--runs", "3", "--warmup", "2",
        "--setup", json.dumps(["sh", "-c", show, "setup"]), "--prepare", json.dumps(["sh", "-c", show, "prepare"]),
        "--command", json.dumps(["sh", "-c", show, "run"]), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = [line for line in log.read_text().splitlines() if not line.startswith("prepare=")]
    assert runs == ["setup=unset", "run=warmup-0", "run=warmup-1", "run=0", "run=1", "run=2"]
    assert log.read_text().count("prepare=unset") == 5


def test_cpu_time_stays_within_wall_time_for_a_single_process(tmp_path):
    """``true`` is one thread: its CPU time lies within its life, so per run CPU is at most its
    wall time, give or take what the group counts outside the interval: the child's joining its
    cgroups (taken out of the wall time, not out of the group's counters) and the kernel's exit
    work after the exit record, a few tenths of a millisecond at most."""
    out = tmp_path / "b.json"
    done = run_cli("bench", "--runs", "20", "--export-json", out, "--", "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(out.read_text())["results"]
    times = zip(result["user_times"], result["system_times"], result["times"])
    over = [(u + s, t) for u, s, t in times if u + s > t + 0.0005]
    assert over == [], "CPU above wall time"
    assert json.loads(out.read_text())["processkit"]["timed_interval"].startswith(
        "the child's first step to the root's exit"
    )


def marked_processes() -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if cmdline[:2] == [b"sleep", DAEMON.encode()]:
            found.append(int(pid))
    return found


def test_a_setsid_daemon_survives_neither_into_the_next_run_nor_bench(tmp_path, monkeypatch):
    """Under process-group containment a ``setsid`` child leaves the run's group, which the
    teardown kills: each run finds none of the earlier runs' daemons alive, and none is left."""
    monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    log = tmp_path / "log"
    daemon = f"pgrep -f '^sleep {DAEMON}$' >/dev/null"
    check = f"if {daemon}; then echo alive; else echo clear; fi >> {log}"
    started = f"setsid sleep {DAEMON} >/dev/null 2>&1 & until {daemon}; do sleep 0.01; done"  # it has left the group
    try:
        done = run_cli("bench", "--runs", "3", "--warmup", "1", f"{check}; {started}", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert log.read_text().split() == ["clear"] * 4
        assert marked_processes() == []
        assert "left 4 processes outside their process group" in done.stdout.decode()
    finally:
        for pid in marked_processes():
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("containment", ["cgroup", "process_group"])
def test_a_whole_session_leaves_no_run_directory_or_record(tmp_path, monkeypatch, isolated_registry, containment):
    if containment == "process_group":
        monkeypatch.setenv("PROCESSKIT_CONTAINMENT", "process_group")
    done = run_cli("bench", "--runs", "5", "--", "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    left = [name for name in os.listdir(isolated_registry) if not name.endswith((".ended", ".outcomes"))]
    assert left == []


def test_a_session_of_short_runs_pushes_no_older_outcome_out_of_the_registry(tmp_path, isolated_registry):
    """No run of the session was published (each is, after 50 ms), so its lodging has no outcome
    to keep: it leaves no empty ``.outcomes`` file, which would count towards the registry's 256
    and have the oldest run's outcome removed for it."""
    os.chmod(isolated_registry, 0o700)
    old = [f"run-{index:032x}-{0:016x}.ended" for index in range(256)]
    for name in old:
        (isolated_registry / name).write_text("{}")
    # A run slower than the late publication (a loaded machine) would be published: none is here.
    unpublished = dict(os.environ, PROCESSKIT_LATE_PUBLICATION_MS="600000")
    done = run_cli("bench", "--runs", "3", "--", "true", cwd=tmp_path, env=unpublished)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(isolated_registry)) == old


WAITER = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)"


def test_a_run_is_published_only_once_it_has_lasted(tmp_path, isolated_registry, late_publication):
    """A run whose stream is not kept makes no record, socket or tombstone if it ends within
    ``LATE_PUBLICATION_MS``; one that lasts is listed, its record saying when it started."""
    release, waiter = tmp_path / "release", tmp_path / "waiter.py"
    waiter.write_text(WAITER)
    bench = start_cli("bench", "-N", "--runs", "3", "true", f"python3 {waiter} {release}", cwd=tmp_path)
    try:
        runs = listed_when(lambda runs: len(runs) == 1)
        (run,) = runs.values()
        home = os.path.dirname(run["endpoint"])
        made = sorted(os.listdir(home))
        assert [name for name in made if name.endswith(".ended")] == [], "the runs of true were published"
        (record,) = [name for name in made if name.endswith(".json")]
        assert published_late_by(os.path.join(home, record)) >= late_publication, "the record keeps the spawn's time"
    finally:
        release.touch()
    _, err = bench.communicate(timeout=60)
    assert bench.returncode == 0, err


def test_a_bench_started_in_a_removed_directory_says_so(tmp_path):
    """The session reads its working directory once for all its runs; one removed under it is
    each run's set-up failure (118, one line), as a run's own read of it says, not an internal
    error."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && shift && exec "$@" bench -N --runs 2 true'
    done = subprocess.run(
        ["sh", "-c", script, "sh", str(gone), *cli_command()], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 118, done.stderr
    assert done.stderr.splitlines() == [
        "processkit-cli: cannot benchmark 'true': could not resolve the runner's current directory: No such file or directory (os error 2)"
    ]

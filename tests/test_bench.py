"""``processkit-cli bench`` as a user runs it: real commands, the summary, the exports, exit codes."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal

import pytest

from conftest import SAFETY_NET, read_events, run_cli, start_cli, wait_for_event

# hyperfine's per-command keys in ``--export-json`` (1.16+: memory_usage_byte per run)
HYPERFINE_KEYS = {"command", "mean", "stddev", "median", "user", "system", "min", "max", "times", "exit_codes"}
COUNTER = "n=$(cat {f} 2>/dev/null || echo 0); echo $((n+1)) > {f}"


def bench(tmp_path, *args, timeout: float = 60):
    out = tmp_path / "bench.json"
    out.unlink(missing_ok=True)
    done = run_cli("bench", "--export-json", out, *args, timeout=timeout, cwd=tmp_path)
    exported = json.loads(out.read_text()) if out.exists() else None
    return done, exported


def test_one_command_gives_hyperfines_summary_and_json(tmp_path):
    done, exported = bench(tmp_path, "--runs", "5", "--", "true")
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "Benchmark 1: true" in text and "Time (mean ± σ):" in text and "Range (min … max):" in text
    assert "5 runs" in text and "Max RSS:" in text and "Tree peak memory:" in text
    (result,) = exported["results"]
    assert HYPERFINE_KEYS | {"memory_usage_byte"} <= set(result)
    assert len(result["times"]) == 5 and result["exit_codes"] == [0] * 5
    assert all(isinstance(t, float) and 0 < t < 5 for t in result["times"])  # `true`: ms; 5 s tells seconds from ns
    assert result["min"] <= result["median"] <= result["max"] and result["min"] <= result["mean"] <= result["max"]
    assert all(m > 0 for m in result["memory_usage_byte"])  # ru_maxrss: never 0 for a process that ran
    assert all(m is None or m >= 0 for m in result["tree_peak_memory_byte"])  # a group counts in 256 KiB batches
    assert exported["comparison"] is None


def test_several_commands_interleave_and_are_compared(tmp_path):
    """Which is faster is an order with a margin: both pay the same spawn (the shell's start-up
    is taken off), and the sleep's 0.2 s on top of it is more than a loaded host's noise in a
    mean of three."""
    done, exported = bench(tmp_path, "--runs", "3", "--command", '["true"]', "sleep 0.2", "--command-name", "fast")
    assert done.returncode == 0, done.stderr
    first, second = exported["results"]
    assert (first["command"], second["command"]) == ("fast", "sleep 0.2")  # a named command goes by its name
    assert first["order"] == [0, 2, 4] and second["order"] == [1, 3, 5]
    assert exported["comparison"]["fastest"] == "fast"
    (other,) = exported["comparison"]["others"]
    assert other["command"] == "sleep 0.2" and other["ratio"] > 1 and 0 <= other["p_value"] <= 1
    assert "fast ran" in done.stdout.decode() and "times faster than sleep 0.2" in done.stdout.decode()


def test_sequential_order_runs_each_command_in_turn(tmp_path):
    done, exported = bench(tmp_path, "--runs", "3", "--order", "sequential", "--command", '["true"]', ":")
    assert done.returncode == 0, done.stderr
    assert [r["order"] for r in exported["results"]] == [[0, 1, 2], [3, 4, 5]]


def test_warmup_prepare_and_runs_are_counted(tmp_path):
    runs, prepared = tmp_path / "runs", tmp_path / "prepared"
    done, exported = bench(
        tmp_path,
        "--warmup",
        "2",
        "--runs",
        "3",
        "--prepare",
        json.dumps(["sh", "-c", f"echo x >> {prepared}"]),
        COUNTER.format(f=runs),
    )
    assert done.returncode == 0, done.stderr
    assert runs.read_text().strip() == "5"  # 2 warm-up + 3 timed
    assert len(prepared.read_text().split()) == 5  # before every run
    assert len(exported["results"][0]["times"]) == 3


def test_min_runs_and_min_time_decide_the_count(tmp_path):
    done, exported = bench(tmp_path, "--min-runs", "4", "--min-time", "0", "--", "true")
    assert done.returncode == 0, done.stderr
    assert len(exported["results"][0]["times"]) == 4
    done, exported = bench(tmp_path, "--min-runs", "1", "--min-time", "1s", "--max-runs", "50", "--", "sleep", "0.2")
    assert done.returncode == 0, done.stderr
    # Runs of at least 0.2 s fill a second in at most 5 (exact); more than --min-runs' one as
    # long as the first run's cycle is under the second (0.8 s above the sleep for the runner's
    # own work, which a loaded host does not reach).
    assert 1 < len(exported["results"][0]["times"]) <= 5
    done, exported = bench(tmp_path, "--min-runs", "1", "--min-time", "10s", "--max-runs", "3", "--", "true")
    assert len(exported["results"][0]["times"]) == 3


def test_setup_and_cleanup_run_once_per_command(tmp_path):
    flag = tmp_path / "flag"
    done, exported = bench(
        tmp_path,
        "--runs",
        "2",
        "--setup",
        json.dumps(["touch", str(flag)]),
        "--cleanup",
        json.dumps(["rm", str(flag)]),
        "--",
        "test",
        "-e",
        str(flag),
    )
    assert done.returncode == 0, done.stderr
    assert exported["results"][0]["exit_codes"] == [0, 0]
    assert not flag.exists()


def test_a_run_that_times_out_is_recorded_and_left_out(tmp_path):
    counter = tmp_path / "n"
    every_other_sleeps = COUNTER.format(f=counter) + "; [ $((n % 2)) -eq 1 ] && exec sleep 30; exit 0"
    # The quick runs (a shell that counts) take milliseconds: a 1 s timeout leaves a loaded host
    # a hundred times that before one of them is taken for a sleeper.
    done, exported = bench(tmp_path, "--runs", "4", "--timeout", "1s", "-i", every_other_sleeps)
    assert done.returncode == 0, done.stderr
    (result,) = exported["results"]
    assert result["timed_out"] == 2 and len(result["times"]) == 2 and result["timed_out_order"] == [1, 3]
    assert max(result["times"]) < 1  # the sleepers' times left out: each would be at least the timeout
    assert "Timed out:           2 runs" in done.stdout.decode()
    assert (
        "Warning: 2 of 4 runs of" in done.stdout.decode() and "timed out: the figures are the 2" in done.stdout.decode()
    )


def test_fewer_finished_runs_than_asked_for_fail_the_benchmark(tmp_path):
    """With --timeout, the runs that finished are fewer than --runs (or --min-runs) asks for:
    118 unless --ignore-failure, the summary and the export still written."""
    counter = tmp_path / "n"
    first_sleeps = COUNTER.format(f=counter) + "; [ $n -eq 1 ] && exec sleep 30; exit 0"
    done, exported = bench(tmp_path, "--runs", "3", "--timeout", "1s", first_sleeps)  # 1 s: as above
    assert done.returncode == 118, done.stderr
    assert b"only 2 of 3 runs" in done.stderr and b"fewer than --runs 3" in done.stderr
    assert exported["results"][0]["timed_out"] == 1 and len(exported["results"][0]["times"]) == 2
    assert "Timed out:           1 run" in done.stdout.decode()
    counter.unlink()
    done, exported = bench(tmp_path, "--min-runs", "3", "--max-runs", "3", "--timeout", "1s", first_sleeps)
    assert done.returncode == 118 and b"fewer than the 3 runs asked for (--max-runs 3)" in done.stderr
    counter.unlink()
    done, _ = bench(tmp_path, "--runs", "3", "--timeout", "1s", "--ignore-failure", first_sleeps)
    assert done.returncode == 0, done.stderr


def test_every_run_timing_out_fails_the_benchmark(tmp_path):
    done, exported = bench(tmp_path, "--runs", "2", "--timeout", "100ms", "--", "sleep", "30")
    assert done.returncode == 118
    assert b"timed out" in done.stderr
    assert exported["results"][0]["timed_out"] == 2


def test_a_failing_command_stops_the_benchmark_unless_ignored(tmp_path):
    done, exported = bench(tmp_path, "--runs", "3", "--", "sh", "-c", "exit 3")
    assert done.returncode == 118 and exported["results"] == []  # made before the first run, nothing done
    assert b"exited with 3" in done.stderr and b"--ignore-failure" in done.stderr
    done, exported = bench(tmp_path, "--runs", "3", "--ignore-failure", "--", "sh", "-c", "exit 3")
    assert done.returncode == 0, done.stderr
    assert exported["results"][0]["exit_codes"] == [3, 3, 3]


def test_a_command_that_cannot_start_is_a_bench_failure(tmp_path):
    done, _ = bench(tmp_path, "--runs", "2", "--ignore-failure", "--", "no-such-program-xyz")
    assert done.returncode == 118 and b"no-such-program-xyz" in done.stderr


def test_parameter_scan_and_list_expand_the_commands(tmp_path):
    done, exported = bench(
        tmp_path, "--runs", "2", "--parameter-scan", "n", "1", "3", "--command", '["sleep", "0.0{n}"]'
    )
    assert done.returncode == 0, done.stderr
    assert [r["command"] for r in exported["results"]] == ["sleep 0.01", "sleep 0.02", "sleep 0.03"]
    assert [r["parameters"] for r in exported["results"]] == [{"n": "1"}, {"n": "2"}, {"n": "3"}]
    done, exported = bench(tmp_path, "--runs", "1", "--parameter-list", "w", "a,b", "test {w} = {w}")
    assert [r["argv"] for r in exported["results"]] == [["sh", "-c", "test a = a"], ["sh", "-c", "test b = b"]]


def test_markdown_and_csv_exports(tmp_path):
    md, table = tmp_path / "b.md", tmp_path / "b.csv"
    done, _ = bench(
        tmp_path, "--runs", "2", "--export-markdown", md, "--export-csv", table, "--parameter-list", "x", "1,2",
        "--command", '["test", "{x}"]',
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = md.read_text().splitlines()
    assert lines[0].startswith("| Command | Mean [") and "| Relative |" in lines[0] and len(lines) == 4
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert [r["command"] for r in rows] == ["test 1", "test 2"] and [r["parameter_x"] for r in rows] == ["1", "2"]
    assert all(float(r["mean"]) > 0 for r in rows)


def test_the_tables_give_no_ratio_where_the_json_has_none(tmp_path):
    # commands faster than the shell's start-up come out at 0: the JSON's ratio is null and the
    # summary says it cannot be computed, while every table's Relative cell read "inf"
    shell = tmp_path / "slow-start-sh"  # its start-up (SHELL -c '') starts five shells, a command one
    shell.write_text('#!/bin/sh\n[ -n "$2" ] || { sh -c :; sh -c :; sh -c :; sh -c :; }\nexec sh "$@"\n')
    shell.chmod(0o755)
    md, adoc = tmp_path / "b.md", tmp_path / "b.adoc"
    flags = ["--runs", "1", "-S", shell, "--export-markdown", md, "--export-asciidoc", adoc]
    done, exported = bench(tmp_path, *flags, ":", "true", "exit 0")  # the fastest at 0 is enough
    assert done.returncode == 0, done.stderr
    assert min(r["mean"] for r in exported["results"]) == 0
    assert [other["ratio"] for other in exported["comparison"]["others"]] == [None, None]
    assert [line.rsplit("|", 2)[1].strip() for line in md.read_text().splitlines()[2:]] == ["—"] * 3
    assert "inf" not in md.read_text() and "inf" not in adoc.read_text()


def test_cpus_pins_every_run(tmp_path):
    if len(os.sched_getaffinity(0)) < 2 or 1 not in os.sched_getaffinity(0):
        pytest.skip("needs CPU 1 beside another")
    probe = "import os; print(sorted(os.sched_getaffinity(0)))"
    done, _ = bench(tmp_path, "--runs", "2", "--cpus", "1", "--show-output", "--", "python3", "-c", probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().count("[1]\n") == 2


def test_jsonl_dir_keeps_each_runs_stream(tmp_path):
    streams = tmp_path / "streams"
    done, _ = bench(tmp_path, "--runs", "2", "--warmup", "1", "--jsonl-dir", streams, "--", "true")
    assert done.returncode == 0, done.stderr
    names = sorted(os.listdir(streams))
    assert names == ["command-1-run-1.jsonl", "command-1-run-2.jsonl", "command-1-warmup-1.jsonl"]
    events = [e["event"] for e in read_events(streams / names[0])]
    assert events[0] == "run_started" and events[-1] == "runner_exit" and "root_exited" in events


def test_nothing_a_run_leaves_survives_into_the_next(tmp_path):
    marker = "301.123"  # an argument no other process has
    done, _ = bench(tmp_path, "--runs", "3", f"sleep {marker} & exit 0")
    assert done.returncode == 0, done.stderr
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        assert marker.encode() not in cmdline.split(b"\0"), "a run's background process outlived it"


@pytest.mark.parametrize(
    "args, message",
    [
        ([], b"no command to benchmark"),
        (["--command", "true"], b"JSON array"),
        (["--runs", "0", "--", "true"], b"--runs"),
        (["--cpus", "x", "--", "true"], b"--cpus"),
        (["--cpus", "3-1", "--", "true"], b"invalid value '3-1' for '--cpus': a range goes up"),
        (["--cpus", "0-99999999", "--", "true"], b"CPUs are numbered 0 to 8191"),
        (["--command", '["true", "\\ud800"]'], b"argument 1 holds a lone surrogate"),
        (["--setup", '["\\udc00"]', "--", "true"], b"invalid value for '--setup': argument 0 holds a lone surrogate"),
        (["--command", '["true", "a\\u0000"]'], b"invalid value for '--command': argument 1 holds a NUL character"),
        (["--command", "[" * 100_000], b"... (100000 characters)' for '--command': expected a JSON array of strings"),
        (["--command", '["true"]', "--", "true"], b"not both"),
        (
            ["--parameter-scan", "a", "0", "99999", "--parameter-scan", "b", "0", "99999", "--", "true"],
            b"the parameters' values make 10000000000 combinations (100000 x 100000), more than 100000",
        ),
        (
            ["--parameter-scan", "a", "1", "1000", "--parameter-list", "b", ",".join("x" * 101), "--", "true"],
            b"make 101000 combinations (1000 x 101), more than 100000",
        ),
        (["--command-name", "a", "--command-name", "b", "--", "true"], b"--command-name"),
    ],
)
def test_usage_errors(tmp_path, args, message):
    done = run_cli("bench", *args, cwd=tmp_path)
    assert done.returncode == 100 and message in done.stderr


def test_a_stop_signal_ends_the_benchmark(tmp_path):
    streams = tmp_path / "streams"
    bench_process = start_cli("bench", "--runs", "3", "--jsonl-dir", streams, "--", "sleep", "30", cwd=tmp_path)
    try:
        wait_for_event(streams / "command-1-run-1.jsonl", "run_started")
        bench_process.send_signal(signal.SIGTERM)
        _, stderr = bench_process.communicate(timeout=SAFETY_NET)
    finally:
        bench_process.kill()
    assert bench_process.returncode == 107, stderr
    assert b"stopped" in stderr


def test_a_hostile_command_name_reaches_the_terminal_as_text(tmp_path):
    done, exported = bench(tmp_path, "--runs", "2", "--command-name", "evil\x1b]0;title\x07\x1b[31m", "--", "true")
    assert done.returncode == 0, done.stderr
    assert b"\x1b" not in done.stdout and b"\x07" not in done.stdout
    assert "evil" in done.stdout.decode()
    assert exported["results"][0]["command"] == "evil\x1b]0;title\x07\x1b[31m"  # the export keeps it exactly
    failed, _ = bench(tmp_path, "--runs", "1", "--command-name", "bad\x1b[2J", "--", "false")
    assert failed.returncode == 118 and b"\x1b" not in failed.stderr


@pytest.mark.parametrize(
    "order, expected",
    [
        ("sequential", "setup a,run a,run a,cleanup a,setup b,run b,run b,cleanup b"),
        ("interleaved", "setup a,setup b,run a,run b,run a,run b,cleanup a,cleanup b"),
    ],
)
def test_setup_runs_and_cleanup_follow_the_order(tmp_path, order, expected):
    log = tmp_path / "log"

    def step(word: str) -> str:
        return json.dumps(["sh", "-c", f"echo {word} {{c}} >> {log}"])

    done, _ = bench(
        tmp_path, "--runs", "2", "--order", order, "--parameter-list", "c", "a,b",
        "--setup", step("setup"), "--cleanup", step("cleanup"), f"echo run {{c}} >> {log}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ",".join(log.read_text().splitlines()) == expected


def test_the_comparison_ranks_by_the_chosen_metric(tmp_path):
    """A long sleep uses little CPU; a short busy loop uses much: wall and CPU time disagree.
    The burn is a shell's loop (about 40 ms of CPU, no interpreter to start), the sleep 1 s: a
    loaded machine that gives the burn a tenth of a core still ends it first by wall."""
    burn = "i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done"
    commands = ["--command-name", "sleep", "--command-name", "burn"]
    commands += ["--command", '["sleep", "1"]', "--command", json.dumps(["sh", "-c", burn])]
    by_wall, wall = bench(tmp_path, "--runs", "3", *commands)
    by_cpu, cpu = bench(tmp_path, "--runs", "3", "--metric", "cpu", *commands)
    assert by_wall.returncode == 0 and by_cpu.returncode == 0, (by_wall.stderr, by_cpu.stderr)
    assert (wall["comparison"]["metric"], wall["comparison"]["fastest"]) == ("wall", "burn")
    assert (cpu["comparison"]["metric"], cpu["comparison"]["fastest"]) == ("cpu", "sleep")
    assert "Summary (by CPU time)" in by_cpu.stdout.decode()
    burned = cpu["results"][1]["cpu"]
    assert burned["min"] >= 0.02 and burned["mean"] >= burned["min"]


def test_commands_are_shell_commands_and_argvs_stay_shell_free(tmp_path):
    """hyperfine's form: each COMMAND runs through the shell (charged less its start-up);
    ``--command`` and ``-- PROGRAM`` stay shell-free."""
    done, exported = bench(tmp_path, "--runs", "1", "sleep 0.01", "--command", '["true"]', "echo {x}", "-L", "x", "a")
    assert done.returncode == 0, done.stderr
    assert [r["argv"] for r in exported["results"]] == [["sh", "-c", "sleep 0.01"], ["true"], ["sh", "-c", "echo a"]]
    assert exported["processkit"]["shell"] == "sh" and exported["processkit"]["shell_startup"]["runs"] == 50
    done, exported = bench(tmp_path, "--runs", "1", "--", "true")
    assert done.returncode == 0 and exported["processkit"]["shell_startup"] is None  # nothing to charge
    assert "Shell start-up" not in done.stdout.decode()


def test_steps_are_shell_strings_and_json_arrays_still_work(tmp_path):
    log = tmp_path / "log"
    done, _ = bench(
        tmp_path, "--runs", "1", "--prepare", "sync", "-s", f"sh -c 'echo setup >> {log}'",
        "-c", json.dumps(["sh", "-c", f"echo cleanup >> {log}"]), "-N", "true",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert log.read_text().split() == ["setup", "cleanup"]  # a -N benchmark splits its steps too


@pytest.mark.parametrize(
    "where, passes",
    [("null", True), ("pipe", False), ("./out.txt", False), ("inherit", False)],
)
def test_output_goes_where_asked(tmp_path, where, passes):
    """``--output``: the child's stdout is /dev/null, a pipe, the file, or the terminal's."""
    is_null = 'echo hello; test "$(readlink /proc/$$/fd/1)" = /dev/null'
    done, _ = bench(tmp_path, "--runs", "2", f"--output={where}", is_null)
    assert done.returncode == (0 if passes else 118), done.stderr
    if where == "./out.txt":
        assert (tmp_path / "out.txt").read_text() == "hello\n"  # emptied for each run
    if where == "inherit":
        assert b"hello" in done.stdout


def test_output_once_per_command(tmp_path):
    done, exported = bench(tmp_path, "--runs", "1", "--output=./a.txt", "--output=./b.txt", "echo a", "echo b")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "a.txt").read_text() == "a\n" and (tmp_path / "b.txt").read_text() == "b\n"
    done = run_cli("bench", "--output=null", "--output=pipe", "true", cwd=tmp_path)
    assert done.returncode == 100 and b"'--output' option has to be provided just once or N times" in done.stderr
    done = run_cli("bench", "--output=results", "true", cwd=tmp_path)
    assert done.returncode == 100 and b"'./results'" in done.stderr


def test_asciidoc_orgmode_and_markdown_tables(tmp_path):
    files = {kind: tmp_path / f"b.{kind}" for kind in ("markdown", "asciidoc", "orgmode")}
    flags = [item for kind, path in files.items() for item in (f"--export-{kind}", path)]
    done, _ = bench(tmp_path, "--runs", "3", "-N", *flags, "--time-unit", "millisecond", "sleep 0.01", "sleep 0.02")
    assert done.returncode == 0, done.stderr
    markdown = files["markdown"].read_text().splitlines()
    assert markdown[0] == "| Command | Mean [ms] | Min [ms] | Max [ms] | Relative |"
    # Rows keep the commands' order; the faster reads 1.00, the other a ratio with its spread
    # (which is faster is the machine's to say: a loaded host can delay the shorter sleep).
    row = r"\| `sleep 0\.0{}` \| [\d.]+ ± [\d.]+ \| [\d.]+ \| [\d.]+ \| (1\.00|[\d.]+ ± [\d.]+) \|"
    relative = [re.fullmatch(row.format(n), markdown[n + 1]) for n in (1, 2)]
    assert all(relative), markdown
    assert sorted(match.group(1) == "1.00" for match in relative) == [False, True], markdown
    assert files["asciidoc"].read_text().startswith('[cols="<,>,>,>,>"]\n|===\n| Command \n')
    assert files["orgmode"].read_text().splitlines()[1] == "|--+--+--+--+--|"


def test_exports_neutralise_hostile_names(tmp_path):
    """A name is never a spreadsheet formula or a terminal escape in the CSV, and a newline in
    it never puts raw HTML or rows outside the Markdown table."""
    table, md = tmp_path / "b.csv", tmp_path / "b.md"
    names = [
        "=cmd|' /C calc'!A0",
        "@SUM(1)\x1b[31m",
        "a\n<img src=x onerror=alert(1)>\n| x | y |",
        "\t=1+1",
        "\u200b=1+1",
    ]
    named = [item for name in names for item in ("--command-name", name)]
    done, _ = bench(tmp_path, "--runs", "1", *named, "--export-csv", table, "--export-markdown", md, *["true"] * 5)
    assert done.returncode == 0, done.stderr
    cells = [row["command"] for row in csv.DictReader(io.StringIO(table.read_text()))]
    assert cells[0] == "'=cmd|' /C calc'!A0" and cells[1] == "'@SUM(1) [31m"
    assert cells[3:] == ["' =1+1", "' =1+1"]  # a tab or format character first hides no formula
    assert "\x1b" not in table.read_text()
    from processkit.benchmark.exports import spreadsheet_cell

    assert spreadsheet_cell("-5") == "-5" and spreadsheet_cell("-5+cmd") == "'-5+cmd"  # a number stays one
    hidden = ["\r=1+1", "\x1b=1", "\u202e@SUM(A1)", "\x00+1", "\u200b\u200b-1+cmd"]
    assert [spreadsheet_cell(text) for text in hidden] == ["' =1+1", "' =1", "' @SUM(A1)", "' +1", "'  -1+cmd"]
    lines = md.read_text().splitlines()
    assert len(lines) == 7 and all(line.startswith("| ") or line.startswith("|:") for line in lines)
    assert "\\| x \\| y \\|" in lines[4]


def test_ignoring_failures_says_so(tmp_path):
    """A shell builtin's line is near the floor, but -N (no shell) cannot run ``exit``: not offered
    (the floor's warning itself rests on the measured mean: checked only where it is said)."""
    done, _ = bench(tmp_path, "--runs", "2", "-i", "exit 3")
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert "Warning: Ignoring non-zero exit code." in out and "Try -N" not in out, out
    done, _ = bench(tmp_path, "--runs", "2", "true")  # a program: -N runs it
    out = done.stdout.decode()
    if "'true' took less than 5 ms" in out:
        assert "'true' took less than 5 ms: the figures are near the measurement floor. Try -N (no shell)." in out


def test_no_shell_is_offered_by_the_words_bench_n_would_run(tmp_path):
    """-N is offered for a plain program's line split as -N splits it: a quoted metacharacter is
    the program's, an unquoted one (or a leading assignment, a glob, a builtin) needs the shell,
    and a comment's is no one's (read by ``words.scan``, the scanner -N splits by: a second
    scanner beside it read a comment's quote as a quote and its ``|`` as a pipe).
    Through the CLI where the floor's warning is said (a loaded machine may lift a mean over
    it), and through the printout's own judgement for every line."""
    from processkit.benchmark.printout import plain_invocation

    offered = ["echo 'a;b'", "grep -q 'a|b' /dev/null", "printf '%s' \"a>b\"", 'echo "\\$x" a\\;b', "true # a | b"]
    refused = ["FOO=1 true", "echo *", "echo ?", "echo ~", "true\ntrue", "read x", "type true", "command true"]
    refused += ['echo "$x"', "true # it's\ntrue"]  # a comment is no quote: the newline ends it
    assert [plain_invocation(line) for line in offered + refused] == [True] * 5 + [False] * 10
    done, _ = bench(tmp_path, "--runs", "2", "-i", *offered, *refused)
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    for line in offered + refused:
        shown = line.replace("\n", " ")  # the printout's name is on one line
        if f"'{shown}' took less than 5 ms" in out:
            hint = f"'{shown}' took less than 5 ms: the figures are near the measurement floor. Try -N (no shell)."
            assert (hint in out) == (line in offered), (line, out)


def test_shell_flags_are_hyperfines(tmp_path):
    done = run_cli("bench", "-N", "--shell", "bash", "true", cwd=tmp_path)
    assert done.returncode == 100 and b"-N and --shell" in done.stderr
    done = run_cli("bench", "-N", "echo 'unclosed", cwd=tmp_path)
    assert done.returncode == 100 and b"without a shell" in done.stderr
    done, exported = bench(tmp_path, "--runs", "1", "-S", "bash --norc", "echo $BASH_VERSION")
    assert done.returncode == 0, done.stderr
    assert exported["results"][0]["argv"][:3] == ["bash", "--norc", "-c"]


def test_the_api_takes_hyperfines_options(tmp_path):
    import processkit

    log = tmp_path / "log"
    result = processkit.bench(
        ["echo {v}", ["true"]],
        parameters={"v": ["a,b", "c"]},
        runs=1,
        order="sequential",
        shell="none",
        prepare=f"sh -c 'echo prepare >> {log}'",
        conclude=["sh", "-c", f"echo conclude >> {log}"],
        reference="sleep 0.01",
        output="null",
        ignore_failure=[3],
    )
    assert [r.command.name for r in result.results] == ["sleep 0.01", "echo a,b", "true", "echo c", "true"]
    assert result.results[1].command.argv == ("echo", "a,b")  # a comma in a value is escaped, not refused
    assert result.reference is result.results[0] and result.settings["ignore_failure"] == [3]
    assert log.read_text().split() == ["prepare", "conclude"] * 5
    assert result.settings["shell"] is None and result.settings["shell_startup"] is None


@pytest.mark.parametrize("style, drawn", [("full", True), ("basic", False), ("auto", False)])
def test_style_decides_the_progress_lines(tmp_path, style, drawn):
    """hyperfine's --style: ``full`` draws progress even off a terminal; ``none`` prints nothing."""
    done, _ = bench(tmp_path, "--runs", "2", f"--style={style}", "-N", "true")
    assert done.returncode == 0, done.stderr
    assert (b"\r\x1b[K" in done.stdout) is drawn and b"Benchmark 1: true" in done.stdout
    quiet, exported = bench(tmp_path, "--runs", "2", "--style=none", "-N", "true")
    assert quiet.returncode == 0 and quiet.stdout == b"" and len(exported["results"][0]["times"]) == 2


def test_parameter_values_may_start_with_a_hyphen(tmp_path):
    """hyperfine reads -P and -L values as values, a leading '-' included."""
    done, exported = bench(tmp_path, "--runs", "1", "-N", "-P", "n", "-1", "0", "-L", "x", "-a,-b", "true {n} {x}")
    assert done.returncode == 0, done.stderr
    assert [r["command"] for r in exported["results"]] == ["true -1 -a", "true 0 -a", "true -1 -b", "true 0 -b"]


def test_a_shell_that_cannot_start_fails_before_any_run(tmp_path):
    done = run_cli("bench", "--runs", "1", "-S", "no-such-shell-xyz", "true", cwd=tmp_path)
    assert done.returncode == 118
    assert b"could not measure the shell's start-up (no-such-shell-xyz -c ''): could not start" in done.stderr

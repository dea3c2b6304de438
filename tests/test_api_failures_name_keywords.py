"""What the benchmark's process itself finds (a run that failed, too few runs within the timeout, a
directory or file it cannot make, CPUs it cannot pin to, the baseline gate) reaches a
``processkit.bench`` caller naming the keyword it gave, and a ``bench`` user naming the flag;
so does a ``processkit.batch`` ``out`` that cannot be used."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import processkit
from conftest import run_cli
from processkit.benchmark.plan import Options
from processkit.benchmark.shortfall import shortfall
from processkit.errors import Failure
from processkit.grammar import KEYWORDS
from test_bench_session import Mock, run

# Sleeps past the timeout from its second run on: one run of three finishes.
LATER_RUNS_SLEEP = 'if [ -e "$0" ]; then exec sleep 30; fi; : > "$0"'


def failure_of(commands, **keywords) -> str:
    with pytest.raises(Failure) as raised:
        processkit.bench(commands, **keywords)
    message = raised.value.message
    assert "--" not in message, message
    return message


def test_too_few_finished_runs_name_the_keywords(tmp_path):
    mark = tmp_path / "ran"
    message = failure_of([["sh", "-c", LATER_RUNS_SLEEP, mark]], runs=3, timeout="300ms")
    assert "only 1 of 3 runs" in message and "within timeout=, fewer than runs=3" in message
    assert message.endswith("use ignore_failure=True to accept them")
    mark.unlink()
    message = failure_of([["sh", "-c", LATER_RUNS_SLEEP, mark]], min_runs=3, max_runs=3, timeout="300ms")
    assert "fewer than the 3 runs asked for (max_runs=3)" in message


def test_a_failing_run_names_the_keyword_that_accepts_it():
    message = failure_of([["sh", "-c", "exit 3"]], runs=2)
    assert "exited with 3 in its first timed run; use ignore_failure=True to benchmark it anyway" in message


def test_a_failing_runs_discarded_output_is_pointed_to(tmp_path):
    """A failing command's output was discarded and its failure said only its exit: hyperfine's
    words point to ``--show-output`` to see what went wrong; ours did not. Not where it was kept."""
    message = failure_of([["sh", "-c", "echo why >&2; exit 3"]], runs=2)
    assert message.endswith(
        "exited with 3 in its first timed run; use ignore_failure=True to benchmark it anyway, or show_output=True to see what it printed"
    )
    message = failure_of([["sh", "-c", "exit 3"]], runs=2, output=str(tmp_path / "kept.txt"))
    assert message.endswith("use ignore_failure=True to benchmark it anyway")
    done = run_cli("bench", "--runs", "2", "exit 3")
    assert b"benchmark it anyway, or --show-output to see what it printed" in done.stderr


@pytest.mark.parametrize("where", ["null", "pipe"])
def test_a_discarded_output_the_caller_chose_is_not_pointed_to_show_output(where):
    """``--output null`` (or pipe) conflicts with ``--show-output`` (a usage error): the pointer
    told a caller who chose to discard the output to give an option it cannot add."""
    message = failure_of([["sh", "-c", "exit 3"]], runs=2, output=where)
    assert message.endswith("use ignore_failure=True to benchmark it anyway"), message
    done = run_cli("bench", "--runs", "2", "--output", where, "exit 3")
    assert done.stderr.rstrip().endswith(b"use --ignore-failure to benchmark it anyway"), done.stderr


def test_what_the_bench_process_cannot_make_names_the_keyword(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    message = failure_of([["true"]], runs=1, jsonl_dir=blocker / "streams")
    assert message.startswith(f"cannot make jsonl_dir={blocker / 'streams'}: ")
    message = failure_of([["true"]], runs=1, output=str(blocker / "out"))
    assert message.startswith(f"cannot write output={blocker / 'out'}: ")
    message = failure_of([["true"]], runs=1, cpus=[8000])
    assert message.startswith("cannot pin to cpus=8000: ")


def test_the_baseline_gate_names_the_keyword(tmp_path):
    old = tmp_path / "old.json"
    times = [0.0001] * 5
    keys = ("mean", "stddev", "median", "user", "system", "min", "max")
    old.write_text(json.dumps({"results": [{"command": "sleep 0.05", **dict.fromkeys(keys, 0.0001), "times": times}]}))
    with pytest.raises(Failure) as raised:
        processkit.bench(["sleep 0.05"], runs=5, baseline=old, fail_if_slower=10)
    assert raised.value.code == 119 and "beyond fail_if_slower=10 %" in raised.value.message


def test_the_clis_messages_still_name_the_flags(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = run_cli("bench", "--runs", "1", "--jsonl-dir", blocker / "streams", "true")
    assert done.returncode == 111 and f"cannot make --jsonl-dir {blocker / 'streams'}: ".encode() in done.stderr
    done = run_cli("bench", "--runs", "1", "--output", blocker / "out", "true")
    assert f"cannot write --output {blocker / 'out'}: ".encode() in done.stderr
    done = run_cli("bench", "--runs", "1", "--cpus", "8000", "true")
    assert b"cannot pin to --cpus 8000: " in done.stderr
    done = run_cli("bench", "--runs", "2", "exit 3")
    assert b"use --ignore-failure to benchmark it anyway" in done.stderr


def test_a_sessions_shortfall_names_the_option_as_its_caller_does():
    every_other = lambda name, iteration, nth: "timeout" if nth % 2 else 10  # noqa: E731
    options = Options(runs=4, timeout_ms=100, named=KEYWORDS)
    failure = shortfall(run(["a"], options, Mock(every_other)), options)
    assert failure is not None and "within timeout=, fewer than runs=4; use ignore_failure=True" in failure.message


def test_a_batchs_out_that_cannot_be_used_names_the_keyword(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError) as raised:  # a public error, never the runner's internal Failure
        processkit.batch([{"args": ["true"]}], out=blocker / "out")
    assert not isinstance(raised.value, Failure)
    assert str(raised.value).startswith(f"cannot use out= {blocker / 'out'}: ")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"args": ["true"]}\n')
    done = run_cli("batch", manifest, "--out", blocker / "out")
    assert f"cannot use --out {blocker / 'out'}: ".encode() in done.stderr


def test_a_runs_setup_failure_names_no_flag_to_the_api_caller(tmp_path):
    """A setup failure is said in the reference's words (``could not set up output capture in
    `DIR`: ...``), which name what failed, not a flag: the API's caller meets no CLI flag."""
    blocked = tmp_path / "file"
    blocked.write_text("")
    jsonl = tmp_path / "events.jsonl"
    result = processkit.run(["true"], capture_dir=str(blocked / "capture"), jsonl=str(jsonl))
    assert result.returncode == 111
    assert result.message.startswith(f"could not set up output capture in `{blocked / 'capture'}`: "), result.message
    assert "--" not in result.message
    result = processkit.run(["true"], env_file=[str(tmp_path / "absent")])
    said = f"could not read environment file `{tmp_path / 'absent'}`: No such file or directory (os error 2)"
    assert result.message == said
    with pytest.raises(subprocess.CalledProcessError) as raised:
        processkit.run(["true"], pty=True, stdin_file=str(tmp_path / "absent"), check=True)
    assert "--" not in str(raised.value)
    proc = run_cli("run", "--jsonl", tmp_path / "cli.jsonl", "--capture-dir", blocked / "capture", "--", "true")
    assert f"could not set up output capture in `{blocked / 'capture'}`" in proc.stderr.decode()


def test_a_batchs_reserved_id_and_unreadable_summary_name_no_flag(tmp_path):
    """The manifest's and the resumed summary's complaints are worded for both callers."""
    with pytest.raises(ValueError) as raised:
        processkit.batch([{"args": ["true"], "id": "summary.jsonl"}], out=tmp_path / "a")
    assert "is reserved" in str(raised.value) and "--" not in str(raised.value)
    out = tmp_path / "b"
    out.mkdir()
    os.mkfifo(out / "summary.jsonl")
    with pytest.raises(RuntimeError) as failed:
        processkit.batch([{"args": ["true"]}], out=out, resume=True)
    message = str(failed.value)
    assert message.startswith("the batch could not run: cannot resume the batch: ") and "--" not in message

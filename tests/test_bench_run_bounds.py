"""The run-count options and hyperfine's hidden ones as a hyperfine user types them (its
options.rs and clap): ``--runs`` with either bound is refused rather than one of them dropped
unsaid; a ``--max-runs`` below the default minimum (10) lowers that implicit minimum; the
hidden ``--min-benchmarking-time``/``--debug-mode`` are refused in one line, but only as flags,
never as a ``-L``/``-P`` value (clap's allow_hyphen_values)."""

from __future__ import annotations

import json

import pytest

import processkit
from conftest import run_cli


@pytest.mark.parametrize("bound", ["--min-runs", "--max-runs"])
def test_runs_with_a_bound_is_refused_as_hyperfine_does(tmp_path, bound):
    done = run_cli("bench", "-N", "--style=none", "--runs", "3", bound, "2", "true", cwd=tmp_path)
    assert done.returncode == 100, done.stderr
    assert f"the argument '--runs' cannot be used with '{bound}'" in done.stderr.decode()


@pytest.mark.parametrize("bound", ["min_runs", "max_runs"])
def test_the_api_refuses_runs_with_a_bound_by_keyword(bound):
    with pytest.raises(ValueError, match=f"the argument 'runs=' cannot be used with '{bound}='"):
        processkit.bench([["true"]], runs=3, **{bound: 2})


def test_a_max_runs_below_the_default_minimum_lowers_it(tmp_path):
    out = tmp_path / "b.json"
    done = run_cli("bench", "-N", "--style=none", "--max-runs", "3", "--export-json", out, "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(out.read_text())["results"][0]["times"]) == 3
    given = run_cli("bench", "-N", "--style=none", "--min-runs", "5", "--max-runs", "3", "true", cwd=tmp_path)
    assert given.returncode == 100  # an explicit minimum above the maximum is still refused, as hyperfine's
    assert "'--max-runs' (3) cannot be below '--min-runs' (5)" in given.stderr.decode()


def test_too_few_finished_runs_name_the_max_runs_that_set_the_minimum(tmp_path):
    """With --max-runs alone the minimum is its count: the failure names the flag given."""
    second_sleeps = "if [ -e done ]; then :; elif [ -e first ]; then touch done; exec sleep 30; else touch first; fi"
    done = run_cli("bench", "--style=none", "-M", "3", "--timeout", "5s", second_sleeps, cwd=tmp_path)
    assert done.returncode == 118, done.stderr
    said = done.stderr.decode()
    assert "only 2 of 3 runs" in said and "fewer than the 3 runs asked for (--max-runs 3);" in said, said
    assert "--min-runs" not in said


@pytest.mark.parametrize(("flag", "pointer"), [("--min-benchmarking-time", "--min-time"), ("--debug-mode", "measured")])
def test_hyperfines_hidden_flags_are_refused_with_a_pointer(tmp_path, flag, pointer):
    done = run_cli("bench", "-N", "--runs", "1", flag, *(["1"] if flag != "--debug-mode" else []), "true", cwd=tmp_path)
    assert done.returncode == 100
    said = done.stderr.decode().splitlines()
    assert len(said) == 1 and flag in said[0] and pointer in said[0], said  # one line, not argparse's usage


def test_a_hidden_flag_given_as_a_parameter_value_is_run(tmp_path):
    out = tmp_path / "b.json"
    done = run_cli("bench", "-N", "-r", "1", "-L", "f", "--debug-mode", "--export-json", out, "echo {f}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["results"][0]["parameters"] == {"f": "--debug-mode"}


def test_min_time_holds_whole_runs_as_hyperfines_count(tmp_path):
    """hyperfine runs as many as ``--min-time`` holds, rounded down (``runs_in_min_time``): a run of
    0.55 s and its set-up fills 1 s once, where ``bench`` once rounded up to 2 (more than the time
    asked for); 0.45 s of room for the set-up and teardown keeps a busy host from adding a run."""
    out = tmp_path / "b.json"
    done = run_cli(
        "bench", "-N", "--min-time", "1s", "--min-runs", "1", "--style", "basic", "--export-json", out,
        "sleep 0.55", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(json.loads(out.read_text())["results"][0]["times"]) == 1

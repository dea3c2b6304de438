"""A gate given too few runs to test. Mann-Whitney U on 3 runs against 3 cannot reach p < 0.05
whatever the untied times (every run slower than every one of the baseline's: exactly 0.1), so a
command twice as slow in every run read ``passed: no significant change: 96.3 % slower ...``
(exit 0), as if the test had found nothing. It is ``inconclusive`` now, saying why and how many
runs it would take (``benchmark/gate.py``, ``stats.best_p``)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


def untied_baseline(tmp_path, runs: int):
    """A hyperfine export of ``runs`` untied runs of about a millisecond each."""
    times = [0.001 * (1 + index / 100) for index in range(runs)]
    result = {"command": "sleep 0.05", "mean": sum(times) / runs, "stddev": 0.00001, "median": times[runs // 2]}
    result.update(min=times[0], max=times[-1], times=times, exit_codes=[0] * runs)
    path = tmp_path / "hf.json"
    path.write_text(json.dumps({"results": [result]}))
    return path


def _gated(tmp_path, runs: int | list[str], baseline_runs: int):
    out = tmp_path / "out.json"
    counted = ["--runs", str(runs)] if isinstance(runs, int) else runs
    done = run_cli(
        "bench", "-N", *counted, "--baseline", untied_baseline(tmp_path, baseline_runs),
        "--fail-if-slower", "5", "sleep 0.05", "--export-json", out, cwd=tmp_path,
    )  # fmt: skip
    (decided,) = json.loads(out.read_text())["gate"]["commands"]
    return done, decided


def test_a_slowdown_too_few_runs_can_never_show_is_inconclusive_not_passed(tmp_path):
    done, decided = _gated(tmp_path, 3, 3)
    assert done.returncode == 0, done.stderr
    assert decided["outcome"] == "inconclusive", decided
    assert decided["change_percent"] > 1000, decided
    assert "but 3 runs against the baseline's 3 are too few to show it significant" in decided["reason"], decided
    assert "give --runs 5 or more" in decided["reason"], decided


def test_a_single_run_is_said_as_one(tmp_path):
    done, decided = _gated(tmp_path, 1, 3)
    assert (done.returncode, decided["outcome"]) == (0, "inconclusive"), decided
    assert "but 1 run against the baseline's 3 is too few to show it significant" in decided["reason"], decided


def test_the_api_is_told_the_runs_keyword_not_the_flag(tmp_path):
    """``processkit.bench`` names its keywords in the gate's words (``fail_if_slower=5``); the runs
    it would take were named ``--runs`` beside them."""
    import processkit

    result = processkit.bench(
        ["sleep 0.05"], runs=3, baseline=str(untied_baseline(tmp_path, 3)), fail_if_slower=5, shell="none"
    )
    (decided,) = result.gate["commands"]
    assert decided["outcome"] == "inconclusive", decided
    assert "give runs=5 or more" in decided["reason"] and "--runs" not in decided["reason"], decided


@pytest.mark.parametrize(
    ("given", "advised"),
    [
        (["--min-runs", "3", "--max-runs", "3"], ["--min-runs", "5", "--max-runs", "5"]),
        (["--max-runs", "3"], ["--min-runs", "5", "--max-runs", "5"]),
        (["--min-runs", "3", "--max-runs", "8", "--min-time", "0"], ["--min-runs", "5"]),
    ],
)
def test_the_advice_is_one_the_given_bounds_take(tmp_path, given, advised):
    """``--runs`` cannot be used with ``--min-runs`` or ``--max-runs``: a user bounding the run
    count was told ``give --runs 5 or more``, and following it was a usage error. The advice
    names the bounds now, and the benchmark it asks for runs and is judged (passed, or regressed:
    5 runs against 3 can show it)."""
    done, decided = _gated(tmp_path, given, 3)
    assert (done.returncode, decided["outcome"]) == (0, "inconclusive"), decided
    assert (
        "give " + " and ".join(f"{flag} {count}" for flag, count in zip(advised[::2], advised[1::2])) + " or more"
        in decided["reason"]
    ), decided
    followed = [arg for arg in given if arg not in ("--min-time", "0")]
    for flag, count in zip(advised[::2], advised[1::2]):
        if flag in followed:
            followed[followed.index(flag) + 1] = count
        else:
            followed += [flag, count]
    done, decided = _gated(tmp_path, followed, 3)
    assert done.returncode in (0, 119), done.stderr  # judged (119: regressed), never 100 (usage)
    assert "too few to show it significant" not in decided["reason"], decided

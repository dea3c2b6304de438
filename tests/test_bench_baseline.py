"""``bench --baseline FILE`` and ``--fail-if-slower PCT``: each command against an earlier export
(ours or hyperfine's), in the terminal, the exports and the page; a significant slowdown beyond
PCT fails the benchmark with its own code (119), a CI gate. Baselines are crafted so that the
verdict cannot depend on this host's load: far faster or far slower than any real run."""

from __future__ import annotations

import json

import pytest

import processkit
from conftest import run_cli
from processkit.benchmark import baseline
from processkit.benchmark.stats import summarize
from processkit.errors import Failure

KEYS = ("mean", "stddev", "median", "user", "system", "min", "max")


def hyperfine_baseline(path, commands):
    results = [{"command": name, **dict.fromkeys(KEYS, times[0]), "times": times} for name, times in commands]
    path.write_text(json.dumps({"results": results}))
    return path


def bench(tmp_path, *args):
    return run_cli("bench", "--runs", "5", "--export-json", tmp_path / "new.json", *args, timeout=120)


def test_a_slowdown_beyond_the_threshold_fails_the_benchmark_with_119(tmp_path):
    """Matched by command text against hyperfine's export; the exports are still written."""
    old = hyperfine_baseline(tmp_path / "old.json", [("sleep 0.05", [0.001, 0.0011, 0.0012, 0.001, 0.0011])])
    done = bench(tmp_path, "-n", "nap", "sleep 0.05", "--baseline", old, "--fail-if-slower", "10",
                 "--export-markdown", tmp_path / "new.md")  # fmt: skip
    assert done.returncode == 119, done.stderr
    stderr = done.stderr.decode()
    # each percentage names the figure it rests on, one way: the block's ratio of the means, the
    # gate's mean wall time (a hyperfine baseline holds no CPU time; busy or not, far beyond load)
    assert stderr.startswith("processkit-cli: 'nap' is ") and "% slower than the baseline" in stderr
    assert f"slower than the baseline {old} by the mean wall time" in stderr
    assert "beyond --fail-if-slower 10 %" in stderr
    stdout = done.stdout.decode()
    assert f"Against the baseline {old}" in stdout and "'nap': " in stdout and "% slower by the mean, " in stdout
    exported = json.loads((tmp_path / "new.json").read_text())
    (entry,) = exported["baseline"]["commands"]
    assert entry["verdict"] == "slower" and entry["baseline_command"] == "sleep 0.05" and entry["ratio"] > 10
    assert entry["p_value"] < 0.05 and entry["ratio_stddev"] > 0
    table = (tmp_path / "new.md").read_text().splitlines()
    assert table[0].endswith("| vs baseline |") and table[2].endswith("(slower) |")


def test_a_faster_or_unmatched_command_passes_the_gate(tmp_path):
    old = hyperfine_baseline(tmp_path / "old.json", [("slow", [5.0, 5.1, 5.2, 5.0, 5.1])])
    done = bench(tmp_path, "-n", "slow", "true", "sleep 0.001", "--baseline", old,
                 "--fail-if-slower", "0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    verdicts = [e["verdict"] for e in json.loads((tmp_path / "new.json").read_text())["baseline"]["commands"]]
    assert verdicts == ["faster", "not in the baseline"]


def test_our_own_export_is_a_baseline_and_its_page_shows_the_verdicts(tmp_path):
    first = run_cli("bench", "--runs", "5", "--export-json", tmp_path / "old.json", "--", "true")
    assert first.returncode == 0, first.stderr
    done = bench(tmp_path, "--baseline", tmp_path / "old.json", "--", "true")
    assert done.returncode == 0, done.stderr  # no gate: a verdict, never a failure
    made = run_cli("report", tmp_path / "new.json", "-o", tmp_path / "page.html")
    assert made.returncode == 0, made.stderr
    page = (tmp_path / "page.html").read_text()
    assert 'id="baseline"' in page and "old.json" in page
    assert json.loads((tmp_path / "new.json").read_text())["baseline"]["commands"][0]["baseline_command"] == "true"


@pytest.mark.parametrize(
    "args, code, said",
    [
        (["--fail-if-slower", "5"], 100, "the argument '--fail-if-slower' requires '--baseline'"),
        (["--baseline", "{old}", "--fail-if-slower", "fast"], 100, "expected a percentage"),
        (["--baseline", "{old}", "--fail-if-slower", "1_0"], 100, "expected a percentage"),  # float() takes it
        (["--baseline", "{old}", "--fail-if-slower", "-3"], 100, "expected a percentage"),
        (["--baseline", "{missing}"], 111, "cannot read the benchmark"),
        (["--baseline", "{broken}"], 114, "results[0].times is a string"),
        (["--baseline", "{empty}"], 114, "holds no command with a finished run"),
    ],
)
def test_a_wrong_baseline_is_refused_before_any_run(tmp_path, args, code, said):
    paths = {
        "old": hyperfine_baseline(tmp_path / "old.json", [("a", [0.1, 0.2])]),
        "missing": tmp_path / "missing.json",
        "broken": tmp_path / "broken.json",
        "empty": hyperfine_baseline(tmp_path / "empty.json", []),
    }
    paths["broken"].write_text(json.dumps({"results": [{"command": "a", "times": "0.1"}]}))
    marker = tmp_path / "ran"
    argv = [arg.format(**paths) for arg in args]
    done = run_cli("bench", "--runs", "1", *argv, f"touch {marker}")
    assert done.returncode == code and said in done.stderr.decode(), done.stderr
    assert not marker.exists()


def test_the_api_takes_a_baseline_and_returns_the_comparison(tmp_path):
    old = hyperfine_baseline(tmp_path / "old.json", [("sleep 0.02", [0.001] * 5)])
    result = processkit.bench(["sleep 0.02"], runs=5, baseline=old)
    (entry,) = result.baseline.commands
    assert entry.verdict == baseline.SLOWER and entry.ratio > 5 and result.baseline.file == str(old)
    assert result.baseline.regressions(50) == [entry]
    with pytest.raises(Failure) as raised:
        processkit.bench(["sleep 0.02"], runs=5, baseline=old, fail_if_slower=50)
    assert raised.value.code == 119


def samples(name: str, times: list[float]):
    return (name, name, summarize(times, [], [], []), times, (0, len(times)))


def test_the_verdict_needs_significance_and_matches_by_name_then_text():
    same = [0.010, 0.012, 0.011, 0.013, 0.009, 0.010]
    report = baseline.against(
        [samples("x", same), samples("y", [t * 2 for t in same]), samples("z", [0.5, 0.6]), samples("w", [0.1])],
        [("y", "q", *samples("y", same)[2:]), ("other", "x", *samples("o", same)[2:]), samples("z", [0.5, 0.51])],
        "old.json",
        "wall",
    )
    by = {entry.command: entry for entry in report.commands}
    assert by["x"].baseline_command == "other"  # "x" is no baseline name: matched by its text
    assert by["y"].baseline_command == "y" and by["y"].verdict == baseline.SLOWER
    assert by["z"].verdict == baseline.UNCHANGED  # two runs each: never significant
    assert by["w"].verdict == baseline.UNMATCHED
    assert by["x"].verdict == baseline.UNCHANGED and report.regressions(0) == [by["y"]]
    assert report.regressions(150) == []  # 100 % slower: within a 150 % gate


def test_probe_lists_the_baseline_flags_and_the_gate():
    report = json.loads(run_cli("probe", "--json").stdout)
    assert {"bench:--baseline", "bench:--fail-if-slower", "bench:baseline-gate"} <= set(report["surface"])
    assert report["exit_code_band"] == {"start": 100, "end": 119}
    helped = run_cli("--help").stdout.decode()
    assert "119  bench_regressed" in helped

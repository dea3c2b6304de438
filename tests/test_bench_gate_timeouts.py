"""``--fail-if-slower`` and runs ended by ``--timeout``: they are left out of every figure, so a
command that now hangs in one run of five read as fast as its baseline by the four that finished,
and the gate passed it. The gate now counts them first (``gate._hung``): a larger share of
timed-out runs than the baseline's fails (119), by at least the timeout over the baseline's
median, and says so."""

from __future__ import annotations

import html
import json
import shutil
import subprocess

import pytest

from conftest import run_cli

# Run 1 of the five hangs once ``hang`` exists; every other run is a short sleep.
WORK = 'if [ -e hang ] && [ "$HYPERFINE_ITERATION" = 1 ]; then exec sleep 3600; fi\nexec sleep 0.02\n'


def bench(tmp_path, *extra, runs=5):
    return run_cli(
        "bench", "-N", "--runs", str(runs), "-n", "work", "sh work.sh", "--export-json", tmp_path / "out.json",
        *extra, cwd=tmp_path, timeout=120,
    )  # fmt: skip


def test_a_run_that_hangs_past_the_timeout_fails_the_gate(tmp_path):
    (tmp_path / "work.sh").write_text(WORK)
    first = bench(tmp_path)
    assert first.returncode == 0, first.stderr
    (tmp_path / "out.json").rename(tmp_path / "base.json")
    (tmp_path / "hang").touch()

    gated = bench(
        tmp_path, "--timeout", "3s", "--ignore-failure", "--baseline", tmp_path / "base.json", "--fail-if-slower", "5"
    )
    exported = json.loads((tmp_path / "out.json").read_text())
    assert exported["results"][0]["timed_out"] == 1  # the hang happened, and was left out
    (decided,) = exported["gate"]["commands"]
    assert gated.returncode == 119, (gated.stdout, gated.stderr, decided)
    assert decided["outcome"] == "regressed" and decided["figure"] == "wall", decided
    assert decided["change_percent"] > 1000, decided  # 3 s against a ~20 ms median, at least
    stderr = gated.stderr.decode()
    assert "'work' is " in stderr and "1 of 5 runs reached the timeout (3 s), the baseline's 0 of 5" in stderr
    assert decided["reason"].startswith("by the timed-out runs' wall time at least: 1 of 5 runs"), decided
    assert "bench:timeout-aware-gate" in json.loads(run_cli("probe", "--json").stdout)["surface"]


def test_the_comparison_says_the_timed_out_runs_its_verdict_leaves_out(tmp_path):
    """Without a gate the comparison's verdict is over the finished runs alone ("no significant
    change"); the terminal, the Markdown export and ``report OLD NEW`` now say beside it how many
    runs timed out, against the baseline's."""
    (tmp_path / "work.sh").write_text(WORK)
    assert bench(tmp_path).returncode == 0
    (tmp_path / "out.json").rename(tmp_path / "base.json")
    (tmp_path / "hang").touch()
    compared = bench(
        tmp_path, "--timeout", "3s", "--ignore-failure", "--baseline", tmp_path / "base.json",
        "--export-markdown", tmp_path / "out.md",
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    said = "1 of 5 runs timed out, in none of these figures (the baseline's 0 of 5)"
    assert said in compared.stdout.decode()
    assert said in (tmp_path / "out.md").read_text()
    (entry,) = json.loads((tmp_path / "out.json").read_text())["baseline"]["commands"]
    assert entry["timed_out"] == [1, 5, 0, 5]
    page = run_cli("report", tmp_path / "base.json", tmp_path / "out.json", "-o", tmp_path / "page.html")
    assert page.returncode == 0, page.stderr
    assert html.unescape((tmp_path / "page.html").read_text()).count(said) == 1
    again = run_cli("report", tmp_path / "out.json", "-o", tmp_path / "again.html")  # its own comparison, read back
    assert again.returncode == 0 and said in html.unescape((tmp_path / "again.html").read_text()), again.stderr


def test_a_cpu_regression_fails_though_a_busy_machine_excuses_the_hang(tmp_path):
    """The timed-out run is inconclusive on a busy machine (the load can explain a timeout ten
    times the baseline's median), but the command also does twice the work by CPU time, which the
    load does not move: the gate still fails it (119) by that figure. It used to stop at the
    timeouts' "inconclusive" and exit 0. The baseline is crafted: its host recorded as busy, its
    CPU time (and instructions, where counted) halved, its times set so the median is a tenth of
    the timeout."""
    spin = 'i=0; while [ "$i" -lt 20000 ]; do i=$((i+1)); done\n'
    (tmp_path / "work.sh").write_text(WORK.replace("exec sleep 0.02\n", spin))
    assert bench(tmp_path, runs=8).returncode == 0
    base = json.loads((tmp_path / "out.json").read_text())
    base["processkit"]["host_load"]["others_cpu_share"] = 0.95  # as a busy CI runner's would read
    (record,) = base["results"]
    record["times"] = [0.3] * len(record["times"])  # the timeout (3 s) is 900 % over: within 1900 %
    for key in ("user_times", "system_times", "cpu_times"):
        record[key] = [value / 2 for value in record[key]]
    for name, counts in (record.get("counters") or {}).items():
        if counts is not None:
            record["counters"][name] = [count // 2 for count in counts]
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "hang").touch()

    gated = bench(
        tmp_path, "--timeout", "3s", "--ignore-failure", "--baseline", tmp_path / "base.json",
        "--fail-if-slower", "5", runs=8,
    )  # fmt: skip
    (decided,) = json.loads((tmp_path / "out.json").read_text())["gate"]["commands"]
    assert gated.returncode == 119, (gated.stderr, decided)
    assert decided["outcome"] == "regressed" and decided["figure"] in ("cpu", "instructions"), decided


# Its 2nd run (a counter file) takes 1.2 s, every time, before and after: nothing changed.
SLOW_SECOND = (
    'n=$(($(cat count 2>/dev/null || echo 0) + 1)); echo "$n" > count\n'
    'if [ "$n" = 2 ]; then exec sleep 1.2; fi\nexec sleep 0.02\n'
)


@pytest.mark.parametrize("tool", ["processkit", "hyperfine"])
def test_a_baseline_run_as_long_as_the_timeout_counts_as_timed_out(tmp_path, tool):
    """A baseline measured without ``--timeout`` (ours without it, or hyperfine's) holds a run as
    long as the new timeout as a finished run: it counted 0 timed out, so the unchanged command's
    2nd run, ended at 600 ms now, failed the gate (119, "2477 % slower"). Such a run now counts as
    timed out on the baseline's side, in the gate and in the comparison."""
    if tool == "hyperfine" and shutil.which("hyperfine") is None:
        pytest.skip("hyperfine is not installed")
    (tmp_path / "work.sh").write_text(SLOW_SECOND)
    base = tmp_path / "base.json"
    if tool == "hyperfine":
        made = subprocess.run(
            ["hyperfine", "-N", "--runs", "5", "-n", "work", "sh work.sh", "--export-json", base],
            cwd=tmp_path, capture_output=True, timeout=120,
        )  # fmt: skip
    else:
        made = bench(tmp_path)
        (tmp_path / "out.json").rename(base)
    assert made.returncode == 0, made.stderr
    assert max(json.loads(base.read_text())["results"][0]["times"]) >= 0.6  # the long run, finished
    (tmp_path / "count").unlink()

    gated = bench(tmp_path, "--timeout", "600ms", "--ignore-failure", "--baseline", base, "--fail-if-slower", "5")
    exported = json.loads((tmp_path / "out.json").read_text())
    assert exported["results"][0]["timed_out"] == 1  # the same run, ended now
    (decided,) = exported["gate"]["commands"]
    assert gated.returncode != 119, (gated.stderr, decided)
    # on a busy machine it was "inconclusive" by the timeout, not 119: never by the timeouts now
    assert "reached the timeout" not in decided["reason"], decided
    (entry,) = exported["baseline"]["commands"]
    assert "timed_out" not in entry, entry  # no larger share than the baseline's: nothing to say
    assert "runs timed out" not in gated.stdout.decode()
    page = run_cli("report", base, tmp_path / "out.json", "-o", tmp_path / "page.html")
    assert page.returncode == 0 and "runs timed out" not in (tmp_path / "page.html").read_text(), page.stderr

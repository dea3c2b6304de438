"""``--fail-if-slower`` and runs ended by ``--timeout``: they are left out of every figure, so a
command that now hangs in one run of five read as fast as its baseline by the four that finished,
and the gate passed it. The gate now counts them first (``gate._hung``): a larger share of
timed-out runs than the baseline's fails (119), by at least the timeout over the baseline's
median, and says so."""

from __future__ import annotations

import html
import json

from conftest import run_cli

# Run 1 of the five hangs once ``hang`` exists; every other run is a short sleep.
WORK = 'if [ -e hang ] && [ "$HYPERFINE_ITERATION" = 1 ]; then exec sleep 3600; fi\nexec sleep 0.02\n'


def bench(tmp_path, *extra):
    return run_cli(
        "bench", "-N", "--runs", "5", "-n", "work", "sh work.sh", "--export-json", tmp_path / "out.json",
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

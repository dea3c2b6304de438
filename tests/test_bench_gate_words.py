"""A passing gate's change says which way it went and where it stands against the threshold: the
block read ``passed: no significant change by the mean wall time, 3.7 %`` (slower? faster?)."""

from __future__ import annotations

import json
import re

from conftest import run_cli
from test_bench_report import hyperfine_export

from processkit.text import quoted


def _gate_line(tmp_path, baseline_seconds: float, threshold: str) -> tuple[str, dict, str]:
    """The gate's line for ``true`` against a hyperfine baseline of three runs of
    ``baseline_seconds`` each, the export's gate (its figures as the terminal's), and stdout."""
    baseline = hyperfine_export(tmp_path / f"base-{baseline_seconds}.json", [("true", [baseline_seconds] * 3)])
    export = tmp_path / "out.json"
    proc = run_cli(
        "bench", "-N", "--runs", "3", "--style", "basic", "--baseline", baseline, "--fail-if-slower", threshold,
        "--export-json", export, "true",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    said = [line.strip() for line in proc.stdout.decode().splitlines() if line.strip().startswith("'true': ")]
    gate = json.loads(export.read_text())["gate"]["commands"][0]
    return said[-1], gate, proc.stdout.decode()


def test_a_passing_gate_says_faster_or_slower_and_within_the_threshold(tmp_path):
    faster, gate, _ = _gate_line(tmp_path, 10.0, "5")  # `true` against runs of 10 s: ~100 % faster
    assert gate["outcome"] == "passed" and gate["change_percent"] < 0, gate
    assert re.match(r"'true': passed: (no significant change: )?\d+\.\d % faster by the mean wall time \(", faster)
    assert gate["reason"] in faster
    slower, gate, shown = _gate_line(tmp_path, 1e-4, "1000000")  # against runs of 0.1 ms: far slower, under the bar
    assert gate["outcome"] == "passed" and gate["change_percent"] > 0, gate
    pattern = r"'true': passed: (no significant change: )?\d+\.\d % slower by the mean wall time, within --fail-if-slower 1000000 % \("
    assert re.match(pattern, slower), slower  # the threshold as given, not 1e+06
    assert "Gate (slower by more than 1000000 % fails)" in shown


def test_a_name_holding_quotes_is_quoted_once(tmp_path):
    """An argv command's name is its words quoted as a shell reads them back (``sh -c 'echo a  b'``);
    the gate's, the baseline's and the warnings' lines put it in double quotes, not in single quotes
    around its own (``'sh -c 'echo a  b''``, which reads as two quoted strings)."""
    name = "sh -c 'echo a  b'"
    baseline = hyperfine_export(tmp_path / "base.json", [(name, [10.0] * 3)])
    proc = run_cli(
        "bench", "--runs", "3", "--style", "basic", "--baseline", baseline, "--fail-if-slower", "5",
        "--command", '["sh", "-c", "echo a  b"]', cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout.decode()
    block = shown[shown.index("Gate (") :].splitlines()[1].strip()
    assert block.startswith(f'"{name}": passed: '), block
    against = shown[shown.index("Against the baseline") :].splitlines()[1].strip()
    assert against.startswith(f'"{name}": '), against
    assert f'Warning: "{name}" took less than 5 ms' in shown
    assert f"'{name}'" not in shown + proc.stderr.decode()


def test_each_name_reads_back_as_one_quoted_string():
    """Each form of ``text.quoted``: a name ending in a backslash went into plain quotes, where it
    read as an escaped closing quote (``'x\\'``, ``"a'\\"``); it is escaped now."""
    assert quoted("make test") == "'make test'"
    assert quoted("sh -c 'echo a  b'") == "\"sh -c 'echo a  b'\""
    assert quoted("a 'b' \"c\"") == "'a \\'b\\' \"c\"'"
    assert quoted("x\\") == "'x\\\\'"
    assert quoted("a'\\") == "'a\\'\\\\'"
    assert quoted("a\\b") == "'a\\b'"

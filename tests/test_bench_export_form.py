"""``bench``'s exports written as hyperfine writes them (sharkdp/hyperfine ``src/export/csv.rs``
and ``src/benchmark/benchmark_result.rs``, read, 1.15 to its main branch): the CSV's figures in
Rust's ``f64`` display (``0``, ``1``, ``0.00005``; they read ``0.0``, ``1.0``, ``5e-05``), and
the JSON's ``parameters`` by name (a ``BTreeMap``; they came in the order given)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import run_cli
from processkit.benchmark import BenchResult, Command, CommandResult, TimedRun, exports
from processkit.benchmark.stats import Summary


def _result(name: str, figures: tuple, **parameters) -> CommandResult:
    mean, stddev, user, system, low, high = figures
    result = CommandResult(
        Command(name, name, (name,), dict(parameters)), [TimedRun(0, mean, 0.0, 0.0, None, 0, False)]
    )
    result.summary = Summary(3, mean, stddev, mean, low, high, user, system, None, None)
    return result


def test_csv_is_hyperfines_text():
    """hyperfine's ``test_csv``, its snapshot compared as text."""
    result = BenchResult(
        [
            _result("command_a", (1.0, 2.0, 3.0, 4.0, 5.0, 6.0), foo="one", bar="two"),
            _result("command_b", (11.0, 12.0, 13.0, 14.0, 15.0, 16.5), foo="one", bar="seven"),
        ],
        {"metric": "wall"},
    )
    assert exports.to_csv(result) == (
        "command,mean,stddev,median,user,system,min,max,parameter_bar,parameter_foo\n"
        "command_a,1,2,1,3,4,5,6,two,one\n"
        "command_b,11,12,11,13,14,15,16.5,seven,one\n"
    )


def test_one_run_and_a_short_one():
    """A single run's standard deviation is hyperfine's ``unwrap_or(0.0)``, written ``0``; a
    figure under 0.1 ms has no exponent."""
    result = BenchResult([_result("x", (5e-05, None, 0.0007639999999999999, 0.0, 5e-05, 5e-05))], {"metric": "wall"})
    assert exports.to_csv(result).splitlines()[1] == "x,0.00005,0,0.00005,0.0007639999999999999,0,0.00005,0.00005"


def test_the_json_parameters_are_by_name(tmp_path):
    json_file, csv_file = tmp_path / "b.json", tmp_path / "b.csv"
    args = ["-N", "--runs", "1", "-L", "zz", "1", "-L", "aa", "x", "echo {zz} {aa}"]
    done = run_cli("bench", *args, "--export-json", json_file, "--export-csv", csv_file, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    (record,) = json.loads(json_file.read_text())["results"]
    assert list(record["parameters"].items()) == [("aa", "x"), ("zz", "1")]
    header, row = csv_file.read_text().splitlines()
    assert header.endswith(",parameter_aa,parameter_zz") and row.split(",")[2] == "0"
    if shutil.which("hyperfine") is None:
        pytest.skip("no hyperfine to compare with")
    theirs = tmp_path / "h.json"
    subprocess.run(
        ["hyperfine", *args, "--style", "none", "--export-json", theirs], check=True, capture_output=True, cwd=tmp_path
    )
    assert list(json.loads(theirs.read_text())["results"][0]["parameters"]) == list(record["parameters"])


def test_an_infinite_figure_is_rusts_inf():
    """Rust's display writes ``inf``/``-inf``, where ``Decimal`` wrote ``Infinity``."""
    assert (exports.csv_number(float("inf")), exports.csv_number(float("-inf"))) == ("inf", "-inf")

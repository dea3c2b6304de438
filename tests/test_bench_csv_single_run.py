"""``bench --export-csv`` of a single run reads as hyperfine's does: every figure a number, the
standard deviation 0 (hyperfine writes ``stddev.unwrap_or(0.0)``), so a script that reads
hyperfine's CSV (``float(row["stddev"])``, pandas' dtypes) reads ours. It was an empty cell,
which such a script fails on. The JSON export keeps hyperfine's ``null`` there.
Process-level: the real CLI, a real run."""

from __future__ import annotations

import csv
import io

from test_bench import bench

FIGURES = ("mean", "stddev", "median", "user", "system", "min", "max")


def test_a_single_runs_csv_row_is_all_numbers(tmp_path):
    table = tmp_path / "b.csv"
    done, exported = bench(tmp_path, "--runs", "1", "--style", "none", "--export-csv", table, "-N", "true")
    assert done.returncode == 0, done.stderr
    (row,) = csv.DictReader(io.StringIO(table.read_text()))
    assert {name: float(row[name]) for name in FIGURES}["stddev"] == 0.0
    assert exported["results"][0]["stddev"] is None

"""A command given as an argv (``--command JSON``, ``-- PROGRAM ARGS``) is named as a shell would
read it back: ``sh -c 'echo a  b'``, one word with its spaces, not ``sh -c echo a  b``, which
names another command. A word that needs no quoting is shown as it is (``sleep 0.1``)."""

from __future__ import annotations

import json

from conftest import run_cli
from test_bench_report import hyperfine_export


def test_an_argv_commands_words_are_quoted_in_its_name(tmp_path):
    out = tmp_path / "b.json"
    done = run_cli(
        "bench", "--runs", "2", "--style", "basic", "--export-json", out,
        "--command", '["sh", "-c", "echo a  b"]', "--command", '["true", "x"]', cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = done.stdout.decode()
    assert "Benchmark 1: sh -c 'echo a  b'\n" in shown, shown
    assert "Benchmark 2: true x\n" in shown, shown
    names = [result["command"] for result in json.loads(out.read_text())["results"]]
    assert names == ["sh -c 'echo a  b'", "true x"]


def test_a_program_after_the_double_dash_is_named_likewise(tmp_path):
    done = run_cli("bench", "--runs", "2", "--style", "basic", "--", "sh", "-c", "echo a  b", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Benchmark 1: sh -c 'echo a  b'\n" in done.stdout.decode()


def test_a_baseline_before_processkit_bench_3_naming_it_unquoted_is_still_its_baseline(tmp_path):
    """An export of processkit-bench/2 named the argv command ``sh -c echo a  b`` (its words
    joined by spaces): the same command now named quoted is judged against it, not lacked."""
    base, out = tmp_path / "base.json", tmp_path / "now.json"
    argv = '["sh", "-c", "echo a  b"]'
    done = run_cli("bench", "--runs", "3", "--style", "basic", "--export-json", base, "--command", argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    export = json.loads(base.read_text())
    export["processkit"]["format"] = "processkit-bench/2"
    (record,) = export["results"]
    record["command"] = record["name"] = record["text"] = "sh -c echo a  b"
    for ours in ("cpu_times", "cpu"):  # /3's: /2's user and system were the tree's
        del record[ours]
    base.write_text(json.dumps(export))
    done = run_cli(
        "bench", "--runs", "3", "--style", "basic", "--baseline", base, "--fail-if-slower", "1000",
        "--export-json", out, "--command", argv, cwd=tmp_path,
    )  # fmt: skip
    said = (done.stdout + done.stderr).decode()
    assert "not in the baseline" not in said and "judged nothing" not in said, said
    (entry,) = json.loads(out.read_text())["baseline"]["commands"]
    assert entry["baseline_command"] == "sh -c echo a  b" and entry["ratio"] is not None, entry


def test_a_page_of_an_export_before_processkit_bench_3_says_its_user_and_system_are_the_trees(tmp_path):
    """A processkit-bench/1 or /2 export's ``user`` and ``system`` were the whole tree's CPU; since /3
    they are hyperfine's (the root's rusage), as a hyperfine export's are: the page's User / system
    column says which it shows."""
    out, page = tmp_path / "b.json", tmp_path / "page.html"
    done = run_cli("bench", "--runs", "2", "--style", "basic", "--export-json", out, "-N", "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    export = json.loads(out.read_text())
    for declared, tree in (("processkit-bench/3", False), ("processkit-bench/2", True), ("processkit-bench/1", True)):
        export["processkit"]["format"] = declared
        out.write_text(json.dumps(export))
        assert _says_whole_tree(tmp_path, out, page) is tree, declared
    hyperfine = hyperfine_export(tmp_path / "h.json", [("true", [0.001, 0.002])])
    assert _says_whole_tree(tmp_path, hyperfine, page) is False


def _says_whole_tree(tmp_path, export, page) -> bool:
    """Whether ``report``'s page of ``export`` heads its User / system column as the whole tree's,
    with the sentence under the table that says so (never one without the other)."""
    done = run_cli("report", export, "-o", page, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = page.read_text()
    tree = "<th>User / system (whole tree)</th>" in shown
    said = 'id="user-system-tree">An export before processkit-bench/3: its user and system CPU are the whole tree'
    assert (said in shown) is tree and (tree or "<th>User / system</th>" in shown), shown
    return tree

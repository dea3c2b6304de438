"""hyperfine's names with hyperfine's meanings, field by field, from the real ``bench``: a figure
shown under a name hyperfine gives it means what hyperfine means by it (sharkdp/hyperfine
``src/export/markup.rs``, ``src/benchmark/relative_speed.rs``, ``src/benchmark/scheduler.rs``).
"""

from __future__ import annotations

import json

from conftest import run_cli

# A reference slower than the command it is compared with: hyperfine's summary says how many
# times faster the command is, and its tables divide by the fastest command, never by the reference.
SLOW, FAST = "sleep 0.05", "true"


def _relative(table: str, name: str) -> str:
    """The Relative cell of ``name``'s Markdown row."""
    (row,) = [line for line in table.splitlines() if line.startswith(f"| `{name}` |")]
    return row.rstrip(" |").rsplit("|", 1)[1].strip()


def _speed(cell: str) -> float:
    """The figure before any ``± spread``."""
    return float(cell.split()[0])


def test_the_tables_relative_column_is_to_the_fastest_whatever_the_reference(tmp_path):
    """hyperfine's Markdown, AsciiDoc and org-mode tables take every ratio against the fastest
    command (``relative_speed::compute``), so each Relative cell is 1.00 or more; ``--reference``
    changes the summary alone. Ours divided by the reference: ``true`` read 0.02 ± 0.00 and the
    reference 1.00, a figure under hyperfine's column that no hyperfine table can hold."""
    done = run_cli(
        "bench", "-N", "--runs", "2", "--reference", SLOW, FAST, "--export-markdown", tmp_path / "b.md",
        "--export-asciidoc", tmp_path / "b.adoc", "--export-orgmode", tmp_path / "b.org", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "b.md").read_text()
    assert _relative(table, FAST) == "1.00", table  # the fastest: no uncertainty, as hyperfine writes it
    assert _speed(_relative(table, SLOW)) > 2 and " ± " in _relative(table, SLOW), table
    adoc = (tmp_path / "b.adoc").read_text()  # a row per blank-line block, its fifth cell the Relative
    rows = [block.splitlines() for block in adoc.split("\n\n")[1:]]
    org = [line for line in (tmp_path / "b.org").read_text().splitlines() if line.startswith("| =")]
    for cells in ([row[4].strip("| ") for row in rows], [line.rstrip(" |").rsplit("|", 1)[1].strip() for line in org]):
        assert sorted(_speed(cell) for cell in cells)[0] == 1.0 and len(cells) == 2, (adoc, org)
        assert all(_speed(cell) >= 1 for cell in cells), (adoc, org)


def test_the_relative_speed_comparison_by_command_reads_as_hyperfines(tmp_path):
    """``--sort command``'s "Relative speed comparison" is hyperfine's table: against the
    reference, each command's relative speed is the larger mean over the smaller (a command
    faster than the reference reads as how many times faster), never a ratio under 1."""
    done = run_cli("bench", "-N", "--runs", "2", "--sort", "command", "--reference", SLOW, FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = done.stdout.decode()
    table = shown.split("Relative speed comparison\n", 1)[1].splitlines()
    speeds = {line.rsplit("  ", 1)[1]: _speed(line) for line in table[:2]}
    assert speeds[SLOW] == 1.0 and speeds[FAST] > 2, shown


def test_a_run_killed_by_a_signal_is_said_so_and_recorded_as_hyperfines_exit_codes_are(tmp_path):
    """hyperfine records a run a signal ended as 128+N in ``exit_codes`` (its ``extract_exit_code``),
    which ``--ignore-failure=137`` names, and says the process "has been terminated by a signal".
    Ours said the command "exited with 137", which it never did."""
    killed = "kill -9 $$"
    failed = run_cli("bench", "--runs", "2", killed, cwd=tmp_path)
    said = failed.stderr.decode()
    assert failed.returncode == 118, said
    assert f"the command '{killed}' was killed by signal 9 (SIGKILL), exit code 137" in said, said
    assert "exited" not in said, said
    named = run_cli("bench", "--runs", "2", "--ignore-failure=137", killed, "--export-json", tmp_path / "b.json")
    assert named.returncode == 0, named.stderr
    (result,) = json.loads((tmp_path / "b.json").read_text())["results"]
    assert result["exit_codes"] == [137, 137], result


def test_a_step_or_the_shells_start_up_killed_by_a_signal_is_said_so(tmp_path):
    """A ``--prepare`` step, or the shell whose start-up is measured, that a signal ended said it
    "terminated with a non-zero exit code (exit code 137)" or "exited with 137": it is killed,
    in the words a benchmarked run's death takes."""
    step = run_cli("bench", "--runs", "2", "--prepare", 'sh -c "kill -9 $$"', "true", cwd=tmp_path)
    said = step.stderr.decode()
    assert step.returncode == 118, said
    assert "command 'sh -c \"kill -9 $$\"' was killed by signal 9 (SIGKILL), exit code 137; append ' || true'" in said
    shell = run_cli("bench", "--runs", "2", "--shell", "sh -c 'kill -9 $$' sh", "true", cwd=tmp_path)
    said = shell.stderr.decode()
    assert shell.returncode == 118, said
    assert "could not measure the shell's start-up (" in said, said
    assert "): was killed by signal 9 (SIGKILL), exit code 137" in said, said


def test_a_failing_step_without_a_shell_is_told_a_way_that_works(tmp_path):
    """hyperfine tells a failing step to "append ' || true'", and so did ours under ``-N`` too,
    where no shell reads it: the user who followed it ran ``false`` with the arguments ``||`` and
    ``true`` and got the same advice again. Without a shell the step is told to go through
    ``sh -c``, and that advice, followed, passes; a step through the shell keeps hyperfine's."""
    failed = run_cli("bench", "-N", "--runs", "1", "--prepare", "false", "true", cwd=tmp_path)
    said = failed.stderr.decode()
    assert failed.returncode == 118, said
    assert "append ' || true'" not in said, said
    advised = "it runs without a shell, so give it as sh -c 'false || true' if that can be ignored"
    assert f"command 'false' terminated with a non-zero exit code (exit code 1); {advised}" in said, said
    followed = run_cli("bench", "-N", "--runs", "1", "--prepare", "sh -c 'false || true'", "true", cwd=tmp_path)
    assert followed.returncode == 0, followed.stderr
    split = run_cli("bench", "-N", "--runs", "1", "--setup", "sh -c 'exit 3'", "true", cwd=tmp_path)
    assert "the setup command \"sh -c 'exit 3'\" terminated" in split.stderr.decode(), split.stderr
    shelled = run_cli("bench", "--runs", "1", "--cleanup", "false", "true", cwd=tmp_path)
    assert "command 'false' terminated with a non-zero exit code (exit code 1); append ' || true' to it" in (
        shelled.stderr.decode()
    ), shelled.stderr


def test_a_failing_run_says_which_run_it_was_warm_up_or_timed(tmp_path):
    """hyperfine says where a run failed ("in the first warmup run", "in benchmark iteration 2"):
    ours said only "the command 'X' exited with 1", so a warm-up's failure (a first run that
    builds a cache, say) read as a timed run's, and a failure after some runs as the first's."""
    warm_up = 'sh -c "[ $HYPERFINE_ITERATION != warmup-1 ]"'  # the second warm-up run fails
    done = run_cli("bench", "-N", "--style", "none", "--warmup", "3", "--runs", "2", warm_up, cwd=tmp_path)
    assert done.returncode == 118, done.stderr
    assert f"the command '{warm_up}' exited with 1 in warm-up run 2; use --ignore-failure".encode() in done.stderr
    timed = 'sh -c "[ $HYPERFINE_ITERATION != 2 ]"'  # the third timed run fails
    done = run_cli("bench", "-N", "--style", "none", "--warmup", "1", "--runs", "4", timed, cwd=tmp_path)
    assert done.returncode == 118, done.stderr
    assert f"the command '{timed}' exited with 1 in timed run 3; use --ignore-failure".encode() in done.stderr
    first = run_cli("bench", "-N", "--style", "none", "--runs", "2", "false", cwd=tmp_path)
    assert b"the command 'false' exited with 1 in its first timed run; use --ignore-failure" in first.stderr


def test_a_comparison_of_single_runs_says_why_it_has_no_test(tmp_path):
    """hyperfine's summary of single runs has no spread (its stddev is None) and no test; ours
    printed "(n/a)" where its test's verdict goes, where the page and the baseline's block say
    "too few runs to test"."""
    done = run_cli("bench", "-N", "--runs", "1", "--style", "basic", "sleep 0.02", "true", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = done.stdout.decode()
    (line,) = [line for line in said.splitlines() if "times faster than sleep 0.02" in line]
    assert line.endswith("times faster than sleep 0.02 (too few runs to test)") and " ± " not in line, said

"""Every run of a benchmark gets hyperfine's ``HYPERFINE_RANDOMIZED_ENVIRONMENT_OFFSET``: 0 to
4095 ``X``, drawn afresh each run (hyperfine's ``randomized_environment_offset``), so the stack's
start moves between runs; the steps and the shell's calibration get it too, as hyperfine's do."""

from __future__ import annotations

from conftest import run_cli

# each run appends whether the variable is set, and its length, and whether it holds anything but X
SAY = "case ${HYPERFINE_RANDOMIZED_ENVIRONMENT_OFFSET-unset} in unset) echo unset;; *[!X]*) echo other;; *) echo ${#HYPERFINE_RANDOMIZED_ENVIRONMENT_OFFSET};; esac >> "


def test_every_run_and_step_gets_an_offset_of_its_own_length(tmp_path):
    """The shell is a script that says so too before it runs ``sh``: it starts every run and step
    and the calibration's start-up runs, which are the lines it says past the runs' and steps'."""
    shell = tmp_path / "shell"
    shell.write_text(f'#!/bin/sh\n{SAY}"$0.said"\nexec sh "$@"\n')
    shell.chmod(0o755)
    done = run_cli(
        "bench", "--style", "none", "--runs", "12", "--warmup", "1", "--prepare", SAY + "steps",
        "--shell", shell, SAY + "runs", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = (tmp_path / "runs").read_text().split()
    steps = (tmp_path / "steps").read_text().split()
    started = (tmp_path / "shell.said").read_text().split()
    assert len(runs) == 13 and len(steps) == 13, (runs, steps)
    assert len(started) > len(runs) + len(steps), started  # the calibration's runs said it too
    lengths = [int(said) for said in runs + steps + started]  # neither unset nor anything but X
    assert all(0 <= length < 4096 for length in lengths), lengths
    assert len(set(lengths)) > 1, lengths  # drawn per run: 26 or more equal draws of 4096 do not happen

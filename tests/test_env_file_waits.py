"""An ``--env-file`` that gives some lines and then waits for more: a terminal in line mode (each
read gives one line, then EAGAIN: the env file is opened without waiting) or a kernel file that
waits for data (``trace_pipe``). The reader took what came before the wait for the whole file:
the run went on with the first lines, the rest, typed or traced later, lost without a word. There
is no end of file to say the file is whole, so the run is refused (111), as one with nothing yet."""

from __future__ import annotations

import os
import select

from conftest import SAFETY_NET, run_cli


def _typed(terminal: int) -> None:
    """The master's write reaches the line discipline later, not at once: a read before then
    finds nothing yet. In line mode the terminal is readable once a whole line is there."""
    assert select.select([terminal], [], [], SAFETY_NET)[0], "the typed lines never reached the terminal"


def test_an_env_file_that_gave_some_lines_and_waits_for_more_is_refused_whole(tmp_path):
    master, terminal = os.openpty()  # the terminal's line discipline: canonical, a line a read
    try:
        os.write(master, b"A=1\nB=2\n")  # two lines typed; the rest (C=3, then Ctrl-D) not yet
        _typed(terminal)
        name = os.ttyname(terminal)
        ran = run_cli(
            "run", "--jsonl", "run.jsonl", "--env-file", name, "--", "sh", "-c", "echo A=$A B=$B", cwd=tmp_path
        )
    finally:
        os.close(terminal)
        os.close(master)
    assert (ran.returncode, ran.stdout) == (111, b""), (ran.stdout, ran.stderr)
    assert ran.stderr.decode().splitlines() == [
        f"processkit-cli: could not read environment file `{name}`: its first 8 bytes came, then no end of file "
        "(a file that waits for data: none of it is used)"
    ], ran.stderr


def test_an_env_file_read_to_its_end_of_file_from_a_terminal(tmp_path):
    """The same terminal once its writer typed Ctrl-D (the end of file of a terminal in line
    mode): every line is read, none left behind."""
    master, terminal = os.openpty()
    try:
        os.write(master, b"A=1\nB=2\nC=3\n\x04")
        _typed(terminal)
        ran = run_cli(
            "run", "--jsonl", "run.jsonl", "--env-file", os.ttyname(terminal), "--", "sh", "-c", "echo $A$B$C",
            cwd=tmp_path,
        )  # fmt: skip
    finally:
        os.close(terminal)
        os.close(master)
    assert (ran.returncode, ran.stdout) == (0, b"123\n"), ran.stderr

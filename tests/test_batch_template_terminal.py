"""A template with no ``:::`` source reads its arguments from stdin, as parallel does; on a
terminal that wait looked like a hang, so it is said, as parallel says it."""

from __future__ import annotations

import os

from conftest import SAFETY_NET, start_cli
from streams import read_until
from test_batch import summary

NOTE = (
    b"processkit-cli: note: batch: reading the template's arguments from the terminal, one a line"
    b" (Ctrl-D ends them); `::: A B` or `:::: FILE` names them instead"
)


def test_a_template_reading_its_arguments_from_a_terminal_says_so_then_reads_them(tmp_path):
    master, slave = os.openpty()
    proc = start_cli("batch", "--out", tmp_path / "out", "--", "echo", "{}", stdin=slave, stdout=None)
    os.close(slave)
    try:
        # the note comes before the batch waits on the terminal
        said = read_until(proc.stderr, NOTE, "nothing said while waiting on the terminal")
        os.write(master, b"x1\n\x04")  # a line, then Ctrl-D (VEOF) at the start of the next
        _, rest = proc.communicate(timeout=SAFETY_NET)
        assert proc.returncode == 0, said + rest
    finally:
        os.close(master)
        if proc.poll() is None:  # a batch still waiting: the one this test started, by its handle
            proc.kill()
            proc.wait()
    assert (said + rest).count(NOTE) == 1
    assert list(summary(tmp_path / "out")) == ["x1"]

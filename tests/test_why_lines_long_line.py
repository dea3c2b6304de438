"""A capture line longer than the search's piece (1 MiB) is not searched; the rest of it, in the
next piece, was searched as if it began a line, so an ``Error: `` in the middle of a long line
was shown as a line that says why."""

from __future__ import annotations

from conftest import run_cli
from streams import PY
from test_batch_failures import BATCH_FAILED, failure_block

# a 2 MiB line, then ``Error: x`` at the start of the third 1 MiB piece, in the middle of that line
LONG_LINE_JOB = (
    "import sys; out = sys.stdout.buffer; "
    "out.write(b'x' * (2 << 20) + b'Error: x, not a line of its own' + b'y' * 100 + b'\\n'); "
    "out.write(b''.join(b'plain %d\\n' % n for n in range(1, 11))); sys.exit(1)"
)


def test_the_rest_of_a_line_too_long_to_search_is_not_shown_as_a_line_that_says_why(tmp_path):
    proc = run_cli("batch", "--out", tmp_path / "out", "--", PY, "-c", LONG_LINE_JOB, ":::", "a", cwd=tmp_path)
    assert proc.returncode == BATCH_FAILED, proc.stderr
    block = failure_block(proc.stderr)
    assert not any("Error: x" in line for line in block), block
    assert "that say why" not in block[2], block
    assert block[-6:-1] == [f"    | plain {n}" for n in range(6, 11)], block

"""The batch's ``index.html``: the batch page (``report/batch_page.py``) drawn from
``summary.jsonl`` once the batch has ended, the page ``report DIR`` draws of the same directory.

It is drawn by a process of its own: the page takes memory in proportion to the batch (its
rows, its timeline), which the batch process itself, flat however many jobs it ran, does not
take on. A page that cannot be drawn is one warning: the batch's results stand without it.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ..diagnostics import warn

PAGE = "index.html"


def write_page(out: str) -> None:
    """Draw ``out/index.html`` from ``out/summary.jsonl``, waiting for it."""
    try:
        drawn = subprocess.run(
            command(out),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # the terminal's Ctrl-C is the batch's to handle
        )
    except OSError as exc:
        warn(f"no {PAGE}: cannot start the process that draws it: {exc.strerror}")
        return
    if drawn.returncode != 0:
        said = drawn.stderr.decode(errors="replace").strip().splitlines()
        warn(f"no {PAGE}: {said[-1] if said else f'the process that draws it exited {drawn.returncode}'}")


def command(out: str) -> list[str]:
    """The page process's command line: this very ``processkit`` (its directory first on the
    path), not whichever one the working directory holds, as ``python -m`` would take."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = "import sys; sys.path.insert(0, sys.argv.pop(1)); from processkit.batching.index import main; main()"
    return [sys.executable, "-c", code, root, out]


def main() -> None:
    from ..errors import Failure
    from ..report.batch_page import page_for
    from ..userfiles import write_text

    out = sys.argv[1]
    try:
        write_text(os.path.join(out, PAGE), page_for(out))
    except Failure as failure:
        print(f"processkit-cli: {failure.message}", file=sys.stderr)
        sys.exit(failure.code)

"""The batch's ``index.html``: the batch page (``report/batch_page.py``) drawn from
``summary.jsonl`` once the batch has ended, the page ``report DIR`` draws of the same directory.

It is drawn by a process of its own: the page takes memory in proportion to the batch (its
rows, its timeline), which the batch process itself, flat however many jobs it ran, does not
take on. That process starts with the batch and waits, ready, for the word to draw (a fresh
interpreter, the report's imports and its template cost about 0.1 s, a tenth of a thousand quick
jobs' whole batch); meanwhile it reads the summary's lines as the jobs end (``Summary.early``),
so that the word finds only the last of them to read. A page that cannot be drawn is one
warning: the batch's results stand without it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys

from ..diagnostics import say, warn
from ..engine import claims
from ..text import escape_unsafe

PAGE = "index.html"


# How often the page process looks for the summary's new lines while the jobs run: every 100 ms
# while lines come, the wait doubled after each look that finds none up to once a second, so a
# batch of long jobs wakes it about once a second (tests/test_batch_page_early.py).
EARLY_EVERY_MS = 100
EARLY_MOST_MS = 1000

# The word that asks the page process to draw; its end of file without it (the batch gone, or
# ended with no page to draw) lets it exit drawing nothing.
DRAW = b"draw\n"


class PageProcess:
    """The process that draws ``out/index.html``, started as the batch starts so that its
    interpreter, its imports and its template are ready when the last job ends: at the end the
    batch waits only for the page itself to be drawn. Until then it waits on a pipe only the batch
    holds (the jobs never inherit it), so a batch that dies takes it along, waking between times
    to read the summary's new lines (``EARLY_EVERY_MS``)."""

    def __init__(self, out: str) -> None:
        self._out = out
        self._cannot: str | None = None
        self._process: subprocess.Popen | None = None
        try:
            self._process = subprocess.Popen(
                command(out),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,  # the terminal's Ctrl-C is the batch's to handle
            )
        except OSError as exc:
            self._cannot = exc.strerror
        else:  # its exit status is read here (``draw``): never an orphan's for the batch's reaper
            claims.claim(self._process.pid)

    def draw(self, gone: frozenset[str] = frozenset()) -> None:
        """Draw the page from ``out/summary.jsonl`` but the jobs ``gone`` names (sent as one JSON
        line after the word), waiting for it; a page that cannot be drawn is one warning."""
        if self._process is None:
            warn(f"no {PAGE}: cannot start the process that draws it: {self._cannot}")
            return
        _, said = self._process.communicate(DRAW + json.dumps(sorted(gone)).encode() + b"\n")
        claims.unclaim(self._process.pid)
        code = self._process.returncode
        if code != 0:
            lines = said.decode(errors="replace").strip().splitlines()
            warn(f"no {PAGE}: {lines[-1] if lines else f'the process that draws it exited {code}'}")
        elif not os.path.exists(os.path.join(self._out, PAGE)):
            warn(f"no {PAGE}: the process that draws it ended before it was asked to")

    def abandon(self) -> None:
        """No page to draw (the batch did not run to its end): the process exits at once."""
        if self._process is not None:
            if self._process.returncode is None:
                self._process.communicate(b"")
            claims.unclaim(self._process.pid)


def command(out: str) -> list[str]:
    """The page process's command line: this very ``processkit`` (its directory first on the
    path), not whichever one the working directory holds, as ``python -m`` would take."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = "import sys; sys.path.insert(0, sys.argv.pop(1)); from processkit.batching.index import main; main()"
    return [sys.executable, "-c", code, root, out]


def main() -> None:
    import gc

    from ..errors import Failure

    out = sys.argv[1]
    summary = None
    try:  # ready before it is asked to draw; whatever fails here fails again, and is told, below
        from ..report.batch_page import warm
        from ..report.batch_model import Summary

        warm()
        summary = Summary(out)
    except Exception:  # noqa: BLE001
        pass
    asked = select.poll()
    asked.register(sys.stdin.buffer.fileno(), select.POLLIN)
    wait = EARLY_EVERY_MS
    while summary is not None and not asked.poll(wait):
        try:
            wait = EARLY_EVERY_MS if summary.early() else min(2 * wait, EARLY_MOST_MS)
        except Exception:  # noqa: BLE001 - read again whole at the end, which says what fails
            summary = None
    if sys.stdin.buffer.readline() != DRAW:
        return
    gone = frozenset(json.loads(sys.stdin.buffer.readline()))
    from ..report.batch_page import page_for
    from ..useroutputs import write_text

    gc.disable()  # a short life's tens of thousands of objects hold no cycle to look for
    try:
        write_text(os.path.join(out, PAGE), page_for(out, gone, summary))
    except Failure as failure:
        # one line, escaped as the batch's own warning shows it (a path's newline would split it)
        say(sys.stderr, f"{escape_unsafe(failure.message)}\n")
        sys.exit(failure.code)
    os._exit(0)  # the page is written (stderr's lines went by ``say``, unbuffered): a teardown holds the batch's wait

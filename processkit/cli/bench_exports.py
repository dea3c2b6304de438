"""``bench``'s exports (``--export-json`` and the tables), hyperfine's ``ExportManager``: the
files made before the first run and rewritten after each command's runs, so a failure or a stop
keeps what was done; a stream (``-``, stdout; a FIFO, a device) cannot be rewritten, so it gets
one document: at the end, or, when the benchmark ends early, the one the files then hold."""

from __future__ import annotations

import os
import stat

from ..errors import Failure, Kind, StdoutClosed
from ..useroutputs import identities, write_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from ..benchmark.result import BenchResult

# hyperfine's ExportManager's order, whatever the flags' order: several ``-`` exports reach stdout so
EXPORTS = (
    ("export_asciidoc", "asciidoc"),
    ("export_json", "json"),
    ("export_csv", "csv"),
    ("export_markdown", "markdown"),
    ("export_orgmode", "orgmode"),
)


class Exports:
    """The exports ``args`` asks for. The baseline is read whole before the first run, but an
    export written over it as the benchmark goes would leave a stopped or failed benchmark with
    neither: that one (``rolled``) at the end only, and only when the benchmark did not fail
    (118, or the gate's 119): its figures are no baseline."""

    def __init__(self, args: argparse.Namespace):
        self._args = args
        self.targets = [(getattr(args, flag), kind) for flag, kind in EXPORTS if getattr(args, flag) is not None]
        baseline = identities([(args.baseline, "")]) if args.baseline is not None else {}
        self.rolled = {
            path for path, _ in self.targets if path != "-" and identities([(path, "")]).keys() & baseline.keys()
        }
        written = [(path, kind) for path, kind in self.targets if path not in self.rolled]
        rewritable = {path: _rewritable(path) for path, _ in written}  # one look a path
        self._files = [(path, kind) for path, kind in written if rewritable[path]]
        self._streams = [(path, kind) for path, kind in written if not rewritable[path]]
        self._latest: BenchResult | None = None  # what the files hold: a stream's document on an early end

    def wanted(self) -> bool:
        """Whether any export hears of each command's end (the rolled baseline waits for the end)."""
        return bool(self._files or self._streams)

    def finished(self, result: BenchResult) -> None:
        """The export files rewritten from ``result``: made before the first run, then after each
        command's runs (and with every command's runs so far when interleaved rounds end early);
        ``_latest`` once they hold it, so a stream never gets what a failed write left out."""
        for path, kind in self._files:
            write_text(path, self.text(kind, result))
        self._latest = result

    def ended_early(self) -> None:
        """A failure or a stop before the end: each stream gets the document the files hold (the
        commands done, as the session's warning says), once; one that cannot be written is a
        warning (a reader gone, nothing), the benchmark's own end standing. Nothing when no
        command is done (a set-up or calibration failure, a stop amid the first command's runs):
        a document with no results would read as a benchmark that measured nothing, and
        hyperfine's stdout has none there either."""
        if self._latest is None or not self._latest.results:
            return
        from ..diagnostics import warn

        for path, kind in self._streams:
            try:
                self._stream(path, self.text(kind, self._latest))
            except Failure as unwritten:
                warn(unwritten.message)
            except StdoutClosed:
                pass

    def final(self, result: BenchResult, failed: bool) -> None:
        """Every export from the whole ``result``; a rolled baseline only when it did not fail."""
        for path, kind in self.targets:
            if path == "-" or not failed or path not in self.rolled:
                self._stream(path, self.text(kind, result))

    def text(self, kind: str, result: BenchResult) -> str:
        """The export writer of ``kind``; its module (``json``, ``csv``) loaded by the first export."""
        from ..benchmark import exports

        return exports.WRITERS[kind](result, self._args.time_unit, self._args.sort)

    @staticmethod
    def _stream(path: str, text: str) -> None:
        if path == "-":  # hyperfine's stdout target, after a blank line, as the runner's own lines
            from . import output

            output.own_lines(["", *text.splitlines()])
        else:
            write_text(path, text)


def apart(targets: list[tuple[str, str]], baseline: str | None) -> None:
    """Two exports naming one file (``--export-json b --export-csv b``, a link to the other) would
    each replace the other's, the last one's kept without a word, and a table over the
    ``--baseline`` would leave no baseline (only ``--export-json`` rolls it forward): refused
    before anything is written, as ``batch`` refuses its ``--junit`` naming its ``--trace``: a
    file there by its identity (a link, a hard link), one not there yet by the path it would be
    made at. ``-`` is hyperfine's stdout, never a file."""
    # a file's identity, or the real path of one not made yet: what names it
    given = [(baseline, "--baseline")] if baseline is not None else []
    named: dict[object, tuple[str, str]] = {key: ("--baseline", path) for path, _ in given for key in identities(given)}
    for path, kind in targets:
        if path == "-":
            continue
        made = os.path.exists(path)  # else by the path it will be made at (a dangling link's target)
        keys: list[object] = list(identities([(path, "")])) if made else [os.path.realpath(path)]
        flag = f"--export-{kind}"
        for key in keys:
            if key in named and (kind != "json" or named[key][0] != "--baseline"):
                raise Failure(Kind.SETUP, _same_file(flag, path, *named[key]))
            named[key] = (flag, path)


def _same_file(flag: str, path: str, earlier: str, its: str) -> str:
    """What ``apart`` refuses: the two flags naming one file, and each path when they differ."""
    if path == its:
        return f"cannot write {path}: {earlier} and {flag} both name it"
    return f"cannot write {path} ({flag}): it is the {earlier} file {its}"


def _rewritable(path: str) -> bool:
    """Whether an export can be rewritten as the benchmark goes: a regular file (or none yet)
    is replaced whole each time; a stream would get every version one after another. Only a
    ``stat``: the writes themselves go through ``useroutputs``' rules."""
    if path == "-":
        return False
    try:
        mode = os.stat(path).st_mode
        return stat.S_ISREG(mode) or stat.S_ISDIR(mode)  # a directory: the first write names it, before any run
    except OSError:  # not there yet (made by the first write), or a problem the first write names
        return True

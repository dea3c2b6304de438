"""``report``: one run's JSONL stream as a self-contained HTML page, or many streams (files or
a directory of ``*.jsonl``) as one index page with a section per run.

Read-only: streams and capture files are read, the registry is consulted once (only to say
whether a stream without ``runner_exit`` is still being written), and the page is written to
a temporary file beside ``-o`` then renamed into place, so a reader never sees half a page (a
device or pipe, ``-o /dev/stdout``, is written in place: ``userfiles``).
A file that holds no event is invalid input (114, as ``events --validate``).
A benchmark export (one, or OLD and NEW) is read through ``benchmark.recorded``, so a wrong
shape is 114 too.
"""

from __future__ import annotations

import os
import stat

from ..errors import Failure, Kind, usage
from ..text import sanitize
from . import output
from .parsing import Once, Parser

STREAM_SUFFIX = ".jsonl"


def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli report",
        usage="processkit-cli report <FILE.jsonl>... | <DIR> | <BENCH.json> [<NEW.json>] [--capture-dir <DIR>] -o <OUT.html>",
        description="Render JSONL event streams as an HTML page: one stream gives a run's page, "
        "several (or a directory of *.jsonl) give an index of runs; a batch's output directory (it "
        "holds summary.jsonl) gives the batch's page; the JSON export of a bench gives the "
        "benchmark's page, and two of them (OLD.json NEW.json) the new one compared with the old.",
    )
    parser.add_argument("streams", nargs="+", metavar="STREAM", help="event stream files, or one directory of them")
    parser.add_argument("-o", "--output", action=Once, required=True, metavar="OUT", help="the HTML file to write")
    parser.add_argument(
        "--capture-dir",
        action=Once,
        metavar="DIR",
        help="where the run's stdout.log and stderr.log are (one stream only)",
    )
    parser.add_argument(
        "--usage-file",
        action=Once,
        metavar="FILE",
        help="extension: the run's run --usage-file, for the figures the stream cannot hold (one stream only)",
    )
    return parser


def main(argv: list[str], invocation) -> int:
    args = build_parser().parse(argv)
    from ..report import batch_model

    if len(args.streams) == 1 and batch_model.is_batch_out(args.streams[0]):  # a batch's --out
        return _batch_page(args)
    paths = _stream_paths(args.streams)
    single = len(args.streams) == 1 and not os.path.isdir(args.streams[0])
    for flag in ("capture_dir", "usage_file"):
        if getattr(args, flag) is not None and not single:
            raise usage(f"the argument '--{flag.replace('_', '-')}' can be used only with a single stream")

    exports = _bench_exports(args.streams)
    if exports is not None:  # ``bench --export-json`` files: one, or a baseline and a new one
        from ..report import bench_page

        old, new = exports if len(exports) == 2 else (None, exports[0])
        write_atomically(args.output, bench_page.bench_page(new, old))
        against = "" if old is None else f" against {sanitize(old.source)}"
        output.lines([f"wrote {sanitize(args.output)}: a benchmark of {len(new.commands)} commands{against}"])
        return 0
    from ..report import reading, render

    live = live_streams()
    from_directory = not single and len(args.streams) == 1
    runs = [
        reading.load(path, f"run-{index}", live=os.path.realpath(path) in live, regular=from_directory)
        for index, path in enumerate(paths)
    ]
    if args.usage_file is not None:
        reading.add_usage(runs[0], _usage_record(args.usage_file))
    page = render.single_page(runs[0], args.capture_dir) if single else render.index_page(runs)
    write_atomically(args.output, page)
    noun = f"run '{runs[0].run_id}'" if single and runs[0].run_id else f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    output.lines([f"wrote {sanitize(args.output)}: {sanitize(noun)}"])
    return 0


def _batch_page(args) -> int:
    from ..report import batch_model, batch_page

    for flag in ("capture_dir", "usage_file"):
        if getattr(args, flag) is not None:
            raise usage(f"the argument '--{flag.replace('_', '-')}' cannot be used with a batch's directory")
    batch = batch_model.load(args.streams[0])
    write_atomically(args.output, batch_page.batch_page(batch))
    output.lines([f"wrote {sanitize(args.output)}: a batch of {len(batch.jobs)} jobs"])
    return 0


def _bench_exports(given: list[str]) -> list | None:
    """The benchmark exports named (read and checked), or None when these are event streams:
    one export gives its page, two (OLD NEW) the new one's drawn against the old."""
    from ..benchmark import recorded
    from ..report import bench_page

    if any(os.path.isdir(path) for path in given):
        return None
    found = [bench_page.is_bench_export(path) for path in given]
    if not any(found):
        return None
    if len(given) > 2 or not all(found):
        raise usage(
            "report takes one benchmark export, or two to compare (OLD.json NEW.json), and no event stream beside them"
        )
    return [recorded.from_json(bench_page.load(path), path) for path in given]


def _usage_record(path: str) -> dict:
    from ..bounded import USAGE_FILE, InputError, load_file

    try:
        record = load_file(path, USAGE_FILE)  # a regular file of at most 1 MiB, not /dev/zero
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot read --usage-file {sanitize(path)}: {exc.strerror}") from None
    except InputError as exc:
        raise Failure(Kind.EVENTS_INVALID, str(exc)) from None
    if not isinstance(record, dict):
        raise Failure(Kind.EVENTS_INVALID, f"--usage-file {sanitize(path)} does not hold a JSON object")
    return record


def _stream_paths(given: list[str]) -> list[str]:
    """The streams named: files as given, a directory as its ``*.jsonl`` files (sorted)."""
    if len(given) == 1 and os.path.isdir(given[0]):
        try:
            names = sorted(name for name in os.listdir(given[0]) if name.endswith(STREAM_SUFFIX))
        except OSError as exc:
            raise Failure(Kind.SETUP, f"cannot list {sanitize(given[0])}: {exc.strerror}") from None
        paths = [path for path in (os.path.join(given[0], name) for name in names) if _regular(path)]
        if not paths:
            raise Failure(Kind.EVENTS_INVALID, f"{sanitize(given[0])} holds no *{STREAM_SUFFIX} event stream")
        return paths
    return list(given)


def _regular(path: str) -> bool:
    """Whether a directory's ``*.jsonl`` entry is a regular file to read; anything else (a FIFO,
    whose open would wait, a link to ``/dev/zero``, which never ends) is skipped with a warning.
    Checked again where it is read (``reading.read_lines``), so a swap since is a clear error."""
    from ..diagnostics import warn
    from ..userfiles import kind

    try:
        found = os.stat(path)
    except OSError as exc:
        warn(f"skipping {path}: {exc.strerror}")
        return False
    if not stat.S_ISREG(found.st_mode):
        warn(f"skipping {path}: it is {kind(found.st_mode)}, not a regular file")
        return False
    return True


def live_streams() -> set[str]:
    """The streams a registered, not confirmed stale, runner still writes (by real path); an
    unreadable registry only means nobody can be shown as still writing."""
    from ..registry import scan
    from ..registry.lock import Health

    try:
        view = scan.read(Kind.REGISTRY)
    except Failure:
        return set()
    return {
        os.path.realpath(entry.record.jsonl)
        for entry in view.entries
        if entry.record.jsonl is not None and entry.health() is not Health.STALE
    }


def write_atomically(path: str, text: str) -> None:
    """The page, replacing a regular file whole (a reader never sees half a page), written in
    place to a device or pipe (``-o /dev/stdout``); never through another user's path."""
    from ..userfiles import write_output

    try:
        write_output(path, text.encode("utf-8"))
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot write {sanitize(path)}: {exc.strerror}") from None

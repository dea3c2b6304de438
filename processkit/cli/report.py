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

from ..diagnostics import note
from ..errors import usage
from ..text import escape_unsafe, plural, sanitize
from ..useroutputs import identities, write_text
from . import output
from .parsing import OncePath, Parser

INPUT = "an input of this report"  # what ``-o`` is told it would replace (``useroutputs.write_output``'s ``kept``)


def build_parser() -> Parser:
    parser = Parser(
        prog="processkit-cli report",
        usage="processkit-cli report <FILE.jsonl>... | <DIR> | <BENCH.json> [<NEW.json>] [--capture-dir <DIR>] -o <OUT.html>",
        description="Render JSONL event streams as an HTML page: one stream gives a run's page, "
        "several (or a directory of *.jsonl) give an index of runs; a batch's output directory (it "
        "holds summary.jsonl) gives the batch's page; the JSON export of a bench gives the "
        "benchmark's page, and two of them (OLD.json NEW.json) the new one compared with the old.",
    )
    parser.add_argument(
        "streams", nargs="+", action=OncePath, metavar="STREAM", help="event stream files, or one directory of them"
    )
    parser.add_argument("-o", "--output", action=OncePath, required=True, metavar="OUT", help="the HTML file to write")
    parser.add_argument(
        "--capture-dir",
        action=OncePath,
        metavar="DIR",
        help="where the run's stdout.log and stderr.log are (one stream only)",
    )
    parser.add_argument(
        "--usage-file",
        action=OncePath,
        metavar="FILE",
        help="extension: the run's run --usage-file, for the figures the stream cannot hold (one stream only)",
    )
    return parser


def main(argv: list[str], invocation) -> int:
    args = build_parser().parse(argv)
    from ..report import inputs

    with inputs.judged_directory(args.streams) as directory:  # DIR read by its handle, not its name
        return _report(args, directory)


def _report(args, directory: int | None) -> int:
    """The page, ``directory`` the one directory given (its judged handle) or None."""
    from ..report import batch_model, inputs

    if directory is not None and batch_model.is_batch_out(directory):  # a batch's --out
        return _batch_page(args, directory)
    paths = inputs.stream_paths(args.streams, directory)
    single = len(args.streams) == 1 and directory is None
    for flag in ("capture_dir", "usage_file"):
        if getattr(args, flag) is not None and not single:
            raise usage(f"the argument '--{flag.replace('_', '-')}' can be used only with a single stream")
    return _page(args, paths, single, directory)


def _page(args, paths: list[str], single: bool, directory: int | None) -> int:
    """The page of the streams ``paths``: a benchmark's, one run's (``single``) or an index."""
    from ..report import inputs

    kept = _inputs(args, paths)
    exports = None if directory is not None else inputs.bench_exports(args.streams)
    if exports is not None:  # ``bench --export-json`` files: one, or a baseline and a new one
        from ..report import bench_page

        old, new = exports if len(exports) == 2 else (None, exports[0])
        write_text(args.output, bench_page.bench_page(new, old), kept)
        against = "" if old is None else f" against {escape_unsafe(old.source)}"
        output.lines(
            [f"wrote {escape_unsafe(args.output)}: a benchmark of {plural(len(new.commands), 'command')}{against}"]
        )
        if unmeasured := new.cpu_unmeasured():
            note(
                "processkit-cli: note: not compared by CPU time, as none of their runs measured it: "
                + ", ".join(sanitize(name) for name in unmeasured)
            )
        return 0
    from ..report import reading, render

    live = inputs.live_streams()
    from_directory = not single and len(args.streams) == 1
    runs = [
        reading.load(path, f"run-{index}", live=os.path.realpath(path) in live, regular=from_directory)
        for index, path in enumerate(paths)
    ]
    if args.usage_file is not None:
        reading.add_usage(runs[0], inputs.usage_record(args.usage_file))
    if single:  # the captures its page reads: beside the stream (``cap/stdout.log``) or in --capture-dir
        from ..report.model import capture_place

        places = (capture_place(stream, args.capture_dir, runs[0].path) for stream in runs[0].captured)
        kept.update(identities((os.path.join(*place), INPUT) for place in places))
    if single:  # --capture-dir judged where it is used, once the stream is read, and read by its handle
        with inputs.capture_directory(args.capture_dir):
            page = render.single_page(runs[0], args.capture_dir)
    else:
        page = render.index_page(runs)
    write_text(args.output, page, kept)
    noun = f"run '{runs[0].run_id}'" if single and runs[0].run_id else plural(len(runs), "run")
    output.lines([f"wrote {escape_unsafe(args.output)}: {sanitize(noun)}"])
    return 0


def _inputs(args, paths) -> dict[tuple[int, int], str]:
    """What the page is made from, never replaced by it (``report run.jsonl -o run.jsonl``)."""
    from ..capture_layout import FILE_NAMES

    named = [*args.streams, *paths, *([args.usage_file] if args.usage_file is not None else [])]
    if args.capture_dir is not None:
        named += [os.path.join(args.capture_dir, file) for file in FILE_NAMES.values()]
    return identities((path, INPUT) for path in named)


def _batch_page(args, directory: int) -> int:
    from ..report import batch_model, batch_page
    from ..summary_line import SUMMARY_FILE

    for flag in ("capture_dir", "usage_file"):
        if getattr(args, flag) is not None:
            raise usage(f"the argument '--{flag.replace('_', '-')}' cannot be used with a batch's directory")
    batch = batch_model.load(args.streams[0])
    read = [os.path.join(batch.out, SUMMARY_FILE), *batch_page.captures_read(batch)]
    write_text(args.output, batch_page.batch_page(batch), identities((path, INPUT) for path in read))
    output.lines([f"wrote {escape_unsafe(args.output)}: a batch of {plural(len(batch.jobs), 'job')}"])
    _unrecorded(batch, directory)
    return 0


def _unrecorded(batch, directory: int) -> None:
    """The job directories in the batch's ``--out`` its summary has no line for, named: the
    page leaves them out, and a batch killed (SIGKILL, the OOM killer) before it recorded its
    jobs left their streams there and a page that says no job ran; while the batch still runs
    (it holds ``--out``'s lock) they are its jobs not recorded yet. ``directory``: its judged handle."""
    from ..batching.outdir import LOCK_FILE, left_as_they_were
    from ..batching.unique import Names
    from ..diagnostics import warn
    from ..text import first_named

    recorded = Names()
    for job in batch.jobs:
        recorded.add("id", job.id)
    from ..report import inputs

    try:  # listed by the handle ``main`` judged (``inputs.judged_directory``), not its name again
        listing = inputs.listing(directory)
    except OSError:
        return
    try:
        count, first, _ = left_as_they_were(listing, recorded, lambda: False)
    finally:
        os.close(listing)
    if count:
        from ..liveness import Health, probe

        them = "it" if count == 1 else "them"
        running = probe(batch.out, LOCK_FILE)[0] is Health.LIVE  # a batch holds it for its life
        why = (
            f"the batch writing into it is still running and has not recorded {them} yet"
            if running
            else f"a batch killed before it recorded {them}, or an earlier batch's"
        )
        warn(
            f"{batch.out} holds {plural(count, 'job directory', 'job directories')} its summary has no line for "
            f"({first_named(first, count)}): the page leaves {them} out ({why})"
        )

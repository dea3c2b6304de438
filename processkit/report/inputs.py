"""What ``report`` is given, found and checked before a page is drawn: the event streams (files,
or a directory's ``*.jsonl``), the benchmark exports (one, or OLD and NEW), a run's
``--usage-file``, and which streams a live runner still writes.

Nothing here waits or reads without a bound: a directory's entry that is not a regular file is
skipped, every file is read through ``bounded``, and an unreadable registry only means no stream
is shown as still being written.
"""

from __future__ import annotations

import contextlib
import os
import stat

from ..errors import Failure, Kind, usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

STREAM_SUFFIX = ".jsonl"


@contextlib.contextmanager
def judged_directory(given: list[str]) -> Iterator[int | None]:
    """The one directory given (``report DIR``), reached and judged once (``_reached``, as
    ``is_directory`` reaches it), and pinned (``safepath.pin``) while the page is made: its listing, its entries
    and a batch's files are read from that handle, not by DIR's name, so another user
    who owns DIR's parent cannot swap DIR for their link between the judgement and the reads
    (``cli/report.py``'s live label and ``-o``'s kept identities still look by name: no content).
    Yields an ``O_PATH`` handle on it, or None when ``given`` is not one directory."""
    one = given[0] if len(given) == 1 else None
    with _pinned(one, None if one is None else _reached(one)) as handle:
        yield handle


@contextlib.contextmanager
def capture_directory(path: str | None) -> Iterator[None]:
    """``--capture-dir`` judged as ``judged_directory`` judges DIR (another user's link at its
    name, or one a later ``..`` climbs above, is refused: 111) and pinned while the page is made, so
    its captures and layout record are read from that handle. A directory missing or not one is
    refused too (111, as a missing ``--usage-file``): a page made from a typo would say every
    capture was unreadable, and name the run's recorded path, not the one read."""
    from ..userwalk import input_directory

    judged = None
    if path is not None:
        try:
            judged = input_directory(path)
        except OSError as exc:  # an UnsafePath among them
            raise _refused(f"--capture-dir {path}", exc) from None
    with _pinned(path, judged, f"--capture-dir {path}"):
        yield


def _refused(shown: str, exc: OSError) -> Failure:
    return Failure(Kind.SETUP, f"cannot read {shown}: {exc.strerror}")


@contextlib.contextmanager
def _pinned(path: str | None, judged: tuple[int, str] | None, shown: str = "") -> Iterator[int | None]:
    """``judged`` (a handle on ``path`` and its text, consumed) pinned (``safepath.pin``) while
    the block runs; yields the handle, or None when there is none. A pin refused (``path``
    pinned already, as another directory) is a refusal naming ``shown`` (``path``), the handle closed."""
    if path is None or judged is None:
        yield None
        return
    from ..pathtrust import UnsafePath
    from ..safepath import pin, unpin

    handle, here = judged
    try:
        pin(path, (os.dup(handle), os.path.normpath(here)))
    except BaseException as exc:
        os.close(handle)
        if isinstance(exc, UnsafePath):
            raise _refused(shown or path, exc) from None
        raise
    try:
        yield handle
    finally:
        unpin(path)
        os.close(handle)


def _reached(path: str) -> tuple[int, str] | None:
    """``path``'s directory as ``userwalk.input_directory`` reaches it (its handle and shown
    name), or None where that is no directory."""
    from ..userwalk import input_directory

    try:
        return input_directory(path)
    except OSError:
        return None


def stream_paths(given: list[str], directory: int | None) -> list[str]:
    """The streams named: files as given, the directory given (``directory``, its handle from
    ``judged_directory``) as its ``*.jsonl`` files (sorted). An entry refused (not a regular
    file, or another user's link) is skipped with a warning saying why; a directory left with
    none fails, with the first refusal when there was one."""
    if directory is not None:
        try:
            names = sorted(name for name in _listed(directory) if name.endswith(STREAM_SUFFIX))
        except OSError as exc:
            raise Failure(Kind.SETUP, f"cannot list {given[0]}: {exc.strerror}") from None
        refusals: list[str] = []
        paths = [path for path in (os.path.join(given[0], name) for name in names) if _regular(path, refusals)]
        if not paths and refusals:
            raise Failure(Kind.SETUP, f"{given[0]} holds no *{STREAM_SUFFIX} stream to read: {refusals[0]}")
        if not paths:
            raise Failure(Kind.EVENTS_INVALID, f"{given[0]} holds no *{STREAM_SUFFIX} event stream")
        return paths
    return list(given)


def is_directory(path: str) -> bool:
    """Whether ``path`` is a directory, its last component reached as a stream's name is
    (``userwalk.input_directory``): another user's link there is not followed to find out
    (whatever it leads to, the name is then read as a stream, and refused there in the same
    words). An empty path is none (read as a stream, it is missing)."""
    reached = _reached(path)
    if reached is not None:
        os.close(reached[0])
    return reached is not None


def listing(directory: int) -> int:
    """A handle to list the judged directory ``directory`` (its ``O_PATH`` handle) by, never
    what its name leads to now."""
    from ..pathreopen import reopen

    return reopen(os.dup(directory), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, "the directory")


def _listed(directory: int) -> list[str]:
    """The names in the judged directory ``directory`` (its handle)."""
    listing_fd = listing(directory)
    try:
        return os.listdir(listing_fd)
    finally:
        os.close(listing_fd)


def _regular(path: str, refusals: list[str]) -> bool:
    """Whether a directory's ``*.jsonl`` entry is a regular file to read, judged as it will be
    opened (``userfiles.input_stat``: nothing opened, no link of another user's followed).
    Anything else (a FIFO, whose open would wait, a link to ``/dev/zero``, which never ends,
    another user's link, even to a stream of theirs) is skipped with a warning, the refusal
    added to ``refusals``. Checked again where it is read (``reading.read_lines``)."""
    from ..diagnostics import warn
    from ..pathtrust import UnsafePath
    from ..userfiles import input_stat, kind

    try:
        found = input_stat(path)
    except UnsafePath as exc:
        refusals.append(str(exc.strerror))
        warn(f"skipping {path}: {exc.strerror}")
        return False
    except OSError as exc:
        warn(f"skipping {path}: {exc.strerror}")
        return False
    if not stat.S_ISREG(found.st_mode):
        warn(f"skipping {path}: it is {kind(found.st_mode)}, not a regular file")
        return False
    return True


def bench_exports(given: list[str]) -> list | None:
    """The benchmark exports named (read and checked), or None when these are event streams:
    one export gives its page, two (OLD NEW) the new one's drawn against the old. A name refused
    (another user's link) beside an export is refused as a file, not as an event stream; among
    streams, it is read as one and refused there."""
    from ..benchmark import recorded
    from ..pathtrust import UnsafePath
    from . import bench_page

    if any(is_directory(path) for path in given):
        return None
    found: list[bool] = []
    refused: list[str] = []
    for path in given:
        try:
            found.append(bench_page.is_bench_export(path))
        except UnsafePath as exc:
            found.append(False)
            refused.append(f"cannot read {path}: {exc.strerror}")
    if not any(found):
        return None
    if refused:
        raise Failure(Kind.SETUP, refused[0])
    if len(given) > 2 or not all(found):
        raise usage(
            "report takes one benchmark export, or two to compare (OLD.json NEW.json), and no event stream beside them"
        )
    return [recorded.from_json(recorded.load(path), path) for path in given]


def usage_record(path: str) -> dict:
    """A run's ``--usage-file``: one JSON object, from a regular file of at most 1 MiB."""
    from ..bounded import USAGE_FILE, InputError, load_file
    from ..userfiles import open_judged

    try:
        record = load_file(path, USAGE_FILE, opener=open_judged)
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot read --usage-file {path}: {exc.strerror}") from None
    except InputError as exc:
        raise Failure(Kind.EVENTS_INVALID, str(exc)) from None
    if not isinstance(record, dict):
        raise Failure(Kind.EVENTS_INVALID, f"--usage-file {path} does not hold a JSON object")
    return record


def live_streams() -> set[str]:
    """The streams a registered, not confirmed stale, runner still writes (by real path); an
    unreadable registry only means nobody can be shown as still writing."""
    from ..registry import scan
    from ..registry.lock import Health

    try:
        view = scan.read(Kind.REGISTRY_SETUP)
    except Failure:
        return set()
    return {  # a run whose --jsonl another run held names the file but writes nothing there
        os.path.realpath(entry.record.stream)
        for entry in view.entries
        if entry.record.stream is not None and entry.health() is not Health.STALE
    }

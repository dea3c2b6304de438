"""Command templates: ``batch [OPTIONS] -- CMD ARG... ::: A B C``, GNU parallel's way of naming
many jobs at once, expanded into the manifest lines a user would otherwise write by hand.

The expansion feeds the one manifest path (``manifest.jobs_from``): each job is a decoded line,
``{"args": [...], "id": ..., <the batch's job keys>}``, numbered as a manifest's lines are, so
it is checked, keyed and digested exactly as a line of a file would be, and ``--dry-run`` prints
those very lines. It is a generator, read as the jobs are taken, so arguments from a pipe come
as they are written and the manifest's bounds hold (a line, the whole, the number of jobs).
``as_they_come``: a pipe (stdin, a ``::::`` FIFO) that is the outermost source is read only when
it is readable (``piped``), and ``piped.Awaited`` stands where the next job has not come yet;
ids are kept unique in a fixed-size filter (``unique.Names``), so the expansion holds nothing
per job.

Substitution is into argv elements, never through a shell: an argument holding spaces, quotes or
``$(...)`` stays one element, byte for byte (a line that is not UTF-8 is carried as the OS's
bytes). Sources, as parallel has them: ``:::`` arguments, ``::::`` files of lines (``-`` is
stdin), ``:::+``/``::::+`` linked to the source before, one to one; stdin's lines when no source
is given. Several sources give every combination, the first one outermost (and read as it comes;
the others are read whole first, since each is walked again for every value of the one before).
"""

from __future__ import annotations

import os
import re
import sys
import stat
from itertools import product
from math import prod

from ..diagnostics import note, shown, warn
from ..bounded import MiB, InputError, blocking
from ..errors import Failure, Kind, usage
from ..text import cut as quoted
from ..text import plural
from ..userfiles import open_judged
from .manifest import JOB_ID, MAX_JOBS, OUT_NAMES, too_many
from .argument_lines import ARGUMENTS, source_lines, source_lines_as_they_come
from .piped import Awaited, in_order
from .unique import Names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

TERMINAL_NOTE = (
    "note: batch: reading the template's arguments from the terminal, one a line (Ctrl-D ends them);"
    " `::: A B` or `:::: FILE` names them instead"
)
ARGS_BYTES = MiB  # one job's expanded command, at most what a manifest line may hold
SEPARATORS = {":::": (False, False), ":::+": (False, True), "::::": (True, False), "::::+": (True, True)}
# {} {.} {/} {//} {/.} and their numbered forms {1} {1.} ... (counted from the last: {-1} ...),
# {#} (the job's number), {%} (its slot)
_REFERENCE = re.compile(r"\{(?:(#)|(%)|(-?[1-9][0-9]{0,3})?(//|/\.|/|\.)?)\}")
# GNU parallel's {=perl=} (and {=N perl=}), found across words as parallel joins them; as in
# parallel, one holding another {= is none ({={=} is text), so it ends at the first =} after it
_PERL = re.compile(r"\{=(?:(?!\{=).)*?=\}", re.S)
_EXTENSION = re.compile(r"\.[^/.]*\Z")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
ID_STEM = 100  # characters of an argument kept in a derived id, room left for "-<job number>"
SLOT = "{%}"  # kept in a job's args as is: the slot is known only when the job starts


class Ref:
    """One replacement string: the source it names (None: every source), how it is cut
    (``modifier``), or the job's number (``seq``) or slot (``slot``)."""

    __slots__ = ("source", "modifier", "seq", "slot")

    def __init__(self, source: int | None, modifier: str, seq: bool = False, slot: bool = False):
        self.source = source
        self.modifier = modifier
        self.seq = seq
        self.slot = slot


def pieces(word: str) -> list[str | Ref]:
    """``word`` as literal text and replacement strings; text that is no replacement string
    (``{x}``, ``{0}``, ``{-0}``, ``{01}``) stays as it is, as parallel leaves ``{x}`` (its
    ``{0}`` and ``{01}`` are ``{}`` and ``{1}``, its ``{-0}`` empty: docs/differences.md)."""
    found: list[str | Ref] = []
    at = 0
    for match in _REFERENCE.finditer(word):
        if match.start() > at:
            found.append(word[at : match.start()])
        seq, slot, number, modifier = match.groups()
        found.append(Ref(None if number is None else int(number), modifier or "", bool(seq), bool(slot)))
        at = match.end()
    if at < len(word):
        found.append(word[at:])
    return found


def cut(value: str, modifier: str) -> str:
    """An argument as a modifier shows it: ``.`` without its extension, ``/`` its base name,
    ``//`` its directory (``.`` when it names none, as dirname(1)), ``/.`` both."""
    if modifier in ("/", "/."):
        value = value.rpartition("/")[2]
    if modifier in (".", "/."):
        return _EXTENSION.sub("", value)
    if modifier == "//":
        stripped = value.rstrip("/") or value[:1]
        head, slash, _ = stripped.rpartition("/")
        return "." if not slash else head.rstrip("/") or "/"
    return value


class Template:
    """A command template: the command's words as pieces, the id template's, and the sources
    (``split`` reads them from the words after ``--``)."""

    def __init__(self, command: list[str], sources: list[tuple[bool, bool, list[str]]], id_template: str | None):
        if not command:
            raise usage("the command template after -- names no program")
        for what, words in (("", command), ("--id: ", [id_template or ""])):
            perl = _PERL.search(" ".join(words))
            if perl is not None:  # parallel would run it as code; passed on as text it names another file
                raise usage(
                    f"{what}{quoted(perl.group(), 64)} is GNU parallel's Perl expression, and a template here runs "
                    "no code: compute the value in the command (sh -c '...' sh {}) or in its input"
                )
        self.command = [pieces(word) for word in command]
        refs = [piece for word in self.command for piece in word if isinstance(piece, Ref)]
        self.appends = not refs  # no replacement string: the arguments are appended (parallel's habit)
        self.sources = sources
        self.groups = _groups(sources)  # linked sources together, the first outermost
        # An outermost source opened (the first and those linked to it: the others are read whole
        # before the first job) is a pipe, a FIFO or a terminal, which may never end: the jobs a
        # stop leaves unread are then not read; ``:::`` arguments and regular files are, to be
        # recorded as never started, as a manifest's are.
        self.waits = False
        for group in self.groups:
            if all(not is_file for is_file, _, _ in group) and len({len(given) for _, _, given in group}) > 1:
                raise _unlinked()  # known from argv: refused before any job runs, not after some
        self.id = None if id_template is None else pieces(id_template)
        if self.id is not None and any(isinstance(piece, Ref) and piece.slot for piece in self.id):
            raise usage("--id cannot use {%}: the slot is known only when the job starts")
        # values a job gets: one per ::: source, one per file of a :::: source, one from stdin
        width = sum(len(given) if is_file else 1 for is_file, _, given in sources) or 1
        for word in [*self.command, *([self.id] if self.id is not None else [])]:
            for piece in word:
                if isinstance(piece, Ref) and piece.source is not None:
                    if abs(piece.source) > width:
                        which = f"{-piece.source} from the last" if piece.source < 0 else piece.source
                        raise usage(
                            f"{{{piece.source}}} names input source {which}, and there "
                            f"{'is' if width == 1 else 'are'} only {plural(width, 'input source')}"
                        )
                    if piece.source < 0:  # parallel's {-N}: the N-th source counted from the last
                        piece.source += width + 1

    def args(self, values: tuple[str, ...], number: int) -> tuple[list[str], list[int]]:
        """One job's argv from its arguments (one per source) and its number, and the indexes of
        the elements that hold ``{%}`` (its ``slot_args``)."""
        if self.appends:
            return [*("".join(word) for word in self.command), *values], []  # type: ignore[arg-type]
        argv: list[str] = []
        slotted: list[int] = []
        for word in self.command:
            slots = sum(isinstance(piece, Ref) and piece.slot for piece in word)
            if slots:
                slotted.append(len(argv))
            if len(word) == 1 and isinstance(word[0], Ref) and word[0].source is None and not word[0].seq:
                ref = word[0]
                if ref.slot:
                    argv.append(SLOT)
                else:  # a word that is only {} (or {.}, ...): one element per source, as parallel's
                    argv.extend(cut(value, ref.modifier) for value in values)
                continue
            filled = self._filled(word, values, number)
            if slots and filled.count(SLOT) != slots:  # a {%} of an argument's, or made with the text around it
                raise usage(
                    f"job {number}: args item {len(argv)}, once filled, holds {SLOT} beyond the template's: the slot "
                    f"would replace both; give {SLOT} a word of its own"
                )
            argv.append(filled)
        return argv, slotted

    def job_id(self, values: tuple[str, ...], number: int) -> str:
        """The id's text before it is made safe: ``--id``'s template filled, else the arguments."""
        if self.id is None:
            return "_".join(values)
        return self._filled(self.id, values, number)

    def _filled(self, word: list[str | Ref], values: tuple[str, ...], number: int) -> str:
        parts = []
        for piece in word:
            if isinstance(piece, str):
                parts.append(piece)
            elif piece.seq:
                parts.append(str(number))
            elif piece.slot:
                parts.append(SLOT)
            elif piece.source is None:
                parts.append(" ".join(cut(value, piece.modifier) for value in values))
            else:
                parts.append(cut(values[piece.source - 1], piece.modifier))
        return "".join(parts)


def split(words: list[str], id_template: str | None = None) -> Template:
    """The words after ``--``: the command up to the first separator, then the sources."""
    at = next((index for index, word in enumerate(words) if word in SEPARATORS), len(words))
    sources: list[tuple[bool, bool, list[str]]] = []
    kind = None
    for word in words[at:]:
        if word in SEPARATORS:
            kind = SEPARATORS[word]
            if kind[1] and not sources:
                raise usage(f"{word} links its arguments to the source before it, and there is none")
            sources.append((kind[0], kind[1], []))
            continue
        sources[-1][2].append(word)
    for is_file, _, source in sources:
        if not source:
            raise usage(f"{'::::' if is_file else ':::'} gives no {'file' if is_file else 'argument'}")
    return Template(words[:at], sources, id_template)


def expand(template: Template, keys: dict, stdin=None, *, as_they_come: bool = False) -> Iterator[dict | Awaited]:
    """Each job as its manifest line's decoded value, in order, with ``keys`` (the batch's job
    keys) on every one; a bad source or an overlong command is a Failure naming the job.
    ``as_they_come``: an outermost pipe is not waited on (``Awaited`` while it has no line)."""
    used = Names()
    stdin = stdin if stdin is not None else sys.stdin.buffer
    number = 0
    for values in _combinations(template, stdin, as_they_come):
        if isinstance(values, Awaited):
            yield values
            continue
        number += 1
        if number == 2 and template.id is not None and not any(isinstance(piece, Ref) for piece in template.id):
            warn(_LITERAL_ID.format(quoted("".join(str(piece) for piece in template.id), 64)))
        argv, slotted = template.args(values, number)
        if sum(len(arg) for arg in argv) > ARGS_BYTES:
            raise usage(f"job {number}: its command is longer than 1 MiB, the most a manifest line may hold")
        line: dict[str, object] = {
            "args": [_os_form(arg) for arg in argv],
            "id": safe_id(template.job_id(values, number), number, used),
        }
        if slotted:
            line["slot_args"] = slotted
        yield {**line, **keys}


# ``--id`` with no replacement string, said once a second job is made from it: GNU parallel's
# ``--id`` names a semaphore (with ``--semaphore``), and a parallel user's word here is every job's id.
_LITERAL_ID = (
    "--id '{}' has no replacement string, so it is every job's id, numbered to keep each unique "
    "(GNU parallel's --id names a semaphore: batch has none; --group-limit NAME=N caps the jobs of a group)"
)


def safe_id(text: str, number: int, used: Names) -> str:
    """An id within the manifest's grammar made from ``text``: every run of other characters one
    ``_``, no leading ``.``/``-``/``_``, at most ``ID_STEM`` characters, ``job`` for nothing left;
    ``-<job number>`` (then ``-<k>``) added when another job may have it, so every id is unique.
    ``used`` is a filter that never misses an id it was given, and rarely (about one id in 400
    after a million jobs, never in practice below 100,000) takes a new one for one it holds: such
    an id is numbered too, still unique, still the same for the same input."""
    stem = _UNSAFE.sub("_", text).lstrip("._-")[:ID_STEM] or "job"
    if stem in OUT_NAMES:
        stem = f"job-{stem}"
    found = stem
    extra = 1
    while used.noted("id", found):
        found = f"{stem}-{number}" if extra == 1 else f"{stem}-{number}-{extra}"
        extra += 1
    assert JOB_ID.fullmatch(found)
    return found


def _os_form(arg: str) -> str | bytes:
    """An argument as the manifest path takes it: text, or the OS's bytes when a line was not
    UTF-8 (its undecodable bytes are U+DC80-U+DCFF here, which the text rule refuses in a str)."""
    if arg.isascii():
        return arg
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(arg)
    return arg


def _groups(sources: list[tuple[bool, bool, list[str]]]) -> list[list[tuple[bool, bool, list[str]]]]:
    """The sources as the groups whose values are zipped: each ``:::`` source with the ``:::+``
    and ``::::+`` ones after it; each file of a ``::::`` source a group of its own."""
    groups: list[list[tuple[bool, bool, list[str]]]] = []
    for is_file, linked, given in sources:
        entries = [(True, linked, [path]) for path in given] if is_file else [(False, linked, given)]
        if linked:
            groups[-1].extend(entries)  # ::::+ with several files links each of them
        else:
            groups.extend([entry] for entry in entries)
    return groups


def _unlinked() -> Failure:
    return usage(":::+ links sources of different lengths: each value needs one partner")


def _combinations(template: Template, stdin, as_they_come: bool = False) -> Iterator[tuple[str, ...] | Awaited]:
    """Every combination of the sources' arguments, the first source outermost; ``:::+``
    sources are zipped into the one before (a length mismatch is a usage error).
    ``as_they_come``: the first source, when it is one file or stdin alone, is read without
    waiting (``Awaited`` between its lines); the others are read whole first, as before."""
    if not template.groups and _on_terminal(stdin):  # a forgotten ::: would look like a hang
        note(shown(TERMINAL_NOTE))
    groups = template.groups or [[(True, False, ["-"])]]  # no source: stdin's lines
    outer = groups[0]
    alone = as_they_come and len(outer) == 1 and outer[0][0]  # one file or stdin, linked to none
    streams = [_file_lines(given[0], stdin, alone, template) if is_file else given for is_file, _, given in outer]
    first = _singles(streams[0]) if alone else _zipped(streams)
    rest = [
        list(_zipped([_file_lines(given[0], stdin) if is_file else given for is_file, _, given in group]))
        for group in groups[1:]
    ]
    if not any(is_file for is_file, _, _ in outer) and len(outer[0][2]) * prod(map(len, rest)) > MAX_JOBS:
        raise too_many()  # known before the first job: refused before any runs
    for head in first:
        if isinstance(head, Awaited):
            yield head
            continue
        for tail in product(*rest):
            yield head + tuple(value for values in tail for value in values)


def _zipped(streams: list) -> Iterator[tuple[str, ...]]:
    """Linked sources (lists, or files read whole: no ``Awaited``), one value of each at a
    time; one that ends before another is an error."""
    iterators = [iter(stream) for stream in streams]
    while True:
        row = [next(iterator, None) for iterator in iterators]
        if all(value is None for value in row):
            return
        if any(value is None for value in row):
            raise _unlinked()
        yield tuple(row)  # type: ignore[arg-type]


def _singles(values: Iterable[str | Awaited]) -> Iterator[tuple[str, ...] | Awaited]:
    """One source's values as one-value rows, ``Awaited`` passed on as it is."""
    for value in values:
        yield value if isinstance(value, Awaited) else (value,)


def _file_lines(path: str, stdin, as_they_come: bool = False, outer: Template | None = None) -> Iterator[str | Awaited]:
    """A ``::::`` file's lines (``-``: stdin), opened and read within ``ARGUMENTS``' bounds;
    ``as_they_come``: without waiting on a pipe (``Awaited`` between lines). ``outer``: the
    template it is an outermost source of, told when what was opened is no regular file."""
    read = source_lines_as_they_come if as_they_come else source_lines
    if path == "-":
        _note_kind(stdin, outer)
        yield from read(stdin, "stdin")
        return
    try:
        fd = open_judged(path, ARGUMENTS)
        handle = os.fdopen(blocking(fd) if as_they_come else in_order(fd), "rb")  # the first: polled
    except OSError as exc:
        raise Failure(Kind.SETUP, f"cannot read the argument file {path}: {exc.strerror}") from None
    except InputError as exc:
        raise Failure(Kind.SETUP if "it is a" in str(exc) else Kind.USAGE, str(exc)) from None
    with handle:
        _note_kind(handle, outer)
        yield from read(handle, path)


def _on_terminal(handle) -> bool:
    try:
        return os.isatty(handle.fileno())
    except (OSError, AttributeError, ValueError):
        return False


def _note_kind(handle, outer: Template | None) -> None:
    """``outer.waits`` once an outermost source's descriptor is no regular file (decided per
    descriptor opened, as ``piped`` decides whether to wait on it); one not known, too."""
    if outer is None:
        return
    try:
        outer.waits |= not stat.S_ISREG(os.fstat(handle.fileno()).st_mode)
    except (OSError, AttributeError, ValueError):
        outer.waits = True

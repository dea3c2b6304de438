"""The batch's own flags as every templated job's manifest keys (``--env``, ``--cwd``,
``--timeout``, ...), and a template's jobs read, or printed (``--dry-run``), through the one
manifest path.

The flags are ``run``'s own options (``grammar.run.RUN_OPTIONS``), so a value is written as the
flag would be and checked by the same grammar once it is a key; a key holds the text as given
(a repeatable flag a list of its texts), which is what a manifest line would hold.
"""

from __future__ import annotations

import contextlib
import math

from ..errors import Failure, usage
from ..text import cut
from ..grammar import path
from ..grammar.keywords import BY_KEYWORD
from ..jsontext import dumps
from . import manifest
from .jobkeys import refuse_own_label
from .piped import Awaited, wait_for
from .template import expand, split

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from .ci import Partition
    from .limits import JobTimeout
    from .template import Template

# The run options a template may give every job: what a manifest line may set and the batch does
# not decide itself (its stream, capture directory, terminal; its --timeout is its own flag).
JOB_KEYS = (
    "cwd",
    "env",
    "env_file",
    "env_remove",
    "env_clear",
    "idle_timeout",
    "grace",
    "labels",
    "max_memory",
    "max_processes",
    "cpu_quota",
    "capture_max_bytes",
    "capture_overflow",
    "capture_keep",
    "stdin_file",
    "snapshot_interval",
)
JOB_KEY_OPTIONS = tuple(BY_KEYWORD[key] for key in JOB_KEYS)


def job_keys(args, timeout: JobTimeout | None) -> dict:
    """The keys the flags give every job; an absolute ``--timeout`` is one of them (a relative
    one stays the batch's, since it follows the jobs that ended). An empty path (``--cwd ''``)
    is refused here, naming the flag as ``run`` does: no replacement string can fill it, and
    every job's line would name the key."""
    keys: dict[str, object] = {}
    for option in JOB_KEY_OPTIONS:
        value = getattr(args, option.dest)
        if _given(value):
            if option.read is None:  # a path's flag (a switch's value is no path)
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, str):
                        path(item, option.flag)
            if option.keyword == "env":
                _no_bare_name(value)
            if option.keyword == "labels":  # before any job: with no input there is none to name it
                given = (item.partition("=") for item in value)  # a value None: no "=" given
                refuse_own_label(((key, rest if sep else None) for key, sep, rest in given), flag=True)
            keys[option.keyword] = list(value) if isinstance(value, list) else value
    if timeout is not None and timeout.percent is None:
        keys["timeout"] = args.timeout
    return keys


def _no_bare_name(given: list[str]) -> None:
    """``--env NAME``, GNU parallel's (a variable copied to remote hosts), refused naming the flag
    and what it means there, not as job 1's ``env`` key: here every job has the batch's environment."""
    for item in given:
        if "=" not in item:
            raise usage(
                f"invalid value '{cut(item)}' for '--env <K=V>': expected KEY=VALUE (GNU parallel's --env NAME "
                "copies a variable to remote hosts; here every job inherits the batch's environment)"
            )


def _given(value) -> bool:
    """None, False and [] are a flag not given; an empty value (``--cwd ''``) is given, and
    refused (an empty path by ``job_keys``, another by the job's grammar)."""
    return value is not None and value is not False and value != []


def refuse_template_flags(args) -> None:
    """A manifest names its own keys: the template's flags are refused beside one."""
    given = [option.flag for option in JOB_KEY_OPTIONS if _given(getattr(args, option.dest))]
    given += [flag for flag, dest in (("--id", "id"), ("--dry-run", "dry_run")) if getattr(args, dest)]
    if given:
        raise usage(f"{given[0]} belongs to a command template (after --): a manifest line names its own keys")


def template_jobs(words: list[str], id_template: str | None, keys: dict, *, whole: bool = True):
    """The template's jobs, each checked as a manifest line (numbered as ``--dry-run`` prints them):
    a list (``whole``: something needs them all before the first starts), else ``Streamed``."""
    template = split(words, id_template)
    if whole:
        return manifest.jobs_from(expand(template, keys), manifest.JOB)
    return Streamed(expand(template, keys, as_they_come=True), template)


def reads_rest(jobs) -> bool:
    """Whether the jobs a stop or the halt left unstarted are read to be recorded: a manifest's,
    ``:::`` arguments', a regular file's; not a template's pipe's (``Streamed.ends``), whose
    producer may never end."""
    return getattr(jobs, "ends", True)


def input_left(jobs) -> bool:
    """Whether a template's pipe, not read after a stop or the halt, had more to give as the
    batch ends (``Streamed.at_end``): its jobs' number is then unknown."""
    return not reads_rest(jobs) and not jobs.at_end()


class Streamed:
    """A template's jobs made as its arguments come, once, each checked as a manifest line as it
    is made (its ids unique by their making: ``template.safe_id``), none kept after it is handed
    on. Iterated once: a job, or ``piped.Awaited`` while the next one's line has not come (the
    batch waits on that beside its jobs, ``piped.until_readable``). ``len``: the jobs made so
    far, all of them once ``complete``; its truth waits for the first job or the end (an empty
    input is no batch). ``ends``: its arguments come with no read that may wait
    (``Template.waits`` not set, asked after a stop), so the rest are read to be recorded as
    never started (``Schedule``); a pipe is never read again then: its producer may never end."""

    __slots__ = ("_values", "_jobs", "_first", "_templates", "_made", "complete", "_template")
    any_needs = False  # a template gives no job ``needs``: no graph to check (graph.has_needs)
    as_they_come = True  # made as its arguments come: how many there are is known only at their end

    def __init__(self, values: Iterator[dict | Awaited], template: Template):
        self._template = template
        self._values = values
        self._jobs = self._made_jobs()
        self._first: manifest.Job | None = None
        self._templates: dict = {}
        self._made = 0
        self.complete = False

    @property
    def ends(self) -> bool:
        return not self._template.waits

    def at_end(self) -> bool:
        """Whether its arguments have ended, or end without a wait: one step of their read, which
        reads a pipe only when it is readable (``piped.lines_as_they_come``), taken after a stop
        or the halt, whose producer had closed its end with nothing left in it, or whose line
        read but not yet made a job (a job made here is none of the batch's)."""
        if not self.complete:
            with contextlib.suppress(Failure, StopIteration):  # a bad line, or a read that failed: not at its end
                next(self._jobs)
        return self.complete

    def total(self) -> int | None:
        """How many jobs there are, once known: from the start when every source is ``:::``
        arguments (their product, linked ones one to one), else once the arguments have ended."""
        groups = self._template.groups
        if groups and not any(is_file for group in groups for is_file, _, _ in group):
            return math.prod(len(group[0][2]) for group in groups)
        return self._made if self.complete else None

    def __len__(self) -> int:
        return self._made

    def __bool__(self) -> bool:
        while self._first is None and not self.complete:
            job = next(self._jobs, None)
            if isinstance(job, Awaited):
                wait_for(job.fd)
            else:
                self._first = job
        return self._first is not None

    def __iter__(self) -> Iterator[manifest.Job | Awaited]:
        """The batch's read, its first job made before it began (``__bool__``): a refusal met past
        it (a later argument line's NUL) is the running batch's failure, not a parse error, even
        when ``--resume`` skipped every job before it: the batch had begun its record."""
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        try:
            yield from self._jobs
        except Failure as failure:
            failure.parse_time = False
            raise

    def _made_jobs(self) -> Iterator[manifest.Job | Awaited]:
        for value in self._values:
            if isinstance(value, Awaited):
                yield value
                continue
            if self._made == manifest.MAX_JOBS:
                raise manifest.too_many()
            self._made += 1
            yield manifest.job_from(self._made, value, self._templates, what=manifest.JOB)
        self.complete = True


def manifest_lines(words: list[str], id_template: str | None, keys: dict, share: Partition | None) -> Iterator[bytes]:
    """``--dry-run``: each job's manifest line, checked as the batch would check it first; with
    ``--partition``, only the lines of its ``share`` (every line checked still)."""
    templates: dict = {}
    for number, value in enumerate(expand(split(words, id_template), keys), 1):
        assert isinstance(value, dict)  # nothing is Awaited: the sources are read as they come, waiting
        job = manifest.job_from(number, value, templates, what=manifest.JOB)
        if share is not None and not share.holds(number - 1, job.id):
            continue
        shown = {key: _text(item) for key, item in value.items()}
        yield dumps(shown).encode("utf-8", "surrogateescape") + b"\n"


def _text(value):
    """A value as JSON shows it: an argument the OS gave as bytes in its decoding (a line that
    was not UTF-8 then prints its own bytes, which a manifest reader refuses, as it must)."""
    if isinstance(value, list):
        return [_text(item) for item in value]
    if isinstance(value, bytes):
        import os

        return os.fsdecode(value)
    return value

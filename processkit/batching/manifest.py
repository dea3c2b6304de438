"""A manifest: untrusted JSONL, one job a line, read and checked whole before anything starts,
then read again as the jobs start (``Manifest``): memory does not grow with the number of jobs.

Each line is an object: ``args`` (the command, a list of strings), an optional ``id`` (the
name of the job's directory; by default ``job-<line number>``), and any Python API keyword
(``docs/api.md``). The keys are read as the API's keywords are (``grammar.keywords``) and the
RunSpec is built by the run grammar (``grammar.run.build``), so a value is checked exactly as the
flag or the keyword would be, and an error names the key; that RunSpec is kept as the job's
template (one for all the jobs with the same keywords), so a job starts without reading the line
again. Keywords that would give a job the batch's terminal or files of its choosing are refused
(``jobkeys.REFUSED``).
"""

from __future__ import annotations

import json
import os
import re
from hashlib import sha256

from ..bounded import MANIFEST, InputError, file_kind, lines, never_waits
from ..errors import Failure, Kind, usage
from ..grammar import KEYS
from ..grammar import keywords as run_keywords
from ..grammar.run import build
from ..spec import RunSpec, new_run_id
from .blocks import in_blocks
from ..rundir import BATCH_LABEL
from .jobkeys import PLAIN, REFUSED, Plan, line_keys, refuse_own_label, take
from .manifest_lines import copied, numbered_values, seekable
from .unique import Names
from .where import JOB, LINE, at, first_at, more_than, not_a_job

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

MAX_JOBS = 1_000_000
TEMPLATES_KEPT = 256  # the RunSpecs kept by keywords while a manifest is read: bounded, not one a job
JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# The names the batch gives its own files in --out (the recorder's summary, index's page): a job's
# directory by such a name would take the file's place.
OUT_NAMES = ("summary.jsonl", "index.html")


# The options the batch gives every job (job_spec puts its own stream, capture directory and
# batch label in): a job is checked with them, so a keyword they conflict with is refused up front.
JOB_OPTIONS = {"no_echo": True, "capture_dir": "capture", "jsonl": "events.jsonl"}


class Job:
    """One manifest line: its id, command, the RunSpec its keywords give (``template``, checked
    by ``run``'s parser), and whether its argv is ``secret`` (kept out of the summary and page)."""

    __slots__ = ("id", "args", "template", "secret", "digest", "plan")

    def __init__(
        self,
        job_id: str,
        args: list[str],
        template: RunSpec,
        secret: bool = False,
        digest: str = "",
        plan: Plan = PLAIN,
    ):
        self.id = job_id
        self.args = args
        self.template = template
        self.secret = secret
        self.digest = digest  # of the whole line: --resume runs a job again once it changed
        self.plan = plan  # its scheduling keys (jobkeys): needs, slots, group, inputs, slot_args


def job_spec(
    job: Job,
    *,
    jsonl: str,
    capture_dir: str,
    label: str,
    timeout_ms: int | None = None,
    args: list[str] | None = None,
) -> RunSpec:
    """One attempt's RunSpec: what ``run`` parses from ``--no-echo --capture-dir CAPTURE_DIR
    --label batch=LABEL``, the job's keywords as flags, ``--jsonl JSONL -- ARGS`` (the template
    with these put in). A fresh run id per attempt unless the job names one; the job's own ``timeout`` wins over the batch's
    ``timeout_ms``. (``--keep failed``'s memfds and late publication are the batch's wiring:
    ``RunContext``.) ``args``: the job's command with its slot put in (``jobkeys.with_slot``), else its own."""
    template = job.template
    return template.replace(
        argv=tuple(job.args if args is None else args),
        jsonl=jsonl,
        capture_dir=capture_dir,
        timeout_ms=template.timeout_ms if template.timeout_ms is not None else timeout_ms,
        run_id=template.run_id if template.run_id_given else new_run_id(),
        labels=_labels(template.labels, label),
    )


_LABELS: dict[tuple, tuple[tuple[str, str], ...]] = {}  # ``_labels``' answers: a batch asks the same once a job


def _labels(given: tuple[tuple[str, str], ...], label: str) -> tuple[tuple[str, str], ...]:
    """The job's labels and ``batch=LABEL`` (a job's own ``batch`` is refused: ``job_from``), sorted."""
    key = (given, label)
    try:
        labels = _LABELS.get(key)
        keep = True
    except TypeError:  # a value no dictionary takes (an API caller's): worked out each time
        labels, keep = None, False
    if labels is None:
        labels = tuple(sorted({**dict(given), BATCH_LABEL: label}.items()))
        if keep:
            if len(_LABELS) >= TEMPLATES_KEPT:
                _LABELS.clear()
            _LABELS[key] = labels
    return labels


class Manifest:
    """A manifest checked whole (``read``), then read again as its jobs on each pass (``iter``):
    each job is built afresh from its line, in blocks (``blocks.in_blocks``: 32 lines, fewer
    when long) before it starts, so the batch keeps nothing per job it has not yet neared or has
    finished; ``len`` is how many jobs it holds. A file is read again from its start; a pipe was
    copied to an unnamed temporary file (``spool``) as it was checked. A line that no longer
    reads as it did, a job past the count checked (a line appended) or an end before it (the
    file cut) ends the pass with a setup Failure that says the file changed since."""

    __slots__ = ("_handle", "_path", "_total", "_spool", "any_needs")

    def __init__(self, handle, path: str, total: int, spool=None, any_needs: bool = False):
        self._handle = handle if spool is None else spool
        self._path = path
        self._total = total
        self._spool = spool
        self.any_needs = any_needs  # some job has ``needs``: found by the check, so no pass asks again

    def __len__(self) -> int:
        return self._total

    def __iter__(self) -> Iterator[Job]:
        return in_blocks(self._jobs())

    def _jobs(self) -> Iterator[tuple[Job, int]]:
        """Each job with its line's length; the jobs counted, so a pass gives the checked jobs
        and no other: an appended job never starts unchecked (its id could be another's)."""
        self._handle.seek(0)
        templates: dict[str, RunSpec] = {}
        try:
            for number, value, size in numbered_values(lines(self._handle, self._path, MANIFEST), self._total):
                yield job_from(number, value, templates, env_files=False), size
        except (Failure, InputError) as exc:
            message = exc.message if isinstance(exc, Failure) else str(exc)
            raise Failure(Kind.SETUP, f"the manifest changed since it was checked: {message}") from None
        except OSError as exc:
            raise Failure(Kind.SETUP, f"cannot read the manifest again: {exc.strerror}") from None

    def close(self) -> None:
        """The spool goes; the stream named stays its opener's."""
        if self._spool is not None:
            self._spool.close()
            self._spool = None


def read(stream, path: str) -> Manifest:
    """The manifest open as binary ``stream``, checked whole before anything starts, each line
    as it is read, so the first bad line, or the first past a bound (``bounded.MANIFEST``: a
    line, the whole), is a usage Failure before the rest is read; then duplicate ids and run ids
    (``unique``). A stream that cannot seek (a pipe) is spooled as it is read."""
    spool = None
    if not seekable(stream):
        import tempfile

        spool = tempfile.TemporaryFile()
    try:
        first = True

        def passes():
            nonlocal first
            if first:
                first = False
                numbered = lines(stream, path, MANIFEST)
                return numbered_values(numbered if spool is None else copied(numbered, spool))
            source = stream if spool is None else spool
            source.seek(0)
            return numbered_values(lines(source, path, MANIFEST))

        try:
            total, any_needs = _check(passes)
        except InputError as exc:
            raise usage(str(exc)) from None
    except BaseException:
        if spool is not None:
            spool.close()
        raise
    return Manifest(stream, path, total, spool, any_needs)


def parse(raw_lines: list[bytes]) -> list[Job]:
    """The jobs of a manifest's lines, or a usage Failure naming the first bad line."""
    jobs: list[Job] = []
    _check(lambda: numbered_values(enumerate(raw_lines, 1)), jobs)
    return jobs


def jobs_from(values, what: str = LINE, os_form: bool = False) -> list[Job]:
    """The jobs of a list of mappings, checked as manifest lines are, each named as ``what``
    says (``where``: a template's ``job N``, the API's ``jobs[N]``); ``os_form``: ``args``' str
    as subprocess takes them (``keywords.as_text``), the API's ``batch``."""
    values = list(values)
    jobs: list[Job] = []
    _check(lambda: ((n, dict(v) if hasattr(v, "keys") else v, 0) for n, v in enumerate(values, 1)), jobs, what, os_form)
    return jobs


def too_many() -> Failure:
    """A template whose jobs pass the manifest's bound, by its arguments (it has no lines)."""
    return usage(f"the template's arguments give more than {MAX_JOBS} jobs, the most a batch runs")


def _check(passes, keep: list[Job] | None = None, what: str = LINE, os_form: bool = False) -> tuple[int, bool]:
    """How many jobs the lines of ``passes()`` (a fresh pass each call, of ``manifest_lines.numbered_values``' triples)
    hold, each checked; a usage Failure naming the first bad one, then the first duplicate id or
    run id (a second pass only when the first found a name it may have seen, ``unique``).
    ``keep``: the jobs are appended to it (a list given whole, as the API's)."""
    names = Names()
    templates: dict[str, RunSpec] = {}
    count = 0
    any_needs = False
    for number, value, _ in passes():
        if count == MAX_JOBS:
            raise too_many() if what == JOB else usage(more_than(what, number, MAX_JOBS))
        job = job_from(number, value, templates, digest=keep is not None, what=what, os_form=os_form)
        names.add("id", job.id)
        if job.template.run_id_given:
            names.add("run_id", job.template.run_id)
        if keep is not None:
            keep.append(job)
        any_needs = any_needs or bool(job.plan.needs)
        count += 1
    if names.candidates:
        recheck = names.recheck()
        for number, value, _ in passes():
            job = job_from(number, value, templates, digest=False, what=what, os_form=os_form)
            first = recheck.first("id", job.id, number)
            if first is not None:
                raise usage(f"{at(what, number)}: duplicate id '{job.id}' (first {first_at(what, first)})")
            if job.template.run_id_given:
                run_id = job.template.run_id
                first = recheck.first("run_id", run_id, number)
                if first is not None:
                    raise usage(f"{at(what, number)}: duplicate run_id '{run_id}' (first {first_at(what, first)})")
    return count, any_needs


def job_from(
    number: int,
    value,
    templates: dict[str, RunSpec],
    *,
    env_files: bool = True,
    digest: bool = True,
    what: str = LINE,
    os_form: bool = False,
) -> Job:
    """One job from a line's decoded value; a usage Failure naming the line (``what`` N) when it is bad.
    ``templates``: the RunSpecs already built, by keywords (plain JSON values only).
    ``env_files``: each ``env_file`` is checked to be a regular file, /dev/null or absent now; the pass
    that reads a checked manifest again as its jobs start leaves that to the job's own start,
    where a file swapped since fails that job alone (111), not the manifest. ``digest``: the
    line's ``job_sha256`` is taken; without, the job's ``digest`` is "" (a check's pass over the
    lines, whose jobs are dropped: the pass that runs them takes it, once a job)."""

    def bad(message: str) -> Failure:
        return usage(f"{at(what, number)}: {message}")

    if not isinstance(value, dict):
        raise bad(not_a_job(what, value))
    options = dict(value)
    args = options.pop("args", ())  # none given ("arg", "argv"): "args must name a program to run"
    job_id = options.pop("id", f"job-{number}")
    if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
        raise bad("'id' is 1 to 128 characters from [A-Za-z0-9._-], starting with a letter or digit")
    job_id = run_keywords.plain(job_id)  # a subclass of the caller's own never reaches the runner service
    secret = options.pop("secret", False)
    if type(secret) is not bool:
        raise bad("'secret' is true or false")
    if job_id in OUT_NAMES:
        raise bad(f"the id '{job_id}' is reserved: the batch writes its own {job_id} in its output directory")
    try:
        plan = take(options, len(args) if isinstance(args, (list, tuple)) else 0, JOB_ID)
    except ValueError as exc:
        raise bad(str(exc)) from None
    for key in options:
        if key in REFUSED:
            raise bad(f"'{key}' is not a job keyword: {REFUSED[key]}")
    # The template's key: most lines of a large manifest name no keyword at all ("" then).
    key = "" if not options else json.dumps(options, sort_keys=True) if _plain(options) else None
    try:
        command = run_keywords.command_args(args, os_form)
        template = templates.get(key) if key is not None else None
        if template is None:
            # Checked as the batch runs it (JOB_OPTIONS), so the capture keywords
            # (capture_max_bytes, capture_keep, ...) are accepted here as they are there.
            given = run_keywords.options(options, KEYS, near_to=line_keys, os_form=os_form)
            template = build(tuple(command), {**given, **JOB_OPTIONS}, KEYS)
            refuse_own_label(template.labels, flag=False)
            if key is not None:
                if len(templates) >= TEMPLATES_KEPT:  # a manifest of many distinct keyword sets
                    templates.clear()
                templates[key] = template
    except TypeError as exc:
        raise bad(str(exc)) from None
    except Failure as failure:
        raise bad(failure.message) from None
    for path in template.env.files if env_files else ():
        found = _waits(path)
        if found:
            flag = "--env-file" if what == JOB else "env_file"  # as the user wrote it: a flag, or a key
            raise bad(
                f"{flag} {path} is {found}, not a regular file or /dev/null: the batch reads it as each job "
                "starts, so one that can wait would hold up every job"
            )
    return Job(job_id, command, template, secret, _digest(value) if digest else "", plan)


# ``json.dumps`` with these options makes an encoder per call; the same one, made once, gives
# the same text (``JSONEncoder.encode`` keeps no state between calls).
_SORTED = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=repr, ensure_ascii=False)


def _digest(value: dict) -> str:
    """SHA-256 of the job's line as JSON with sorted keys: its command, keywords (env, cwd, ...)
    and id; an API caller's non-JSON value is named by its repr."""
    return sha256(_SORTED.encode(value).encode("utf-8", "surrogatepass")).hexdigest()


def _waits(path: str) -> str:
    """What an env file is, in words, when the batch's one thread could wait reading it; "" for a
    regular file or the null device (read to its end at once). A missing one passes here and fails
    its job's setup when it starts (111), as in ``run``."""
    try:
        found = os.stat(path)
    except OSError:
        return ""
    return "" if never_waits(found) else file_kind(found.st_mode) or ""


def _plain(value) -> bool:
    """Whether ``value`` is made of JSON's own types only, so its ``json.dumps`` names it exactly
    (an API caller's object could print as another value)."""
    kind = type(value)
    if kind is dict:
        return all(type(key) is str and _plain(item) for key, item in value.items())
    if kind is list:
        return all(_plain(item) for item in value)
    return kind in (str, int, float, bool) or value is None

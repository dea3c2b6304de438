"""A job's line in a batch's ``summary.jsonl``, as one type: made by the batch as each job
ends (``batching.job_lines``), written once (``batching.recorder``), and read back through the same
fields (``--resume``, ``--history``, the batch's page in ``report.batch_model``). It sits here,
below both, as ``capture_layout`` does for the file the engine writes and ``events`` reads.

The file is untrusted when read back (an earlier batch's, or edited since), so ``JobLine.read``
checks each field for its type: a field of the wrong type reads as None (a number out of range
too), and an object with no string ``id`` is no job's line. The JSON written keeps the shape
docs/batch.md lists, field for field, in this order.
"""

from __future__ import annotations

from .jsontext import dumps
from .plain import Plain
from .text import plural

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

    from typing_extensions import Self

SUMMARY_FILE = "summary.jsonl"
_BIGGEST_INT = 1 << 62  # past it a number read back is no count of ours
_BIGGEST_FLOAT = 1e15
# A job's notes where its leak could not be counted: no process was said left, none said not.
LEAK_UNKNOWN = "whether it left processes running is unknown: its container's members could not be read"


def _int(value: object) -> int | None:
    return value if type(value) is int and abs(value) < _BIGGEST_INT else None


def _count(value: object) -> int | None:
    """A count written only when above 0 (``oom_kills``): anything else says nothing."""
    found = _int(value)
    return found if found is not None and found > 0 else None


def _number(value: object) -> float | None:
    """A finite int or float (never a bool, NaN or an infinity) within the bound, else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < _BIGGEST_FLOAT:
        return value
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


_READERS = {"str | None": _str, "int | None": _int, "bool | None": _bool}


class _Part(Plain):
    """A part of a line, read from an object: checked field by field (``read``, for a summary
    read back) or taken as it is (``written``, from an event this process's engine just wrote,
    whose fields the engine typed)."""

    _readers: ClassVar[tuple] = ()  # (field, the check its annotation names), in the fields' order

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls._readers = tuple((name, _READERS[cls.__annotations__[name]]) for name in cls._fields)

    @classmethod
    def read(cls, value: object) -> Self | None:
        """Each field checked for the type its annotation names: a wrong type reads as None."""
        if not isinstance(value, dict):
            return None
        return cls(*(check(value.get(name)) for name, check in cls._readers))

    @classmethod
    def written(cls, value: dict | None) -> Self | None:
        return None if value is None else cls(*map(value.get, cls._fields))


class Captured(_Part):
    """One stream's capture, as ``output_captured`` reported it (``bytes`` and ``bytes_seen``
    both count every byte the child wrote, as the event spells them); ``path`` is None when the
    file was never written (``--keep failed``, a job that passed)."""

    path: str | None
    bytes: int | None
    bytes_seen: int | None
    bytes_written: int | None
    sha256: str | None
    truncated: bool | None
    write_error: bool | None


class Resources(_Part):
    """The job's ``resource_summary`` figures (None: not measured)."""

    read_error: bool | None
    peak_memory_bytes: int | None
    total_cpu_ms: int | None
    io_read_bytes: int | None
    io_write_bytes: int | None
    peak_process_count: int | None


class EarlierAttempt(Plain):
    """An attempt of a retried job before its last, whose stream and capture are in
    ``<id>/<dir>/``."""

    attempt: int
    dir: str
    run_id: str | None
    started_at: str | None
    exit_code: int | None
    source: str
    duration_ms: float | None
    message: str | None
    signal: int | None = None  # the signal its child died of, written only when one did (as a job's)

    def to_json(self) -> dict:
        """The object ``earlier_attempts`` holds for it: ``signal`` only where there is one."""
        found = self._asdict()
        if self.signal is None:
            del found["signal"]
        return found

    @classmethod
    def read(cls, value: object) -> EarlierAttempt | None:
        if not isinstance(value, dict):
            return None
        get = value.get
        return cls(
            _int(get("attempt")) or 0,
            _str(get("dir")) or "",
            _str(get("run_id")),
            _str(get("started_at")),
            _int(get("exit_code")),
            _str(get("source")) or "unknown",
            _number(get("duration_ms")),
            _str(get("message")),
            _int(get("signal")),
        )


class JobLine(Plain):
    """One job's line: its exit (as ``runner_exit`` says it, or null for a job that never
    started, with ``source`` saying why), what the runner measured, its capture's digests and
    byte counts, and ``earlier_attempts`` with ``--retries``. ``message``: the runner's own
    words when it, not the child, decided the end (a setup or spawn failure, a timeout), which
    no stream holds."""

    id: str
    run_id: str | None
    args_sha256: str | None
    job_sha256: str | None
    command: list[str] | None  # the argv as the job gave it; None for a ``secret`` job
    started_at: str | None
    exit_code: int | None
    source: str
    child_code: int | None
    duration_ms: float | None
    attempts: int
    resources: Resources | None
    stdout: Captured | None
    stderr: Captured | None
    message: str | None
    earlier_attempts: list[EarlierAttempt]
    # Optional fields, written only when they say something (an older reader never meets them
    # where they would say nothing): ``flaky``, a job that failed, then passed on a retry;
    # ``skipped_for``, the need whose failure skipped it (``source`` ``skipped``); ``needs``, the
    # jobs it waited for; ``inputs_sha256``, its ``inputs``' digests (``--resume`` compares them);
    # ``signal``, the signal its child died of (``exit_code`` is then 128 + it, as a shell's);
    # ``oom_kills``, how many of its tree's processes the kernel's OOM killer ended (its cap);
    # ``leaked``, how many of its tree's processes were still running when its command exited
    # (nextest's leaky test: a daemon it left), ended at its cleanup; ``pids_cap_refused``, its
    # ``max_processes`` when a pids cap refused its tree a fork (``limit_evidence``'s tripped);
    # ``leaked_unknown``, true where its command's exit ended it but its members could not be
    # read then (no ``leaked`` is then no word of none: a v1 reader still sees none).
    flaky: bool = False
    skipped_for: str | None = None
    needs: list[str] | None = None
    inputs_sha256: dict[str, str] | None = None
    signal: int | None = None  # the signal that ended the job's child (its ``root_exited``), when one did
    oom_kills: int | None = None  # its group's OOM kill counter, when above 0
    leaked: int | None = None  # its processes left running by its command's exit, when above 0
    pids_cap_refused: int | None = None  # its max_processes, when a pids cap refused its tree a fork
    leaked_unknown: bool = False  # its leak could not be counted (its ``cleanup_started``'s read_error)

    def notes(self) -> str:
        """`` (OOM kills) (refused fork) (leftovers)``, said after a job's exit wherever the job is
        shown ("" when none): why its SIGKILL came, or why its child could not fork (``Cannot
        fork``), in the words ``run`` warns with (the kill alone reads as anyone's ``kill -9``),
        and what a leaky job left."""
        said = f" ({oom_words(self.oom_kills, 'its')})" if self.oom_kills else ""
        if self.pids_cap_refused:
            said += f" ({pids_words(self.pids_cap_refused, 'its', 'max_processes')})"
        if self.leaked:
            said += f" (left {plural(self.leaked, 'process', 'processes')} running, ended at its cleanup)"
        elif self.leaked_unknown:
            said += f" ({LEAK_UNKNOWN})"
        return said

    @property
    def started(self) -> bool:
        return self.exit_code is not None

    @property
    def failed(self) -> bool:
        """Ran and did not exit 0: what ``--halt-on-failure`` and ``--retries`` act on."""
        return self.exit_code not in (0, None)

    def to_json(self) -> dict:
        """The object ``summary.jsonl`` holds for the job."""
        resources = self.resources
        return {
            "id": self.id,
            "run_id": self.run_id,
            "args_sha256": self.args_sha256,
            "job_sha256": self.job_sha256,
            "command": self.command,
            "started_at": self.started_at,
            "exit_code": self.exit_code,
            "source": self.source,
            "child_code": self.child_code,
            "duration_ms": self.duration_ms,
            "attempts": self.attempts,
            "resources": None if resources is None else resources._asdict(),
            "capture": {
                "stdout": None if self.stdout is None else self.stdout._asdict(),
                "stderr": None if self.stderr is None else self.stderr._asdict(),
            },
            "message": self.message,
            "earlier_attempts": [attempt.to_json() for attempt in self.earlier_attempts],
            **self._optional(),
        }

    def _optional(self) -> dict:
        found: dict[str, object] = {}
        if self.flaky:
            found["flaky"] = True
        if self.skipped_for is not None:
            found["skipped_for"] = self.skipped_for
        if self.needs:
            found["needs"] = self.needs
        if self.inputs_sha256 is not None:
            found["inputs_sha256"] = self.inputs_sha256
        if self.signal is not None:
            found["signal"] = self.signal
        if self.oom_kills:
            found["oom_kills"] = self.oom_kills
        if self.leaked:
            found["leaked"] = self.leaked
        if self.pids_cap_refused:
            found["pids_cap_refused"] = self.pids_cap_refused
        if self.leaked_unknown:
            found["leaked_unknown"] = True
        return found

    def encode(self) -> bytes:
        """The line as written: compact JSON and its newline. A command the OS gave as bytes that
        are not UTF-8 (a template's argument line) holds U+DC80-U+DCFF, which UTF-8 cannot carry:
        such a line is written with JSON's ``\\u`` escapes, so it stays valid JSON and reads back
        as the same text."""
        value = self.to_json()
        try:
            return dumps(value).encode() + b"\n"
        except UnicodeEncodeError:
            import json

            return json.dumps(value, separators=(",", ":")).encode() + b"\n"

    def attempt_record(self) -> EarlierAttempt:
        """What the final line keeps of this attempt once it is retried."""
        return EarlierAttempt(
            self.attempts,
            attempt_dir(self.attempts),
            self.run_id,
            self.started_at,
            self.exit_code,
            self.source,
            self.duration_ms,
            self.message,
            self.signal,
        )

    def drop_paths(self) -> None:
        """``--keep failed``: a passing job's capture was never written, so its line names no
        file (its digests and byte counts stay)."""
        for captured in (self.stdout, self.stderr):
            if captured is not None:
                captured.path = None

    @classmethod
    def read(cls, value: object) -> JobLine | None:
        """The line ``value`` (one decoded object of a summary) holds, each field checked; None
        when it is no job's line."""
        if not isinstance(value, dict) or not isinstance(value.get("id"), str):
            return None
        get = value.get
        command = get("command")
        capture = get("capture")
        if not isinstance(capture, dict):
            capture = {}
        earlier = get("earlier_attempts")
        attempts = [EarlierAttempt.read(item) for item in earlier[:1000]] if isinstance(earlier, list) else []
        return cls(
            value["id"],
            _str(get("run_id")),
            _str(get("args_sha256")),
            _str(get("job_sha256")),
            command if isinstance(command, list) and all(isinstance(arg, str) for arg in command) else None,
            _str(get("started_at")),
            _int(get("exit_code")),
            _str(get("source")) or "unknown",
            _int(get("child_code")),
            _number(get("duration_ms")),
            _int(get("attempts")) or 0,
            Resources.read(get("resources")),
            Captured.read(capture.get("stdout")),
            Captured.read(capture.get("stderr")),
            _str(get("message")),
            [attempt for attempt in attempts if attempt is not None],
            get("flaky") is True,
            _str(get("skipped_for")),
            _strings(get("needs")),
            _digests(get("inputs_sha256")),
            _int(get("signal")),
            _count(get("oom_kills")),
            _count(get("leaked")),
            _count(get("pids_cap_refused")),
            get("leaked_unknown") is True,
        )


def _strings(value: object) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


def _digests(value: object) -> dict[str, str] | None:
    """An ``inputs_sha256`` object: path -> hex digest, every one a string, else None."""
    if isinstance(value, dict) and all(isinstance(key, str) and isinstance(item, str) for key, item in value.items()):
        return value
    return None


def attempt_dir(attempt: int) -> str:
    """Where an attempt before a job's last keeps its stream and capture, in the job's directory."""
    return f"attempt-{attempt}"


def oom_words(count: int, whose: str) -> str:
    """``the kernel's OOM killer ended N process(es) of its tree``: ``whose`` is ``its`` where
    a run's or a job's ending is said, ``this run's`` in ``run``'s own warning."""
    return f"the kernel's OOM killer ended {count} process(es) of {whose} tree"


def pids_words(cap: int, whose: str, flag: str) -> str:
    """``a pids cap refused its tree a fork, its max_processes 20 or one above it``: ``whose`` and
    ``flag`` as ``run``'s warning (``the run's``, ``--max-processes``) or a job's ending says them.
    Before Linux 6.13 a parent group's refusal counts in the run's own group too."""
    return f"a pids cap refused {whose} tree a fork, its {flag} {cap} or one above it"

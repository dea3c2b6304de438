"""``processkit.run`` and ``run_async``: a checked request to this process's runner service
(``shared``), and its reply made into a RunResult.

Facts about running in the service rather than in the caller's interpreter:
- The runs of a calling process are carried by one service process, started on first use; the
  signal handlers, the subreaper flag, the reaping and the containment all belong to it. The
  caller's interpreter gets none of them, and lends the service no descriptor but, for a run
  that echoes or inherits them, its standard streams (``SCM_RIGHTS``, as they are at the call).
- Everything is checked here before anything is sent (the run grammar, as the CLI's), and the paths the
  run names are made absolute here: the service's own working directory is ``/``, and the
  child's is the caller's at the call, as a ``subprocess`` child's is.
- Without ``jsonl`` the events go to a file in the service's memory and come back in the reply;
  nothing of the call is written to a file system unless it names the place.
"""

from __future__ import annotations

import os
import threading
import sys

from ..spec import RunSpec, StdinMode, callers_cwd, new_run_id, own_pid
from . import options as keyword_options
from . import caller_env, service, shared, wire
from .diagnosed import lost
from .raised import raise_as_subprocess
from ..refusal import refused
from .result import (
    CaptureTruncated,
    CaptureWriteFailed,
    EchoLost,
    EventsLost,
    LeftRunning,
    RunError,
    RunResult,
    files_cut,
    outcome,
    truncated,
)
from .streams import Streams, discard
from .warned import warn
from ..callwarning import CallWarning
from ..plain import Plain


def runner_command() -> list[str]:
    """The console script installed beside this interpreter, else ``python -m processkit``."""
    global _RUNNER
    if _RUNNER is None:
        script = os.path.join(os.path.dirname(sys.executable), "processkit-cli")
        _RUNNER = [script] if os.access(script, os.X_OK) else [sys.executable, "-m", "processkit"]
    return _RUNNER


_RUNNER: list[str] | None = None


# The warning each of what the run lost or left raises (``diagnosed.lost``); the stream's is worded
# in ``Call.warned``, and an unread file is said in the result's diagnostics alone.
_WARNINGS = {"echo_lost": EchoLost, "left_running": LeftRunning, "unkept": CaptureWriteFailed}


class Call(Plain):
    """A checked run that has not been sent: its spec, what the request carries beside it, and
    how its standard streams are read back."""

    args: list[str]
    spec: RunSpec
    stdio: Streams  # subprocess's stream keywords
    named_jsonl: str | None  # the stream as the caller named it (made absolute): the result names it
    function: str  # run, run_async or start: the warnings name it
    extra: dict = {}
    given: dict = {}  # an input path sent through this process's /proc entry: the caller's spelling, for the words
    waits: dict = {}  # a Timeout's reason -> the number the caller gave for it: TimeoutExpired.timeout keeps it

    def send(self) -> tuple[service.Connection, int]:
        """The request to this process's service, with the caller's standard streams beside it
        when the run uses them, then the descriptors given for the child's own (``child_fds``);
        the connection it went on, and its id."""
        spec, extra = self.spec, self.extra
        try:  # what ``descriptors`` and ``input_file`` opened is closed whatever ends the call
            layout, given = self.stdio.descriptors() if self.stdio.own else ((False, False, False), [])
            if given:
                extra = {**extra, "child_fds": layout}
            held_input = self.stdio.input_file()  # a large input= as a descriptor, after the child's
            extra = {**extra, "input": self.stdio.input}  # None once the descriptor holds it
            if held_input is not None:
                spec = spec.replace(stdin_file=wire.SCRATCH_INPUT_FD)  # an older service fails it, never feeds b""
                extra, given = {**extra, "input_fd": True}, [*given, held_input]
            if not (spec.echo or spec.inherit_stdio or spec.pty or spec.stdin is StdinMode.INHERIT):
                return shared.send("run", spec, extra, fds=given, env=True)
            fds, opened = _standard_streams()
            try:
                return shared.send("run", spec, {**extra, "fds": 3}, fds=fds + given, env=True)
            finally:
                for fd in opened:
                    os.close(fd)
        except BaseException:  # no handle will own the caller's ends of ``start``'s pipes
            self.stdio.unsent()
            raise
        finally:
            self.stdio.sent()

    def said(self, text: str, category: type[CallWarning], result: RunResult) -> None:
        """A warning of this call, named as the caller made it, at the caller's line, holding
        ``result`` (``-W error`` raises it with the result on it)."""
        warn(f"processkit.{self.function}({self.args[0]!r}, ...): {text}", category, result)

    def result(self, report: dict) -> RunResult:
        """The run's result from its reply; what the run lost is ``warned``'s to say."""
        failure = report.get("failure")
        if failure is not None and self.given:  # `/proc/<pid>/fd/7` said as the caller's `/dev/fd/7`
            kind, message, retryable = failure
            for sent, given in self.given.items():
                message = message.replace(f"`{sent}`", f"`{given}`")
            report = {**report, "failure": (kind, message, retryable)}
        return outcome(self.args, self.spec, report, self.stdio, jsonl=self.named_jsonl)

    def warned(self, report: dict, result: RunResult) -> RunResult:
        """Say what the run lost (a failed stream, a cut capture file) and return ``result``:
        called once the run is let go (its request forgotten, the result kept), so a warning raised
        as an error (``-W error``) leaves nothing undone and a second ``wait`` returns the result."""
        for key, text in lost(report):
            if key == "stream_failure":  # the CLI's warning, which the service has no reader for
                where = f"jsonl={self.named_jsonl}" if self.named_jsonl else "the run's event stream (no jsonl= given)"
                said = f"{where}: JSONL event logging disabled: {text}"
                self.said(f"{said}; the result's events are those the stream holds", EventsLost, result)
            elif key in _WARNINGS:
                self.said(text, _WARNINGS[key], result)
        if self.spec.capture_dir not in (
            None,
            wire.SCRATCH_CAPTURE,
        ):  # the caller's files: a cut said, as the CLI's run says it
            cut, failed = files_cut(result, self.stdio.piped)
            if cut:
                self.said("; ".join(cut), CaptureWriteFailed if failed else CaptureTruncated, result)
        return result


def _standard_streams() -> tuple[list[int], list[int]]:
    """This process's 0, 1 and 2 as they are now; /dev/null for one that is closed."""
    fds, opened = [], []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            opened.append(os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC))
            fds.append(opened[-1])
    return fds, opened


def prepare(args, options: dict, *, echo: bool, function: str, live: bool = False) -> Call:
    """Check everything the caller gave (TypeError/ValueError) before anything is sent.
    ``live``: a ``start`` call (its PIPEs are pipes, read by the caller)."""
    command = keyword_options.command_args(keyword_options.shell_args(args, options.pop("shell", False)))
    if not isinstance(echo, bool):
        raise TypeError(f"echo must be True or False, not {echo!r}")
    streams = Streams(options, echo=echo, live=live)  # takes subprocess's stream keywords out of options
    jsonl = options.get("jsonl")
    fixed: dict[str, object] = {} if echo or options.get("inherit_stdio") else {"no_echo": True}
    fixed.update(streams.options(options))
    path = wire.SCRATCH_MEMORY if jsonl is None else keyword_options.as_text(jsonl, "jsonl")
    if live and jsonl is not None:
        _followable(path)
    spec, fresh = _checked(command, options, path, function, fixed)
    if streams.merged:
        spec = spec.replace(stderr_to_stdout=True)
    anchored, named = _anchored(spec, fresh)
    return Call(
        args=command,
        spec=anchored,
        stdio=streams,
        named_jsonl=None if jsonl is None else named,
        function=function,
        extra={"piped": (streams.piped["stdout"], streams.piped["stderr"])},  # ``input``: at ``send``
        given={
            sent: given
            for sent, given in zip((anchored.stdin_file, *anchored.env.files), (spec.stdin_file, *spec.env.files))
            if given is not None and sent != given and os.path.isabs(given)
        },
        waits={
            reason: options[key]
            for reason, key in (("overall", "timeout"), ("idle", "idle_timeout"))
            if isinstance(options.get(key), (int, float)) and not isinstance(options.get(key), bool)
        },
    )


def _checked(command: list[str], options: dict, path: str, function: str, fixed: dict) -> tuple[RunSpec, bool]:
    """The run grammar's spec of ``command``, and whether it still needs a run id of its own. A
    call given no run option (``run(cmd)``, ``run(cmd, capture_output=True)``) is read the first
    time its command and its stream stand-ins are seen, then taken from ``_CHECKED``: the grammar
    reads nothing but what it is given, so its spec is the same but for the run id, which
    ``_anchored`` gives it (its copy is the call's; the kept one is never handed out). The first
    call too: every call of a kept command takes its id there, so the grammar's id of the
    kept spec names no run (two calls never share one)."""
    if options or sum(map(len, command)) > CHECKED_LONGEST:  # a long command line is not kept
        return keyword_options.run_spec(command, options, jsonl=path, function=function, fixed=fixed), False
    key = (*fixed.items(), None, *command)  # ``path`` is the scratch stream whenever no option is given
    spec = _CHECKED.get(key)
    if spec is None:
        spec = keyword_options.run_spec(command, options, jsonl=path, function=function, fixed=fixed)
        if len(_CHECKED) >= CHECKED_MOST:  # full: begun again (one step, whichever threads meet here)
            _CHECKED.clear()
        _CHECKED[key] = spec
    return spec, True


CHECKED_MOST = 64  # commands whose checked spec is kept
CHECKED_LONGEST = 4096  # characters of a command line kept at most: a long list of files is not held
_CHECKED: dict[tuple, RunSpec] = {}


def _followable(path: str) -> None:
    """``start`` follows its stream to see the run begin: at a device it waited for the run's end
    (``/dev/null``) or raised the reader's refusal (a directory's too, after the run was sent),
    and a pipe's reader is someone else's; at a file this process may not read (its own, or one
    the caller's umask makes so) the follower raised ``PermissionError`` and left the run going
    with no handle on it."""
    import stat

    from ..bounded import file_kind

    follows = "start() follows its jsonl= stream to see the run begin"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mask = caller_env.umask_now()
        if mask & stat.S_IRUSR and not caller_env.reads_any_file():
            raise refused(
                f"jsonl={path} would be made under the umask {mask:#o}, which leaves it unreadable to its owner: "
                f"{follows}; give a umask that keeps the owner's read bit, or no jsonl= (the events are then "
                "handle.events())"
            ) from None
        return
    except OSError:
        return  # the run says why it cannot make it
    kind = file_kind(mode)
    if kind is not None:
        raise refused(
            f"jsonl={path} is {kind}: {follows}; name a regular file, or none (the events are then handle.events())"
        )
    if not os.access(path, os.R_OK):
        raise refused(
            f"jsonl={path} is a file this process may not read: {follows}; name a file it may read, or none "
            "(the events are then handle.events())"
        )


def _anchored(spec: RunSpec, fresh: bool = False) -> tuple[RunSpec, str | None]:
    """Every path of ``spec`` made absolute from this process's working directory, which is
    also the child's unless ``cwd`` names one (a stand-in of ``wire`` stays as it is), and one
    naming this process's own descriptors or /proc entry made to name them from the service;
    beside it, the JSONL's path made absolute only, as the caller's result names it. ``fresh``:
    the copy gets a new run id (a kept spec's, ``_checked``)."""
    # A removed one is named through this process's /proc entry (``callers_cwd``): before, the
    # service's own "/" stood in, the child ran in "/" and `jsonl="out.jsonl"` wrote "/out.jsonl".
    here = callers_cwd()

    def absolute(path: str | None) -> str | None:
        if path is None or path.startswith("\0") or os.path.isabs(path):
            return path
        return os.path.join(here, path)

    def at(path: str | None) -> str | None:
        path = absolute(path)
        return path if path is None or path.startswith("\0") else _callers(path)

    env = spec.env
    if env.files:
        env = env.replace(files=tuple(at(path) or path for path in env.files))
    anchored = spec.replace(
        cwd=here if spec.cwd is None else at(spec.cwd) if spec.cwd else "",  # "" kept: the spawn's FileNotFoundError
        cwd_implicit=spec.cwd is None,  # getcwd's text holds no link to refuse
        jsonl=at(spec.jsonl),
        capture_dir=at(spec.capture_dir),
        stdin_file=at(spec.stdin_file),
        env=env,
    )
    if fresh:
        anchored.run_id = new_run_id()
    return anchored, absolute(spec.jsonl)


# Paths that name the process opening them (its descriptors, its /proc entry): opened by the
# service, they named the service's own (/dev/stdin its /dev/null, /dev/fd/9 another call's memfd).
_STANDARD = {"/dev/stdin": "/fd/0", "/dev/stdout": "/fd/1", "/dev/stderr": "/fd/2"}
_OWN = (("/dev/fd", "/fd"), ("/proc/self", ""))
_THREAD = "/proc/thread-self"


def _callers(path: str) -> str:
    """``path`` as the service must name it to reach what it names in this process: ``/dev/stdin``,
    ``/dev/stderr``, ``/dev/fd/N`` and ``/proc/self/...`` through ``/proc/<this pid>``, as the CLI,
    which opens them itself, reaches its caller's (``--stdin-file /dev/stdin``, ``--jsonl
    /dev/stderr``), ``/proc/thread-self/...`` through the calling thread's task entry, and a link
    to one of the caller's standard streams through ``/proc/<this pid>/fd/N``, walked in this
    process as the CLI walks an input (``userfiles.own_stream``): another user's link, which
    safepath's rules refuse, or one to a file by its name is sent unchanged, for the service to
    refuse or open in its own words.
    Before, the child silently read the service's /dev/null, and the events went there."""
    if path == _THREAD or path.startswith(_THREAD + "/"):
        return f"/proc/{own_pid()}/task/{threading.get_native_id()}{path[len(_THREAD) :]}"
    if path in _STANDARD:
        return f"/proc/{own_pid()}{_STANDARD[path]}"
    for prefix, replaced in _OWN:
        if path == prefix or path.startswith(prefix + "/"):
            return f"/proc/{own_pid()}{replaced}{path[len(prefix) :]}"
    from ..userfiles import own_stream

    fd = own_stream(path)
    return path if fd is None else f"/proc/{own_pid()}/fd/{fd}"


def _concluded(call: Call, report: dict, check: bool) -> RunResult:
    result = call.warned(report, call.result(report))
    cut, failed = truncated(result, call.stdio.piped)
    if cut:  # the caller's cap, or a failed write to a capture file, cut what it asked for: said, never
        # silent, and said before a timeout's TimeoutExpired, whose output is the same cut bytes
        call.said("; ".join(cut), CaptureWriteFailed if failed else CaptureTruncated, result)
    raise_as_subprocess(result, call.spec, call.waits)
    if check:
        result.check_returncode()
        if cut:
            raise RunError(result)
    return result


def run(args, *, check: bool = False, echo: bool = False, **options) -> RunResult:
    """Run ``args`` to completion in this process's runner service; see docs/api.md."""
    return completed(args, options, check=check, echo=echo, function="run")


def completed(args, options: dict, *, check: bool, echo: bool, function: str) -> RunResult:
    """``run``'s work, its errors naming ``function`` (``check_output`` is one of its callers)."""
    # here: loaded by a process that runs, not by every import (this form: containment._lender)
    import processkit.api.dask_task as dask_task

    call = prepare(args, options, echo=echo, function=function)
    connection, rid = call.send()
    try:
        report = dask_task.taken(connection, rid)  # a Dask task's run: stopped once Dask lets it go
    except BaseException as exc:  # Ctrl-C, say: the run ends through its release before it goes on
        connection.signal(rid, "ctrl_c" if isinstance(exc, KeyboardInterrupt) else "sigterm")
        _released(connection, rid)
        raise
    finally:
        connection.forget(rid)
    try:
        return _concluded(call, report[2], check)
    except BaseException:  # interrupted before its captures' files were read (or as they were removed): they go
        discard(report[2])
        raise


def _released(connection: service.Connection, rid: int) -> None:
    """Wait for the stopped run's reply (its release done); a service that is gone has none."""
    try:
        found = connection.take(rid)
    except service.ServiceGone:
        return
    if found is not None:
        discard(found[2])


async def run_async(args, *, check: bool = False, echo: bool = False, **options) -> RunResult:
    """``run`` for asyncio: the reply is awaited, not waited for; cancelling the task cancels the run."""
    from . import awaited  # here: loaded by a process that awaits a run, not by every plain ``run``

    call = prepare(args, options, echo=echo, function="run_async")
    connection, rid = call.send()
    try:
        report = await awaited.reply(connection, rid)
    except BaseException:
        connection.signal(rid, "sigterm")
        import asyncio

        try:
            discard(await asyncio.shield(awaited.reply(connection, rid)))
        except service.ServiceGone:
            pass
        raise
    finally:
        connection.forget(rid)
    return _concluded(call, report, check)

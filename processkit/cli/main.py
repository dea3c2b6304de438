"""Entry point: global options, subcommand dispatch, and the one place failures are rendered.

Each subcommand family lives in its own module, imported only when used, so that the common
case (``run``) pays for nothing else at start-up.
"""

from __future__ import annotations

import gc
import os
import sys

from .. import caller_fds, fdlimit, signum
from ..diagnostics import envelope_only, say, shown
from ..errors import STDOUT_CLOSED, Failure, Kind, StdoutClosed, exit_codes, usage
from .commands import COMMANDS, RUNNING_COMMANDS
from .options import ERROR_FORMAT_HELP, ERROR_FORMATS

# The cyclic collector's first-generation threshold for the CLI's process. Start-up allocates
# container objects that live as long as the process, and at Python's default (700) the collector
# walks them over and over while the modules load, for nothing. Set with a margin above a plain
# run's count at its exit (``gc.get_count()``), it lets start-up finish without a collection, and
# a long-lived runner still collects its cycles (the figures: bench/README.md, "Start-up after
# issue 12").
COLLECT_AFTER_ALLOCATIONS = 16_000
# The locales CPython's start-up coerces a C or POSIX ``LC_CTYPE`` to (PEP 538), setting the
# variable in its own environment, which every child of the runner would then inherit.
COERCED_LOCALES = (b"C.UTF-8", b"C.utf8", b"UTF-8")


def _usage_text() -> str:
    lines = [
        "usage: processkit-cli [--error-format human|json] <command> [options]",
        "",
        "commands:",
    ]
    width = max(len(name) for name in COMMANDS)
    lines += [f"  {name.ljust(width)}  {summary}" for name, (_, summary) in COMMANDS.items()]
    lines += [
        "",
        "options:",
        f"      --error-format <human|json>  {ERROR_FORMAT_HELP}",
        "  -h, --help                       print this help",
        "  -V, --version                    print the version",
    ]
    lines += ["", "exit codes (the child's own code otherwise, 128+N for a death by signal N):"]
    lines += [f"  {code}  {', '.join(labels)}" for code, labels in exit_codes().items()]
    lines += ["", "Run 'processkit-cli <command> --help' for a command's options."]
    return "\n".join(lines) + "\n"


HELP_HELP = """usage: processkit-cli help [COMMAND]...

print the root help, or the help of the given command

arguments:
  [COMMAND]...  the command whose help to print
"""


def _help_asked(words: list[str]) -> str | None:
    """clap's ``help COMMAND...``: the command whose help to print (None: ``help``'s own). Each
    word names a subcommand of the one before it, and no command here has any, so a word after
    the first is unrecognized, as one that names no command is (a usage error, 100)."""
    first, *more = words
    unknown = first if first != "help" and first not in COMMANDS else next(iter(more), None)
    if unknown is not None:
        raise usage(f"unrecognized subcommand '{unknown}'", hint=_usage_text().splitlines()[0])
    return None if first == "help" else first


def split_error_format(argv: list[str]) -> tuple[str, list[str]]:
    """Take the global ``--error-format`` out of ``argv`` (before any ``--``), wherever it is."""
    chosen = None
    rest: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            rest += argv[index:]
            break
        value = None
        if token == "--error-format":
            if index + 1 >= len(argv):
                raise usage("a value is required for '--error-format <human|json>'")
            value = argv[index + 1]
            index += 2
        elif token.startswith("--error-format="):
            value = token.partition("=")[2]
            index += 1
        else:
            rest.append(token)
            index += 1
            continue
        if value not in ERROR_FORMATS:
            from ..text import cut  # here, as below: a run that fails no way loads no ``text``

            raise usage(f"invalid value '{cut(value)}' for '--error-format': expected human or json")
        if chosen is not None:
            raise usage("the argument '--error-format' cannot be used multiple times")
        chosen = value
    return chosen or "human", rest


def render_failure(failure: Failure, error_format: str, operation: str, run_id: str | None) -> None:
    """Print the failure on stderr: the human message (and its hint), or the JSON envelope (docs/run.md §5)."""
    # Parse errors stay human text (as the reference's clap errors do); a usage code relayed
    # from a detached copy, or met by a batch once its jobs ran, is a runner failure like any
    # other and gets the envelope.
    if error_format == "json" and not failure.parse_time:
        import json

        envelope = {
            "error_version": 1,
            "code": failure.code,
            "kind": failure.kind.label,
            "operation": operation,
            "run_id": run_id,
            "retryable": failure.kind.retryable,
            "message": failure.message,
        }
        from ..jsontext import lossy_utf8

        # A path's undecodable bytes (U+DC80..U+DCFF) as the reference's lossy ``display``
        # renders them, U+FFFD: written as they are, they read as lone surrogate escapes
        # (``\udcff``), which a strict parser refuses, envelope and all.
        line = lossy_utf8(json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))).decode()
    else:
        line = shown(failure.message)
        if failure.hint is not None:
            line += "\n" + failure.hint
    # The reference's error line too: a terminal paused past the echo's stall gets it after ^Q; not
    # a stop's, which keeps the bound there (a stop from elsewhere finds nobody to type ^Q; Ctrl-C
    # typed there restarts the output).
    say(sys.stderr, line + "\n", shared=failure.kind is not Kind.CANCELLED)


class Invocation:
    """What a subcommand knows about how it was called; it records the run id it was given."""

    def __init__(self, operation: str, error_format: str):
        self.operation = operation
        self.error_format = error_format
        self.run_id: str | None = None
        self.refused = False  # a usage error: no command's work ran (its modules are no run's)

    def fail(self, failure: Failure) -> int:
        self.refused = self.refused or failure.kind is Kind.USAGE
        render_failure(failure, self.error_format, self.operation, self.run_id)
        return failure.code


def ensure_standard_fds() -> None:
    """Open /dev/null on any of fds 0-2 the caller left closed, as Rust's runtime does, and
    leave it inheritable: a child given the runner's own stream gets /dev/null, never a closed fd.

    Otherwise the first file the runner opens (the JSONL) takes that number, and the child's
    echoed output lands in it. Python left the matching ``sys`` stream as None: give it one.
    """
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)  # inheritable, as a standard stream is
                os.close(null)
            else:  # os.open's own fd is close-on-exec: the child would find this stream closed
                os.set_inheritable(fd, True)
            if getattr(sys, name) is None:
                setattr(sys, name, open(fd, mode, closefd=False))


def undo_locale_coercion() -> None:
    """Give ``LC_CTYPE`` back the value the runner was started with. Under a C or POSIX locale
    (cron, systemd, ``env -i``, most containers: no ``LANG``) the interpreter sets
    ``LC_CTYPE=C.UTF-8`` in its own environment before any of processkit runs (PEP 538), and the
    child inherited it: a variable injected that the caller never set, or its ``LC_CTYPE=C``
    overwritten, where the reference passes the environment as it is and injects nothing. The
    kernel keeps the environment the process was started with (``/proc/self/environ``), read only
    when the variable holds a coercion's value and ``LC_ALL`` (which prevents coercion) is unset.
    The interpreter's own locale is left as it is: only what the children inherit changes."""
    environ = os.environb
    value = environ.get(b"LC_CTYPE")
    if value not in COERCED_LOCALES or environ.get(b"LC_ALL"):
        return
    try:
        with open("/proc/self/environ", "rb") as handle:  # the kernel's: bounded by the exec's limit
            started = handle.read()
    except OSError:
        return
    original = None
    for entry in started.split(b"\0"):
        if entry.startswith(b"LC_CTYPE="):
            original = entry[9:]  # the last one, as os.environ itself takes a repeated name
    if original is None:
        del environ[b"LC_CTYPE"]
    elif original != value:
        environ[b"LC_CTYPE"] = original


def main(argv: list[str] | None = None, invocation: Invocation | None = None) -> int:
    """The CLI's exit code; ``invocation``, when given, is filled in (``entry`` reads it)."""
    caller_fds.take()  # before the runner opens any descriptor of its own
    ensure_standard_fds()
    undo_locale_coercion()
    argv = list(sys.argv[1:] if argv is None else argv)
    invocation = invocation or Invocation("run", "human")
    invocation.operation = argv[0] if argv and argv[0] in COMMANDS else "run"
    try:
        invocation.error_format, argv = split_error_format(argv)
        if invocation.error_format == "json":
            envelope_only()
        if not argv:
            say(sys.stderr, _usage_text())
            invocation.refused = True
            return Kind.USAGE.code
        if argv[0] == "help" and len(argv) > 1:
            asked = _help_asked(argv[1:])
            if asked is None:
                say(sys.stdout, HELP_HELP)
                return 0
            argv = [asked, "--help"]
        elif argv[0] in ("-h", "--help", "help"):
            say(sys.stdout, _usage_text())
            return 0
        if argv[0] in ("-V", "--version"):
            from ..version import __version__  # here: a run loads no module it does not use

            say(sys.stdout, f"processkit-cli {__version__}\n")
            return 0
        name = argv[0]
        if name not in COMMANDS:
            raise usage(f"unrecognized subcommand '{name}'", hint=_usage_text().splitlines()[0])
        invocation.operation = name
        # before the command's modules, whose imports open files; refused only where something runs
        too_few = fdlimit.start_with_room(runs=name in RUNNING_COMMANDS)
        if too_few is not None:
            raise Failure(Kind.SETUP, too_few)
        module = __import__(COMMANDS[name][0], fromlist=["main"])  # importlib's own import costs a run more
        return module.main(argv[1:], invocation)
    except Failure as failure:
        return invocation.fail(failure)
    except StdoutClosed:
        return STDOUT_CLOSED
    except KeyboardInterrupt:
        return Kind.CANCELLED.code
    except Exception as exc:  # noqa: BLE001 - a bug must still end as one line and code 104
        return invocation.fail(fdlimit.unexpected(exc, "to go on"))


def entry() -> None:
    """Console entry point: exit without the interpreter's teardown, which only costs time.

    Everything the CLI writes is flushed here first; no state outlives the process.
    """
    gc.set_threshold(COLLECT_AFTER_ALLOCATIONS)
    invocation = Invocation("run", "human")
    code = main(invocation=invocation)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code < 0:  # commands.DIE_BY_SIGINT: everything released, end as the signal would have
        die_by_signal(-code)
    finder = sys.modules.get("processkit.cli.quickimport")  # the launcher's, when it put it first
    if finder is not None and not invocation.refused:  # a usage error's modules (argparse) are no run's
        finder.save()  # a run's byte code kept together again, when it had to be read file by file
    os._exit(code)


def die_by_signal(number: int) -> None:
    signum.signal(number, signum.SIG_DFL)
    os.kill(os.getpid(), number)
    os._exit(128 + number)  # not reached unless the signal is blocked

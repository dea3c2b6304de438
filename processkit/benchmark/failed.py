"""What a failing run or step of a benchmark says: the failure (118, ``bench_failed``) that stops
it, worded as hyperfine words it, with the flag that would let it go on (``session`` raises it)."""

from __future__ import annotations

from ..errors import Failure, Kind
from ..text import quoted, sanitize
from . import driver, words
from .options import BY_DEST, switched_on
from .plan import Command, Options

STEP_WORDS = {"setup": "setup", "prepare": "preparation", "conclude": "conclusion", "cleanup": "cleanup"}


def step_failure(options: Options, argv: tuple[str, ...], step: str, measured: driver.Measured) -> Failure | None:
    """A setup, prepare, conclude or cleanup command must succeed: its failure, or None."""
    if measured.error is None and measured.exit_code == 0:
        return None
    why = measured.error or f"exit code {measured.exit_code}"
    how = f"terminated with a non-zero exit code ({why})"
    if measured.error is None and measured.signal is not None:
        how = measured.ended()  # killed by a signal: no exit code of its own
    text = _shell_text(options, argv)
    if text is not None:
        return Failure(
            Kind.BENCH_FAILED,
            f"the {STEP_WORDS[step]} command {quoted(text)} {how}; append ' || true' to it if that can be ignored",
        )
    import shlex  # a failure's words only

    given = shlex.join(argv)  # run without a shell (-N, or an argv), where ' || true' is two more arguments
    return Failure(
        Kind.BENCH_FAILED,
        f"the {STEP_WORDS[step]} command {quoted(given)} {how}; it runs without a shell, so give it "
        f"as sh -c {sanitize(shlex.quote(given + ' || true'))} if that can be ignored",
    )


def _shell_text(options: Options, argv: tuple[str, ...]) -> str | None:
    """A step as the user typed it, if it ran through the shell: its text, not the shell's argv."""
    shell = options.shell
    if shell is not None and argv[: len(shell) + 1] == (*shell, "-c") and len(argv) == len(shell) + 2:
        return argv[-1]
    return None


def run_failure(options: Options, command: Command, measured: driver.Measured, what: str) -> Failure | None:
    """A timed or warm-up run that could not run, or failed where failures are not ignored: its
    failure, or None (a timed-out run is kept aside, never a failure). ``what``: the run's place
    (``run-1``, ``warmup-2``), said as hyperfine says it, so a warm-up's failure is not read as a
    timed run's."""
    if measured.timed_out:
        return None
    if measured.exit_code is None:  # the runner could not run it at all: nothing to ignore
        from ..spawn_words import shell_line_hint  # a --command ["make test"]

        hint = shell_line_hint(command.argv[0], measured.error or "", words.SHELL_LINE_HINT)
        why = f"cannot benchmark {quoted(command.name)}: {measured.error}"
        return Failure(Kind.BENCH_FAILED, why, hint=hint)
    if measured.exit_code == 0 or options.ignores(measured.exit_code):
        return None
    unseen = (  # its output discarded by default: --show-output conflicts with a chosen --output
        not command.output_chosen and driver.where(options, command.output) == "pipe"
    )
    see = f", or {switched_on(options.named, 'show_output')} to see what it printed" if unseen else ""
    ignore = switched_on(options.named, "ignore_failure")
    anyway = f"use {ignore} to benchmark it anyway"
    codes = options.ignore_failure
    if isinstance(codes, tuple):  # the codes given do not name this one: "use it" was given
        named = options.named(BY_DEST["ignore_failure"])
        listed = f"={','.join(map(str, codes))}" if named.startswith("-") else str(list(codes))
        anyway = f"{named}{listed} does not name it: add it there, or use {ignore} (every non-zero exit)"
    where = _place(what)
    return Failure(
        Kind.BENCH_FAILED, f"the command {quoted(command.name)} {measured.ended()} in {where}; {anyway}{see}"
    )


def _place(what: str) -> str:
    """``run-1`` -> ``its first timed run``, ``warmup-3`` -> ``warm-up run 3`` (1-based, as the
    progress line counts them; hyperfine's ``benchmark iteration N`` counts from 0)."""
    kind, number = what.rsplit("-", 1)
    noun = "warm-up run" if kind == "warmup" else "timed run"
    return f"its first {noun}" if number == "1" else f"{noun} {number}"

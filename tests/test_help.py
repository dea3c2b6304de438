"""Help, as the reference's: every subcommand's --help lists the global --error-format, and the
root help lists -V, --version."""

from __future__ import annotations

import pytest

from conftest import run_cli
from processkit.cli.main import COMMANDS


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommands_help_lists_the_global_error_format(command):
    proc = run_cli(command, "--help")
    assert proc.returncode == 0 and proc.stderr == b""
    assert "--error-format <human|json>" in proc.stdout.decode()


def test_the_root_help_lists_version_help_and_error_format():
    for argv in (["--help"], ["-h"], ["help"]):
        proc = run_cli(*argv)
        assert proc.returncode == 0
        text = proc.stdout.decode()
        assert "-V, --version" in text and "-h, --help" in text and "--error-format <human|json>" in text


def test_help_with_a_subcommand_prints_that_subcommands_help():
    # clap's `help SUBCOMMAND`, which the reference has: the subcommand's own help, not the root's.
    asked, direct = run_cli("help", "wait"), run_cli("wait", "--help")
    assert asked.returncode == 0 and asked.stdout == direct.stdout
    assert asked.stdout.startswith(b"usage: processkit-cli wait")
    unknown = run_cli("help", "bogus")
    assert unknown.returncode == 100 and b"unrecognized subcommand 'bogus'" in unknown.stderr


def test_help_help_and_extra_words_are_as_claps():
    # clap's `help` walks its words as nested subcommands: `help help` is help's own help (0);
    # a word after a command that has no subcommands is unrecognized (a usage error), as is a
    # flag there (clap takes it as a command name, so `help -V` prints no version).
    own = run_cli("help", "help")
    assert own.returncode == 0 and own.stdout.startswith(b"usage: processkit-cli help [COMMAND]...")
    for words, unknown in (
        (["run", "extra"], "extra"),
        (["--help"], "--help"),
        (["-V"], "-V"),
        (["help", "run"], "run"),
    ):
        proc = run_cli("help", *words)
        assert (proc.returncode, proc.stdout) == (100, b""), words
        assert f"unrecognized subcommand '{unknown}'".encode() in proc.stderr


def test_the_documented_error_format_still_works_after_the_subcommand():
    proc = run_cli("inspect", "--error-format", "json", "--run-id", "ghost")
    assert proc.returncode == 103 and proc.stderr.startswith(b'{"error_version":1')


# -- every flag says what it does (issue 23, item 12) -------------------------------------------
def _described(parser) -> list[str]:
    """Each option and positional of ``parser`` (and of any subparser) with no help, or with
    one that only says it may repeat."""
    import argparse

    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                missing += _described(sub)
            continue
        text = (action.help or "").strip()
        if action.help is argparse.SUPPRESS:
            continue
        if len(text.split()) < 3:
            missing.append(f"{parser.prog} {'/'.join(action.option_strings) or action.dest}: {text!r}")
    return missing


def test_every_flag_of_every_subcommand_has_a_description():
    from processkit.cli.parsers import all_parsers, root_parser

    parsers = [root_parser(), *all_parsers().values()]
    assert [line for parser in parsers for line in _described(parser)] == []


def test_run_help_describes_its_flags_with_their_defaults():
    shown = run_cli("run", "--help").stdout.decode()
    for flag, words in (("--timeout DUR", "no limit"), ("--grace DUR", "SIGTERM"), ("--capture-max-bytes", "8m")):
        line = shown[shown.index(flag) :].split("\n  -")[0]
        assert words in line, line


def test_doctors_usage_line_lists_every_require_flag():
    """``--require-accounting`` was in doctor's options but not its usage line: each
    ``--require-*`` its options list is on the usage line, with its value as the others'."""
    text = run_cli("doctor", "--help").stdout.decode()
    usage, _, options = text.partition("\n\n")
    required = {line.split()[0] for line in options.splitlines() if line.strip().startswith("--require-")}
    assert "--require-accounting" in required
    for flag in required:
        assert f"[{flag}" in usage, (flag, usage)
    assert "[--require-accounting <MECHANISM>]" in usage


def test_batchs_usage_line_lists_every_batch_flag():
    """``--group-limit``, ``--junit``, ``--retry-delay`` and ``--partition`` were in batch's options
    but not its usage line (docs/batch.md's synopsis had them): each long flag of its options
    section is on the usage line."""
    text = run_cli("batch", "--help").stdout.decode()
    usage, _, rest = text.partition("\n\n")
    options = rest.partition("\noptions:\n")[2].partition("\n\n")[0]
    named = [line.split("  ")[1] for line in options.splitlines() if line.startswith("  -")]
    flags = {word.rstrip(",") for line in named for word in line.split() if word.startswith("--")} - {"--help"}
    assert {"--junit", "--partition", "--group-limit", "--retry-delay", "--jobs"} <= flags
    for flag in flags:
        assert f"{flag} " in usage or f"{flag}]" in usage, (flag, usage)


def test_batchs_help_shows_a_job_flags_choices_as_runs_does():
    """``--capture-overflow`` and ``--capture-keep`` showed as CAPTURE_OVERFLOW and CAPTURE_KEEP
    under ``batch --help`` where ``run --help`` lists their choices."""
    batch, run = (run_cli(command, "--help").stdout.decode() for command in ("batch", "run"))
    for shown in ("--capture-overflow {truncate,cancel}", "--capture-keep {head,tail,head-tail}"):
        assert shown in run and shown in batch, shown

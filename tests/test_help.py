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


def test_the_documented_error_format_still_works_after_the_subcommand():
    proc = run_cli("inspect", "--error-format", "json", "--run-id", "ghost")
    assert proc.returncode == 103 and proc.stderr.startswith(b'{"error_version":1')

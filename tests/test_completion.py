"""``processkit-cli completion``: the scripts are loaded into the real shells and asked to
complete, and what they offer is held to what the binary itself reports (probe's surface)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import SAFETY_NET, run_cli
from control_support import json_out
from surface import reported_flags

# A completion request in bash: the words typed so far, the last one being completed.
BASH_COMPLETE = r"""
source "$1"
shift
COMP_WORDS=("$@")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="${COMP_WORDS[*]}"
COMP_POINT=${#COMP_LINE}
"$COMPLETER" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> dict:
    directory = tmp_path_factory.mktemp("completion")
    found = {}
    for shell in ("bash", "zsh", "fish"):
        proc = run_cli("completion", shell)
        assert proc.returncode == 0 and proc.stderr == b"", (shell, proc.stderr)
        found[shell] = directory / f"processkit-cli.{shell}"
        found[shell].write_bytes(proc.stdout)
    return found


@pytest.fixture(scope="module")
def surface() -> dict[str, set[str]]:
    return reported_flags()


def bash_complete(script, *words, cwd=None) -> list[str]:
    completer = re.search(r"^complete .*-F (\S+) processkit-cli$", script.read_text(), re.M)
    assert completer, "the bash script registers no completion function for processkit-cli"
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", BASH_COMPLETE, "complete", str(script), "processkit-cli", *words],
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
        cwd=cwd,
        env={"COMPLETER": completer[1], "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line]


def test_bash_completes_a_subcommand(scripts):
    assert bash_complete(scripts["bash"], "ins") == ["inspect"]
    assert set(bash_complete(scripts["bash"], "c")) == {"cancel", "completion"}


def test_bash_completes_a_flag(scripts):
    assert set(bash_complete(scripts["bash"], "run", "--cap")) == {
        "--capture-dir",
        "--capture-max-bytes",
        "--capture-overflow",
        "--capture-keep",
    }


def test_bash_completes_a_fixed_flag_value(scripts):
    assert set(bash_complete(scripts["bash"], "run", "--capture-overflow", "")) == {"truncate", "cancel"}
    assert set(bash_complete(scripts["bash"], "run", "--capture-keep", "")) == {"head", "tail", "head-tail"}
    assert set(bash_complete(scripts["bash"], "--error-format", "")) == {"human", "json"}
    assert set(bash_complete(scripts["bash"], "list", "--error-format", "j")) == {"json"}


def test_bash_completes_paths_for_path_flags(scripts, tmp_path):
    (tmp_path / "subdir").mkdir()
    (tmp_path / "run.jsonl").write_text("")
    for words in (("run", "--jsonl"), ("run", "--stdin-file"), ("run", "--env-file"), ("events", "--file")):
        assert set(bash_complete(scripts["bash"], *words, "", cwd=tmp_path)) == {"run.jsonl", "subdir"}, words
    for words in (("run", "--cwd"), ("run", "--capture-dir")):
        assert bash_complete(scripts["bash"], *words, "", cwd=tmp_path) == ["subdir"], words


def test_bash_offers_every_subcommand_and_flag_the_binary_reports(scripts, surface):
    """Nothing is listed here: whatever probe reports, completion must offer."""
    assert set(bash_complete(scripts["bash"], "")) >= set(surface)
    for command, flags in surface.items():
        offered = set(bash_complete(scripts["bash"], command, "--"))
        assert flags <= offered, (command, flags - offered)


def test_zsh_script_is_produced_and_parses(scripts):
    text = scripts["zsh"].read_text()
    assert text.startswith("#compdef processkit-cli") and "--capture-overflow" in text
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    proc = subprocess.run(["zsh", "-n", str(scripts["zsh"])], capture_output=True, text=True, timeout=SAFETY_NET)
    assert proc.returncode == 0, proc.stderr


def fish_complete(script, line: str) -> list[str]:
    proc = subprocess.run(
        ["fish", "--no-config", "-c", f"source {script}; complete -C '{line}'"],
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
    )
    assert proc.returncode == 0, proc.stderr
    return [entry.partition("\t")[0] for entry in proc.stdout.splitlines()]


def test_fish_script_is_produced_parses_and_completes(scripts):
    assert "complete -c processkit-cli" in scripts["fish"].read_text()
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    proc = subprocess.run(
        ["fish", "--no-execute", str(scripts["fish"])], capture_output=True, text=True, timeout=SAFETY_NET
    )
    assert proc.returncode == 0, proc.stderr
    assert fish_complete(scripts["fish"], "processkit-cli ins") == ["inspect"]
    assert set(fish_complete(scripts["fish"], "processkit-cli run --capture-ov")) == {"--capture-overflow"}
    assert set(fish_complete(scripts["fish"], "processkit-cli run --capture-overflow ")) == {"truncate", "cancel"}


@pytest.mark.parametrize("args", [(), ("tcsh",), ("bash", "zsh"), ("--json",)])
def test_a_missing_or_unknown_shell_is_a_usage_error(args):
    proc = run_cli("completion", *args)
    assert proc.returncode == 100 and proc.stdout == b""
    assert proc.stderr.decode().startswith("processkit-cli: ")


def test_probe_lists_completion_as_an_extension():
    report = json_out(run_cli("probe", "--json", "--require-surface", "completion"))
    assert report["compatible"] is True and "completion" in report["surface"]

"""What the installed binary reports as its surface, shaped for tests that hold something else
(completion, man pages) to it."""

from __future__ import annotations

from conftest import run_cli
from control_support import json_out


def reported_flags() -> dict[str, set[str]]:
    """Subcommand -> its long flags, as ``probe --json`` reports them (capabilities left out)."""
    flags: dict[str, set[str]] = {}
    for token in json_out(run_cli("probe", "--json"))["surface"]:
        command, _, flag = token.partition(":")
        if not flag or flag.startswith("--"):
            flags.setdefault(command, set()).update([flag] if flag else [])
    return flags

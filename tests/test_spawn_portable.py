"""The native spawn on an architecture other than x86-64: its shared-stack child enters through
x86-64 assembly, so every other build takes the copy-on-write child (clone3 or fork), the same
code ``-DPK_SPAWN_COW`` selects here. That variant must compile cleanly, with no x86-64
instruction left in it; .ci/sanitize builds it whole and runs the spawn tests against it, and
``PROCESSKIT_SPAWN=python`` (every test of tests/test_spawn.py runs on both paths) is the
fallback where no module was built at all."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parent.parent / "csrc"
FLAGS = ["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{CSRC}"]

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def preprocess(*defines: str) -> str:
    done = subprocess.run(
        ["gcc", "-E", "-P", *FLAGS, *defines, str(CSRC / "spawn.c")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("defines", [[], ["-DPK_SPAWN_COW"]], ids=["shared-stack", "copy-on-write"])
@pytest.mark.parametrize("source", ["spawn.c", "spawn_report.c", "spawn_child.c"])
def test_each_spawn_variant_compiles_without_warnings(defines, source):
    done = subprocess.run(
        ["gcc", "-fsyntax-only", *FLAGS, *defines, str(CSRC / source)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_the_assembly_is_only_in_the_x86_64_shared_stack_child():
    assert '"syscall' in preprocess()
    assert '"syscall' not in preprocess("-DPK_SPAWN_COW")
    assert "clone3_call" not in preprocess("-DPK_SPAWN_COW")

"""What the repository's top level holds: the design card's layout and the files every project keeps.
A stray file there (a test run against old code leaves files named after its arguments in its
working directory) is committed by ``git add -A`` without a word; this names it."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = {
    ".ci", ".clang-format", ".gitignore", "CHANGELOG.md", "MANIFEST.in", "README.md", "bench", "csrc",
    "docs", "man", "processkit", "pyproject.toml", "setup.py", "skills", "tests",
}  # fmt: skip


def test_the_top_level_holds_only_the_layouts_entries():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an sdist or a wheel's tests)")
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60
    ).stdout.split(b"\0")
    top = {name.split(b"/", 1)[0].decode("utf-8", "backslashreplace") for name in listed if name}
    assert top - EXPECTED == set(), (
        f"tracked at the repository's top level, not in its layout: {sorted(top - EXPECTED)}"
    )
    assert EXPECTED - top == set(), f"the layout's entries missing: {sorted(EXPECTED - top)}"

"""One idiom per concept, kept so by scanning the package's sources: a lock is taken through
``native`` (``lock_exclusive``, ``lock_shared``), and a name's hex digits are checked against
``rundir.HEX_DIGITS``. Each test names the places that break its rule."""

from __future__ import annotations

import ast
import pathlib

import processkit

PACKAGE = pathlib.Path(processkit.__file__).parent


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield str(path.relative_to(PACKAGE)), path.read_text(encoding="utf-8")


def test_every_flock_of_the_package_is_natives():
    """No module but ``native.py`` calls ``flock`` itself (``service/scratch.py`` did, beside
    ``liveness``'s ``lock_exclusive``)."""
    callers = [
        f"{name}:{node.lineno}"
        for name, text in _sources()
        if name != "native.py"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call) and "flock" in (getattr(node.func, "attr", None), getattr(node.func, "id", None))
    ]
    assert callers == []


def test_hex_digits_are_spelled_once():
    """The lower-case hex digits are written out in ``rundir.py`` alone (``HEX_DIGITS``):
    ``cli/bundlewrite.py``, ``capture_layout.py`` and ``containment/sweep.py`` each spelled
    them again in a check of their own."""
    spelled = [
        f"{name}:{node.lineno}"
        for name, text in _sources()
        if name != "rundir.py"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "0123456789abcdef" in node.value.lower()
    ]
    assert spelled == []

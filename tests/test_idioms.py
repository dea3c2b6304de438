"""One idiom per concept, kept so by scanning the package's sources: a lock is taken through
``native`` (``lock_exclusive``, ``lock_shared``), and a name's hex digits are checked against
``rundir.HEX_DIGITS``, a count's noun agrees through ``text.plural``, and things are numbered by
``plain.counter``. Each test names the places that break its rule."""

from __future__ import annotations

import ast
import pathlib

import processkit

PACKAGE = pathlib.Path(processkit.__file__).parent


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield str(path.relative_to(PACKAGE)), path.read_text(encoding="utf-8")


def _where(found, besides: str | None = None) -> list[str]:
    """Each ``module:line`` of the package (but the module ``besides``, the idiom's home) whose
    syntax node ``found`` picks out."""
    return [
        f"{name}:{node.lineno}"
        for name, text in _sources()
        if name != besides
        for node in ast.walk(ast.parse(text))
        if found(node)
    ]


def test_every_flock_of_the_package_is_natives():
    """No module but ``native.py`` calls ``flock`` itself (``service/scratch.py`` did, beside
    ``liveness``'s ``lock_exclusive``)."""
    callers = _where(
        lambda node: (
            isinstance(node, ast.Call) and "flock" in (getattr(node.func, "attr", None), getattr(node.func, "id", None))
        ),
        "native.py",
    )
    assert callers == []


def test_hex_digits_are_spelled_once():
    """The lower-case hex digits are written out in ``rundir.py`` alone (``HEX_DIGITS``):
    ``cli/bundlewrite.py``, ``capture_layout.py`` and ``containment/sweep.py`` each spelled
    them again in a check of their own."""
    spelled = _where(
        lambda node: (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and "0123456789abcdef" in node.value.lower()
        ),
        "rundir.py",
    )
    assert spelled == []


def _itertools_count(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.module == "itertools" and any(alias.name == "count" for alias in node.names)
    return isinstance(node, ast.Attribute) and node.attr == "count" and getattr(node.value, "id", None) == "itertools"


def test_things_are_numbered_by_plain_counter():
    """No module numbers things with ``itertools.count``: ``plain.counter`` is the one idiom (it
    keeps ``itertools`` off a plain run's start-up; tests/test_startup_builtins.py)."""
    counts = _where(_itertools_count)
    assert counts == []


def _inline_plural(node: ast.AST) -> bool:
    """``'s' if n != 1 else ''`` (or its mirror): a count compared with 1 choosing an ``s``."""
    return (
        isinstance(node, ast.IfExp)
        and isinstance(node.test, ast.Compare)
        and all(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.test.ops)
        and any(isinstance(c, ast.Constant) and c.value == 1 for c in node.test.comparators)
        and any(isinstance(b, ast.Constant) and b.value == "s" for b in (node.body, node.orelse))
    )


def test_a_count_and_its_noun_agree_through_text_plural():
    """``text.plural`` is the one idiom: ``cli/report.py``, ``cli/batch.py``, ``batching/failures.py``,
    ``batching/fleet.py`` and ``report/render.py`` each chose the ``s`` inline."""
    inline = _where(_inline_plural, "text.py")
    assert inline == []


def _quotes_through_sanitize(node: ast.AST) -> bool:
    """A ``usage(f"...")`` whose text calls ``sanitize`` on a value it holds."""
    return (
        isinstance(node, ast.Call)
        and "usage" in (getattr(node.func, "id", None), getattr(node.func, "attr", None))
        and any(
            isinstance(part, ast.Call) and getattr(part.func, "id", None) == "sanitize"
            for argument in node.args
            if isinstance(argument, ast.JoinedStr)
            for value in argument.values
            if isinstance(value, ast.FormattedValue)
            for part in ast.walk(value.value)
        )
    )


def test_a_refusal_quotes_the_value_through_text_cut():
    """A usage refusal quotes the value it refuses as ``text.cut`` gives it (its first 64
    characters and its length: docs/threat-model.md; the failure's renderer makes it safe for a
    terminal), never through ``sanitize``: ``batching/ci.py``, ``batching/limits.py``,
    ``batching/graph.py``, ``batching/dask_client.py``, ``benchmark/options.py`` and
    ``benchmark/executed.py`` did, beside the ``cut`` of the others."""
    quoted = _where(_quotes_through_sanitize)
    assert quoted == []


def test_the_apis_refusal_of_a_failure_goes_through_refused():
    """A ``Failure`` the API turns into the caller's ValueError goes through ``processkit/refusal.refused``,
    which escapes what the CLI's error line escapes: ``api/options.py``, ``api/bench.py``,
    ``api/listing.py``, ``api/opened.py`` and ``batching/caller.py`` each raised
    ``ValueError(failure.message)``, an ESC of the value it quoted raw in the traceback."""
    raw = _where(
        lambda node: (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "ValueError"
            and any(getattr(argument, "attr", None) == "message" for argument in node.args)
        )
    )
    assert raw == []

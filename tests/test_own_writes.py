"""Every write the runner makes to its own stdout and stderr is one that cannot hold it for ever
(docs/run.md: a reader that takes nothing for the echo's bound loses the rest): its lines go
through ``diagnostics.say``, bounded. This scans the package's sources and fails naming each
other use of ``sys.stdout`` / ``sys.stderr`` (a ``print``, a ``.write``, a ``.fileno()`` written
to) outside the few call sites listed below, each with why its writes are bounded or need not be."""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "processkit"
STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}

# (module, enclosing function) -> why its use of the standard streams may stay outside ``say``.
ALLOWED = {
    ("diagnostics.py", "say"): "the one place: writes that cannot block, bounded by ECHO_STALL_SECONDS",
    ("cli/output.py", "_write"): "a client's stdout, as a blocking write (a pager); a runner's (bench) with its stall",
    ("cli/batch_progress.py", "__init__"): "batch's LiveOutput and LiveLines: never a blocking write on its loop",
    ("cli/main.py", "entry"): "the final flush of buffers ``say`` leaves empty",
    ("cli/parsing.py", "__init__"): "the help's width from the terminal's, no write",
}


def _uses(tree: ast.AST):
    """(line, enclosing function) for each use of a standard stream that is not ``say``'s own
    first argument, and each ``print`` call."""
    said = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "say" and node.args:
            said.add(id(node.args[0]))
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        stream = (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
            and node.attr in STREAMS
            and id(node) not in said
        )
        printed = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
        if stream or printed:
            found.append((node.lineno, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


def test_the_runners_own_writes_go_through_say():
    bypasses = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for line, function in _uses(ast.parse(path.read_text(), str(path))):
            if (module, function) not in ALLOWED:
                bypasses.append(f"{module}:{line} in {function}")
    assert bypasses == [], "writes to the runner's own stdout/stderr outside diagnostics.say: " + ", ".join(bypasses)


def test_every_allowed_call_site_still_exists():
    seen = {
        (path.relative_to(PACKAGE).as_posix(), function)
        for path in PACKAGE.rglob("*.py")
        for _, function in _uses(ast.parse(path.read_text(), str(path)))
    }
    assert set(ALLOWED) - seen == set()


def test_the_scan_finds_a_bypass():
    tree = ast.parse("import sys\ndef f():\n    sys.stderr.write('x')\n    print('y')\n    say(sys.stderr, 'z')\n")
    assert _uses(tree) == [(3, "f"), (4, "f")]

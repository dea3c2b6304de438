"""Every write the runner makes to its own stdout and stderr is one that never holds it for ever
on a reader it gave up as stalled (docs/run.md): its lines go through ``diagnostics.say``
(``writeall.write_own``). This scans the package's sources and fails naming each other use of the
standard streams (``sys.stdout`` / ``sys.stderr`` however reached: ``from sys import stderr``,
``import sys as s``, ``getattr(sys, "stderr")``; a ``print``; ``os.write(1|2, ...)``; ``logging``;
``traceback.print_*``) outside the few source lines listed below, each with why it may stay."""

from __future__ import annotations

import ast
import functools
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "processkit"
STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}

# (module, the line's source text, stripped) -> why its use of the standard streams may stay.
ALLOWED = {
    ("diagnostics.py", "if stream is sys.stderr:"): "the one place (``say``): a comparison, no write",
    ("cli/output.py", "sys.stdout.flush()"): "a client's stdout: the buffered writer emptied before the write",
    (
        "cli/output.py",
        "return write_own(sys.stdout.fileno(), data, shared=True)",
    ): "the runner's own (bench): write_own",
    ("cli/output.py", "write_all(sys.stdout.fileno(), data)  # the buffered writer cut short on a non-blocking pipe"): (
        "a client's stdout, as a blocking write (a pager)"
    ),
    (
        "cli/batch_progress.py",
        "fd = sys.stderr.fileno()",
    ): "batch's LiveOutput and LiveLines: never a blocking write on its loop",
    (
        "cli/batch_progress.py",
        "self.output = LiveOutput(sys.stdout.fileno(), fd)  # on the batch's loop while it turns",
    ): ("batch's LiveOutput: never a blocking write on its loop"),
    ("cli/main.py", "for stream in (sys.stdout, sys.stderr):"): "the final flush of buffers ``say`` leaves empty",
    ("cli/parsing.py", "width = os.get_terminal_size(sys.stdout.fileno()).columns - 2"): "the help's width, no write",
    ("batching/dask_client.py", "import logging"): "Dask's loggers set quieter (``quiet``): no record written",
}


def _is_sys(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "sys"


def _found(node: ast.AST, said: set[int]) -> bool:
    """Whether ``node`` is a use of a standard stream (or a writer to one) outside ``say``."""
    if isinstance(node, ast.Attribute) and _is_sys(node.value) and node.attr in STREAMS:
        return id(node) not in said
    if isinstance(node, ast.ImportFrom):
        return (
            node.module == "sys"
            and any(alias.name in STREAMS for alias in node.names)
            or (node.module is not None and node.module.split(".")[0] == "logging")
        )
    if isinstance(node, ast.Import):
        return any(
            alias.name == "sys" and alias.asname or alias.name.split(".")[0] == "logging" for alias in node.names
        )
    if not isinstance(node, ast.Call):
        return False
    func, args = node.func, node.args
    if isinstance(func, ast.Name):
        streamed = func.id == "getattr" and len(args) > 1 and _is_sys(args[0])
        return func.id == "print" or streamed and isinstance(args[1], ast.Constant) and args[1].value in STREAMS
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        owner, name = func.value.id, func.attr
        written = owner == "os" and name == "write" and args and isinstance(args[0], ast.Constant)
        return bool(written and args[0].value in (1, 2)) or owner == "traceback" and name.startswith("print")
    return False


def _uses(source: str) -> list[tuple[int, str]]:
    """(line, the line's stripped source) for each use ``_found`` names, once a line."""
    tree = ast.parse(source)
    said = {
        id(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "say" and node.args
    }
    lines = source.splitlines()
    found = sorted({node.lineno for node in ast.walk(tree) if _found(node, said)})
    return [(line, lines[line - 1].strip()) for line in found]


@functools.cache
def _scanned() -> list[tuple[str, int, str]]:
    """(module, line, text) for each use in the package, scanned once for the tests."""
    return [
        (path.relative_to(PACKAGE).as_posix(), line, text)
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, text in _uses(path.read_text())
    ]


def test_the_runners_own_writes_go_through_say():
    bypasses = [f"{module}:{line}: {text}" for module, line, text in _scanned() if (module, text) not in ALLOWED]
    assert bypasses == [], "writes to the runner's own stdout/stderr outside diagnostics.say: " + "; ".join(bypasses)


def test_every_allowed_line_still_exists():
    assert set(ALLOWED) - {(module, text) for module, _, text in _scanned()} == set()


def test_the_scan_finds_a_bypass():
    source = (
        "import sys\nimport sys as s\nfrom sys import stderr\nimport logging\nimport traceback, os\n"
        "def f():\n    sys.stderr.write('x')\n    print('y')\n    say(sys.stderr, 'z')\n"
        "    getattr(sys, 'stdout').write('w')\n    os.write(2, b'v')\n    traceback.print_exc()\n"
        "    os.write(fd, b'u')\n"
    )
    assert [line for line, _ in _uses(source)] == [2, 3, 4, 7, 8, 10, 11, 12]

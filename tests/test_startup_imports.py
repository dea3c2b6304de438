"""What a plain ``run`` imports before its child ends: the start-up budget, held by a test.

Start-up is most of a short run's cost, and most of start-up is imports (bench/README.md, "The
hot path at the physical limit"). A heavy module added back on the path of ``run --jsonl F --
true`` fails here, naming the processkit module that pulled it in. Modules the interpreter itself
imports before the script starts (``python -c pass``: ``site``, and with an editable install
setuptools' finder, which pulls ``re`` and ``pathlib``) are the baseline and are not counted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import cli_command

_LINE = re.compile(r"import time:\s+\d+ \|\s+\d+ \|( *)(\S+)")


def _imports(argv: list[str], env: dict[str, str]) -> list[tuple[str, str | None]]:
    """``(module, importer)`` for each module first imported by ``argv``; ``importer`` is the
    nearest processkit module above it in the import tree (None: the launcher script, or an
    import done inside a function once the run is under way, which starts a tree of its own)."""
    result = subprocess.run(
        argv,
        env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    rows = [(len(m[1]), m[2]) for m in map(_LINE.match, result.stderr.decode().splitlines()) if m]
    found = []
    for index, (depth, name) in enumerate(rows):
        # -X importtime prints a module after everything it imported, one level deeper.
        importer, level = None, depth
        for above_depth, above in rows[index + 1 :]:
            if above_depth < level:
                level = above_depth
                if above.startswith("processkit"):
                    importer = above
                    break
        found.append((name, importer))
    return found


@pytest.fixture(scope="module")
def run_imports(tmp_path_factory) -> dict[str, str | None]:
    """Every module a plain run imports beyond the interpreter's own start-up."""
    jsonl = tmp_path_factory.mktemp("startup") / "run.jsonl"
    env = dict(os.environ)
    baseline = {name for name, _ in _imports([sys.executable, "-c", "pass"], env)}
    imported = _imports([*cli_command(), "run", "--jsonl", str(jsonl), "--", "true"], env)
    assert any(name.startswith("processkit") for name, _ in imported), "no import trace was read"
    return {name: importer for name, importer in imported if name not in baseline}


def heavy_imports(run_imports: dict[str, str | None], forbidden: set[str], importers) -> list[str]:
    """The forbidden modules pulled in by an importer ``importers(importer)`` accepts."""
    return sorted(
        f"{name} (imported by {importer or 'the launcher, or a function at run time'})"
        for name, importer in run_imports.items()
        if name.split(".")[0] in forbidden and importers(importer)
    )


# -- the CLI's half: from the launcher to ``execute(spec)`` ----------------------------------------

CLI_FORBIDDEN = {
    "re",
    "enum",
    "typing",
    "argparse",
    "gettext",
    "locale",
    "functools",
    "json",
    "contextlib",
    "dataclasses",
    "importlib",
}
CLI_SIDE = ("processkit.cli", "processkit.spec", "processkit.errors", "processkit.text", "processkit.diagnostics")
COMMON_RUN = ["--jsonl", "F", "--timeout", "5s", "--idle-timeout", "1m", "--capture-dir", "D", "--label", "k=v"]
COMMON_RUN += ["--env", "A=1", "--run-id", "r1", "--no-echo", "--cwd", "/", "--", "true"]


def test_cli_path_imports_nothing_heavy(run_imports):
    importers = lambda importer: importer is not None and importer.startswith(CLI_SIDE)  # noqa: E731
    assert heavy_imports(run_imports, CLI_FORBIDDEN, importers) == []


def test_parsing_a_common_run_imports_nothing_heavy():
    """The CLI modules alone, parsing the common flags into a RunSpec, in an interpreter without
    ``site`` (whose editable-install finder would import ``re`` and ``enum`` first)."""
    import processkit

    source = os.path.dirname(os.path.dirname(processkit.__file__))
    script = (
        f"import sys; sys.path.insert(0, {source!r}); before = set(sys.modules)\n"
        "from processkit.cli import main, run\n"
        f"spec = run.parse({COMMON_RUN!r})\n"
        "assert spec.timeout_ms == 5000 and spec.capture_dir == 'D', spec\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    result = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    imported = result.stdout.split()
    assert "processkit.cli.run" in imported
    assert sorted(name for name in imported if name.split(".")[0] in CLI_FORBIDDEN) == []


def test_the_installed_launcher_imports_only_processkit():
    """pip's console_scripts launcher imports ``re`` first; ours (processkit/cli/processkit-cli)
    must stay as it is: nothing but the CLI."""
    import ast

    launcher = cli_command()[0]
    if launcher == sys.executable:
        pytest.skip("processkit-cli is not installed beside this interpreter")
    with open(launcher, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported and {name.split(".")[0] for name in imported} <= {"sys", "processkit"}

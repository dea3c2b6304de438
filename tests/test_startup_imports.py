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

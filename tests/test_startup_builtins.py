"""The interpreter's own modules a plain ``run`` leaves unimported (issue 49's start-up row).

``tests/test_startup_imports.py`` reads the import trace against ``python -c pass``'s, so a module
the test interpreter's ``site`` already loaded (an editable install's finder imports ``re``, and
with it ``collections``, ``itertools``, ``operator``) passes there unseen. Here the run is a
regular install's: a byte-compiled copy of the package, no ``site``, through the launcher's
finder and bundle, and the modules are those in ``sys.modules`` at the run's exit that were not
before the launcher's first import. Modules, not times: each one named here cost a plain run's
start-up 0.3-0.5 M instructions when it was imported for a value a plain run never needed
(bench/README.md, "Start-up (issue 49, start65)").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import processkit

# itertools: ``plain.counter`` numbers runs, locks and timers; _operator: ``attrgetter``, made on a
# record's first read of its fields; _collections: the echo's backlog, made by its first queued chunk.
UNNEEDED = {"itertools", "_operator", "operator", "_collections", "collections"}


def _plain_run_modules(tmp_path, argv_tail: list[str]) -> set[str]:
    """The modules a launcher-started ``run`` added to ``sys.modules`` by its exit, processkit's aside."""
    package = tmp_path / "processkit"
    shutil.copytree(os.path.dirname(processkit.__file__), package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, timeout=120)
    added = tmp_path / "added"
    import _cffi_backend  # the C module's own dependency, found where ``site`` would add it (not run here)

    beside = os.path.dirname(_cffi_backend.__file__)
    script = (
        f"import os, sys; sys.path[:0] = [{str(tmp_path)!r}, {beside!r}]; before = set(sys.modules)\n"
        "def report(code):\n"
        f"    with open({str(added)!r}, 'w') as out:\n"
        "        out.write(' '.join(sorted(set(sys.modules) - before)))\n"
        "    real(code)\n"
        "real, os._exit = os._exit, report\n"
        f"sys.argv[1:] = ['run', '--jsonl', {str(tmp_path / 'run.jsonl')!r}, '--', *{argv_tail!r}]\n"
        "from processkit.cli.quickimport import install\ninstall()\n"
        "from processkit.cli.main import entry\nentry()\n"
    )
    # Twice: the first run writes the bundle (byte code read from the pycs), the second preloads it.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    for _ in range(2):
        result = subprocess.run(
            [sys.executable, "-S", "-c", script], stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=60
        )
        assert result.returncode == 0, result.stderr
    assert added.exists(), "the run ended without os._exit, so no module list was written"
    return {name for name in added.read_text().split() if not name.startswith("processkit")}


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="the interpreter's own modules are CPython's")
def test_a_plain_run_imports_no_interpreter_module_it_does_not_use(tmp_path):
    modules = _plain_run_modules(tmp_path, ["true"])
    assert "_json" in modules and "_cffi_backend" in modules, f"not a native plain run's modules: {sorted(modules)}"
    assert sorted(modules & UNNEEDED) == [], sorted(modules)

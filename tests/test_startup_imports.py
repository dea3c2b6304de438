"""What a plain ``run`` imports before its child ends: the start-up budget, held by a test.

Start-up is most of a short run's cost, and most of start-up is imports (bench/README.md, "The
hot path at the physical limit"). A heavy module added back on the path of ``run --jsonl F --
true`` fails here, naming the processkit module that pulled it in. Modules the interpreter itself
imports before the script starts (``python -c pass``: ``site``, and with an editable install
setuptools' finder, which pulls ``re`` and ``pathlib``) are the baseline and are not counted.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import cli_command
from processkit import jsontext, native
from processkit.control import server

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
    # A run first sweeps what dead runs left on the host (an earlier test's killed runner), which
    # imports the sweep: a run before the measured one leaves it nothing to find.
    subprocess.run([*cli_command(), "run", "--", "true"], stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    traces = [_imports([*cli_command(), "run", "--jsonl", str(jsonl), "--", "true"], env) for _ in range(3)]
    assert any(name.startswith("processkit") for name, _ in traces[0]), "no import trace was read"
    # What a plain run imports shows in every trace; what a loaded host alone brings in does not
    # (an exited child still listed in its group for a moment: the teardown's look arms a timer,
    # the heap's import; a runner another test killed meanwhile: the sweep of its leftovers).
    common = set.intersection(*({name for name, _ in trace} for trace in traces))
    return {name: importer for name, importer in traces[0] if name not in baseline and name in common}


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
    "collections",
    "selectors",
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
    assert imported and {name.split(".")[0] for name in imported} <= {"gc", "sys", "processkit"}


def test_the_package_reads_its_version_on_first_use():
    """The launcher imports ``processkit`` before its finder is in place, so what the package's
    ``__init__`` imports comes the interpreter's slow way on every start: ``__version__`` is read
    from ``processkit.version`` when first asked for, and is the same value."""
    script = (
        "import sys, processkit\n"
        "print('processkit.version' in sys.modules, processkit.__version__, '__version__' in dir(processkit))\n"
        "from processkit.version import __version__\n"
        "print(__version__)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first == f"False {second} True"


def test_the_launcher_raises_the_collectors_threshold_as_main_does():
    """The launcher sets the threshold before its first import; ``cli.main`` keeps the number."""
    from processkit.cli import main

    launcher = os.path.join(os.path.dirname(main.__file__), "processkit-cli")
    with open(launcher, encoding="utf-8") as handle:
        text = handle.read()
    assert f"gc.set_threshold({main.COLLECT_AFTER_ALLOCATIONS:_})" in text


def test_a_module_beside_the_launcher_is_not_imported(tmp_path):
    """The interpreter puts a script's own directory first on ``sys.path``; the launcher takes it
    off, so a file beside it named as a module the CLI imports (``select``, for the loop) is not
    run in place of the real one, and no import looks there first."""
    from processkit.cli import main

    marker = tmp_path / "marker"
    launcher = tmp_path / "processkit-cli"
    launcher.write_bytes((Path(main.__file__).parent / "processkit-cli").read_bytes())
    (tmp_path / "select.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise ImportError('not this one')\n")
    jsonl = tmp_path / "run.jsonl"
    result = subprocess.run(
        [sys.executable, str(launcher), "run", "--jsonl", str(jsonl), "--", "true"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    assert b'"event":"runner_exit"' in jsonl.read_bytes()


# -- the engine's half: what ``processkit.engine.runner.execute`` imports and does ---------------

ENGINE_FORBIDDEN = {
    "re",
    "enum",
    "typing",
    "json",
    "signal",
    "socket",
    "functools",
    "contextlib",
    "dataclasses",
    "argparse",
    "collections",  # with operator, keyword, reprlib: ~7 M instructions, for a deque (_collections has it)
    "operator",  # ~1.2 M instructions of Python fallbacks before it re-exports _operator's C types
    "selectors",  # ~1.2 M more and collections with it, for the epoll the loop uses (processkit/readiness.py)
}
ENGINE_SIDE = (
    "processkit.engine",
    "processkit.loop",
    "processkit.control",
    "processkit.registry",
    "processkit.containment",
    "processkit.events",
    "processkit.liveness",
    "processkit.rundir",
    "processkit.native",
    "processkit.jsontext",
    "processkit.plain",
    "processkit.signum",
)


def _engine_side(importer: str | None) -> bool:
    return importer is not None and importer.startswith(ENGINE_SIDE)


def _module_level_imports(module: str) -> set[str]:
    """The top packages ``module`` imports when it is loaded: not under ``if TYPE_CHECKING:``,
    not in a function, not in the ``except ImportError:`` fallback of a ``try``."""
    origin = importlib.util.find_spec(module).origin
    found: set[str] = set()

    def visit(statements) -> None:
        for node in statements:
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    with open(origin, encoding="utf-8") as handle:
        visit(ast.parse(handle.read()).body)
    return found


def test_engine_path_imports_nothing_heavy(run_imports):
    """Neither the engine's modules nor the run itself (an import inside a function once the
    engine is loaded has no processkit importer) pull in a forbidden module. Modules the launcher
    imported before the engine are the CLI's to answer for (test functions of their own); since
    the trace names only a module's first importer, the engine-side modules the run loads are
    also read for what they import at module level."""
    names = list(run_imports)
    at_run_time = dict(list(run_imports.items())[names.index("processkit.engine.runner") + 1 :])
    heavy = heavy_imports(run_imports, ENGINE_FORBIDDEN, _engine_side)
    heavy += heavy_imports(at_run_time, ENGINE_FORBIDDEN, lambda importer: importer is None)
    heavy += sorted(
        f"{name} (imported by {module})"
        for module in names
        if _engine_side(module)
        for name in _module_level_imports(module) & ENGINE_FORBIDDEN
    )
    assert not heavy, f"a plain run imports {', '.join(heavy)}"


def test_engine_path_leaves_the_rare_modules_alone(run_imports):
    """Pty-free, client-free runs never load what only those need; with the native module
    built, neither what only the fallbacks need (hashing, Popen, ctypes for prctl, resource for
    the reaped children's usage)."""
    rare = {"processkit.engine.pty", "processkit.engine.stdin_feed", "processkit.control.connection"}
    # the reader's event types and the failures' (events.base has the seven a run writes), the
    # bounded readers (no other run's files are read), a lodged host's pool, the terminal
    # hand-off (the trace's run has no terminal for its stdin): each a module and its classes
    rare |= {"processkit.events.types", "processkit.bounded", "processkit.containment.pool"}
    rare |= {"processkit.containment.lent", "processkit.engine.terminal"}
    rare |= {"_heapq", "heapq"}  # the loop's timer heap: a run with no deadline schedules no timer
    rare |= {"processkit.version"}  # read by ``--version``, ``probe`` and ``processkit.__version__``
    rare |= {"processkit.text"}  # the checks and escapes of what a run refuses, warns of or reads back
    rare |= {"processkit.containment.sweep_dead"}  # the sweep's ending of a run found dead
    rare |= {"processkit.containment.leftovers"}  # the escapee sweep: only where the runner has a child left
    rare |= {"processkit.containment.stragglers"}  # a v1 group's leftovers moved up: only where its rmdir failed
    rare |= {"processkit.events.backlog", "processkit.events.pipe_room"}  # a JSONL pipe that did not take a line whole
    rare |= {"processkit.engine.spawn_patched"}  # a second spawn's envp patched from the first's
    rare |= {"processkit.readback"}  # a carrier's read-back of a run's files, a ring put in order
    rare |= {"processkit.engine.stop_raise"}  # the stop that raises: a batch's waits before its host only
    if native.module() is not None:
        rare |= {"hashlib", "subprocess", "ctypes"}
        rare |= {"processkit.engine.spawn_popen"}  # the Popen fallback's child and preexec_fn
        rare |= {"processkit.engine.pump_python"}  # the pure-Python pump
        rare |= {"resource"}  # an extension module of its own: the native module has getrusage
        rare |= {"fcntl"}  # likewise: the native module has flock and the pipe size's fcntl
    loaded = sorted(rare & set(run_imports))
    assert not loaded, f"a plain run imports {', '.join(loaded)}"


# -- JSON without the json package: byte for byte what json.dumps gives ---------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(blacklist_categories=()))  # surrogates and controls included
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(st.characters(blacklist_categories=()), max_size=8), inner, max_size=6)
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_jsontext_is_json_dumps_byte_for_byte(value):
    assert jsontext.dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_jsontext_refuses_what_json_dumps_refuses():
    circular: list = []
    circular.append(circular)
    for value, error in ((object(), TypeError), ({"k": {1, 2}}, TypeError), (circular, ValueError)):
        with pytest.raises(error) as ours:
            jsontext.dumps(value)
        with pytest.raises(error) as theirs:
            json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        assert str(ours.value) == str(theirs.value)


def test_jsontext_after_a_refusal_encodes_the_same_containers_again():
    """The encoders are reused; one that raised inside a container is not, so that container is
    not taken for circular the next time it is encoded."""
    shared: dict = {"items": [1]}
    for _ in range(3):
        shared["items"] = [object()]
        with pytest.raises(TypeError):
            jsontext.dumps([shared])
        shared["items"] = [1]
        assert jsontext.dumps([shared, shared]) == '[{"items":[1]},{"items":[1]}]'


# -- the control socket without the socket modules: the native listen and its fallback agree -----


@pytest.mark.parametrize("built", [True, False], ids=["native", "fallback"])
def test_both_listen_paths_make_the_same_socket(tmp_path, monkeypatch, built):
    if built and native.module() is None:
        pytest.skip("the native module was not built")
    if not built:
        monkeypatch.setattr(native, "_module", None)
    path = str(tmp_path / "c.sock")
    fd = server.listen_unix(path)
    try:
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        assert not os.get_blocking(fd) and not os.get_inheritable(fd)
        with socket.socket(fileno=os.dup(fd)) as listening, socket.socket(socket.AF_UNIX) as client:
            assert listening.family == socket.AF_UNIX and listening.type == socket.SOCK_STREAM
            assert listening.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
            client.connect(path)
            listening.accept()[0].close()
    finally:
        os.close(fd)


def test_a_plain_run_starts_without_a_garbage_collection(tmp_path):
    """The CLI raises the collector's first threshold above what start-up allocates
    (``cli.main.COLLECT_AFTER_ALLOCATIONS``): a plain run loads, runs and ends without one cyclic
    collection once the CLI is entered, where Python's default threshold walks the start-up objects
    about a dozen times. From a byte-compiled copy of the package and without ``site``, as a regular install imports
    (compiling sources, or an editable install's finder, allocates on every import)."""
    import shutil

    import processkit

    package = tmp_path / "processkit"
    shutil.copytree(os.path.dirname(processkit.__file__), package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, timeout=120)
    log = tmp_path / "collections"
    script = (
        f"import gc, sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        f"log = open({str(log)!r}, 'a', buffering=1)\n"
        f"sys.argv[1:] = ['run', '--jsonl', {str(tmp_path / 'run.jsonl')!r}, '--', 'true']\n"
        "from processkit.cli.main import entry\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and log.write(f\"{info['generation']}\\n\"))\n"
        "entry()\n"
    )
    no_pump = ["env", "-u", "PROCESSKIT_PUMP"]  # as ``cli_without_native``: no C module under -S
    result = subprocess.run([*no_pump, sys.executable, "-S", "-c", script], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert log.read_text() == ""


def test_jsontext_falls_back_to_json_where_the_c_encoder_takes_other_arguments(monkeypatch):
    """An interpreter whose ``_json.make_encoder`` has another signature gets ``json.dumps``."""
    import _json

    def other_signature(*args):
        raise TypeError("make_encoder() takes other arguments")

    monkeypatch.setattr(_json, "make_encoder", other_signature)
    assert jsontext._c_dumps() is None
    monkeypatch.undo()
    assert jsontext._c_dumps() is not None


# -- the launcher's finder: processkit's byte code in two system calls a module -------------------


def _compiled_copy(tmp_path) -> str:
    """A byte-compiled copy of the package, as a regular install leaves it; its parent directory."""
    import shutil

    import processkit

    package = tmp_path / "processkit"
    shutil.copytree(os.path.dirname(processkit.__file__), package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, timeout=120)
    return str(tmp_path)


_LOADERS_AT_EXIT = (
    "import os, sys\n"
    "def report(code):\n"
    "    for name, module in sorted(sys.modules.items()):\n"
    "        if name.startswith('processkit.') and module is not None:\n"
    "            print(name, type(module.__spec__.loader).__name__)\n"
    "    sys.stdout.flush()\n"
    "    real(code)\n"
    "real, os._exit = os._exit, report\n"
)


def test_the_launcher_finds_every_module_of_a_plain_run_itself(tmp_path):
    """Every processkit module a plain run loads, but the C extension, comes through the
    launcher's finder (``cli/quickimport.py``), not the interpreter's slower general one: a
    module that falls back (a namespace package, a source without byte code, an extension of
    the same name) costs each run its ~0.3 M instructions again."""
    root = _compiled_copy(tmp_path)
    script = (
        f"import sys; sys.path.insert(0, {root!r})\n"
        + _LOADERS_AT_EXIT
        + f"sys.argv[1:] = ['run', '--jsonl', {str(tmp_path / 'run.jsonl')!r}, '--', 'true']\n"
        + "from processkit.cli.quickimport import install\ninstall()\n"
        + "from processkit.cli.main import entry\nentry()\n"
    )
    no_pump = ["env", "-u", "PROCESSKIT_PUMP"]  # as ``cli_without_native``: no C module under -S
    result = subprocess.run([*no_pump, sys.executable, "-S", "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaders = dict(line.split() for line in result.stdout.splitlines())
    assert "processkit.engine.runner" in loaders
    # Loaded before the finder was in place: the packages above it and the finder itself.
    before = {"processkit.cli", "processkit.cli.quickimport"}  # ``processkit.version`` is the bundle's
    slow = sorted(name for name, loader in loaders.items() if loader != "_Loader" and name not in before)
    assert slow == [name for name in ("processkit._native",) if name in loaders]


def test_the_finder_leaves_stale_or_missing_byte_code_to_the_interpreter(tmp_path):
    """A source changed since its pyc, and one with no pyc, are loaded from source by the
    interpreter's own finder, as without the launcher's: the finder never runs old code."""
    root = _compiled_copy(tmp_path)
    changed = tmp_path / "processkit" / "text.py"
    changed.write_text(changed.read_text() + "\nCHANGED = 1\n")
    os.utime(changed, (1, 1))  # an mtime no pyc of it can carry
    (tmp_path / "processkit" / "added.py").write_text("ADDED = 2\n")
    script = (
        f"import sys; sys.path.insert(0, {root!r})\n"
        "from processkit.cli.quickimport import install\ninstall()\n"
        "import processkit.text, processkit.added, processkit.plain\n"
        "for m in (processkit.text, processkit.added, processkit.plain):\n"
        "    print(m.__name__, type(m.__spec__.loader).__name__, m.__spec__.cached == m.__cached__)\n"
        "print(processkit.text.CHANGED + processkit.added.ADDED)\n"
    )
    result = subprocess.run([sys.executable, "-S", "-B", "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "processkit.text SourceFileLoader True",
        "processkit.added SourceFileLoader True",
        "processkit.plain _Loader True",
        "3",
    ]


def test_no_package_name_is_both_a_module_and_a_package_or_an_extension():
    """The finder looks for ``<name>.py`` before ``<name>/__init__.py`` and never for an
    extension, the reverse of the interpreter's order: the same answer only while no name in
    the package is more than one of these."""
    import processkit

    clashes = []
    for directory, dirs, files in os.walk(os.path.dirname(processkit.__file__)):
        sources = {name[:-3] for name in files if name.endswith(".py")}
        extensions = {name.split(".")[0] for name in files if name.endswith(".so")}
        packages = {name for name in dirs if os.path.exists(os.path.join(directory, name, "__init__.py"))}
        clashes += [os.path.join(directory, name) for name in sorted(sources & (packages | extensions))]
    assert clashes == []

"""A ``run``'s byte code kept in one file (``cli/quickimport.py``'s bundle): what goes in, what
is taken from it, and what never is.

Each test runs the CLI as the launcher does (the finder installed, then ``cli.main.entry``) in a
fresh interpreter without ``site``, over a byte-compiled copy of the package, so the bundle is
written where the copy's byte code is and nowhere else.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

import processkit
from processkit import native
from conftest import SAFETY_NET
from own_tmp import own_tmp  # noqa: F401

TAG = sys.implementation.cache_tag
# Where ``_cffi_backend`` is, for the copy's C module (``-S`` leaves site-packages off the path): the
# launcher maps the bundle and checks its sources through it, as in a regular install.
_CFFI = os.path.dirname(getattr(importlib.util.find_spec("_cffi_backend"), "origin", None) or ".")


def _copy(tmp_path) -> str:
    """A byte-compiled copy of the package, as a regular install leaves it; its parent directory."""
    package = tmp_path / "processkit"
    shutil.copytree(os.path.dirname(processkit.__file__), package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, timeout=120)
    return str(tmp_path)


def _bundle(root: str) -> str:
    return os.path.join(root, "processkit", "cli", "__pycache__", f"run.{TAG}.bundle")


def _run(
    root: str,
    tmp_path,
    *,
    write: bool,
    report: str = "",
    installed: str = "",
    env: dict | None = None,
    first: str = "",
    program: str = "true",
    code: int | None = None,
    prefix: tuple[str, ...] = (),
    options: tuple[str, ...] = (),
) -> subprocess.CompletedProcess:
    """A plain ``run`` of ``true`` through the launcher's finder; ``write``: byte code may be
    written (else ``-B``); ``report``: code run just before the process exits; ``installed``:
    code run once the finder is in place, before the CLI is imported; ``first``: code run before
    anything of the package is imported; ``program``: what the run runs (one that cannot start
    is the run's failure, code 101); ``code``: the exit code expected instead; ``prefix``: what the
    interpreter is started through (``own_tmp``'s); ``options``: run's flags beside ``--jsonl``."""
    script = (
        f"import os, sys; sys.path.insert(0, {root!r}); sys.path.append({_CFFI!r})\n"
        f"{first}\n"
        f"sys.argv[1:] = ['run', '--jsonl', {str(tmp_path / 'run.jsonl')!r}, *{list(options)!r}, '--', {program!r}]\n"
        "def report(code):\n"
        f"    {report or 'pass'}\n"
        "    sys.stdout.flush()\n"
        "    real(code)\n"
        "real, os._exit = os._exit, report\n"
        "from processkit.cli.quickimport import install\ninstall()\n"
        f"{installed}\n"
        "from processkit.cli.main import entry\nentry()\n"
    )
    env = {key: value for key, value in {**os.environ, **(env or {})}.items() if key != "PYTHONDONTWRITEBYTECODE"}
    flags = ["-S"] if write else ["-S", "-B"]
    result = subprocess.run(
        [*prefix, sys.executable, *flags, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == (code if code is not None else 0 if program == "true" else 101), result.stderr
    return result


# Each processkit module and who gave it: ``launcher`` (the bundle's preloading or the finder:
# quickimport's ``_served``), else its loader's class (the interpreter's own finder).
_LOADERS = (
    "served = sys.modules['processkit.cli.quickimport']._served\n"
    "    [print(name, 'launcher' if name in served else type(m.__spec__.loader).__name__)"
    " for name, m in sorted(sys.modules.items()) if name.startswith('processkit.') and getattr(m, '__spec__', None)]"
)


def _pycs(root: str) -> list[str]:
    return [
        os.path.join(directory, name)
        for directory, _, names in os.walk(os.path.join(root, "processkit"))
        for name in names
        if name.endswith(".pyc")
    ]


# What a dead run's sweep loads (another test's killed runner met on the way in, in either run of
# a test, or in one alone): the bundle keeps no row of it, by design.
DEAD_RUNS = ("processkit.containment.sweep_mark", "processkit.containment.sweep_dead", "processkit.rundir_records")


def test_a_run_takes_every_module_it_loads_from_the_bundle_the_last_run_wrote(tmp_path):
    """The first run reads its modules' pycs and writes the bundle as it exits; the next loads
    every module through the finder with no pyc left to read (only the bundle has the code).
    Only the modules both runs loaded are judged: a run's rare paths (a sweep finding what another
    test's killed runner left, on a busy machine) load modules no earlier run put in the bundle."""
    root = _copy(tmp_path)
    written = _run(root, tmp_path, write=True, report=_LOADERS).stdout.split()[::2]
    assert os.path.getsize(_bundle(root)) > 0
    for pyc in _pycs(root):
        os.unlink(pyc)
    loaders = dict(line.split() for line in _run(root, tmp_path, write=False, report=_LOADERS).stdout.splitlines())
    assert "processkit.engine.runner" in loaders and "processkit.engine.runner" in written
    before = {"processkit.cli", "processkit.cli.quickimport"}  # loaded before the finder
    slow = sorted(
        name
        for name, loader in loaders.items()
        if loader != "launcher" and name not in before and not name.startswith(DEAD_RUNS) and name in written
    )
    assert slow == [name for name in ("processkit._native",) if name in loaders]


# the bundle's rows served (a dead run's sweep, another test's killed runner met on the way in,
# loads work modules, which have no row)
_PRELOADED_AND_MMAP = (
    "quick = sys.modules['processkit.cli.quickimport']\n"
    "    served = [name for name in quick._served if name in quick._bundle]\n"
    "    print(len(served), 'mmap' in sys.modules, sys.modules.get('processkit._native') is not None)"
)


def test_a_run_maps_its_bundle_with_the_native_module_or_without_it_with_the_mmap_module(tmp_path):
    """The bundle is mapped through the C module's ``mmap`` (which a run loads to spawn anyway),
    so no run loads the ``mmap`` extension module; where the C module is missing, through the
    ``mmap`` module, and the same rows serve."""
    if native.module() is None:
        pytest.skip("the native module is not built here")
    root = _copy(tmp_path)
    _run(root, tmp_path, write=True)
    served, mmap_loaded, native_loaded = _run(root, tmp_path, write=False, report=_PRELOADED_AND_MMAP).stdout.split()
    assert int(served) > 40 and (mmap_loaded, native_loaded) == ("False", "True")
    no_native = "sys.modules['processkit._native'] = None"  # an install built without a C compiler
    served_without, mmap_loaded, native_loaded = _run(
        root, tmp_path, write=False, report=_PRELOADED_AND_MMAP, first=no_native, env={"PROCESSKIT_PUMP": "python"}
    ).stdout.split()
    assert (mmap_loaded, native_loaded) == ("True", "False") and int(served_without) == int(served)


def test_a_source_changed_since_the_bundle_is_loaded_from_the_source(tmp_path):
    """A row is used only while its source's mtime and size are as recorded: a changed module
    runs its new code, as it would with its pyc stale."""
    root = _copy(tmp_path)
    _run(root, tmp_path, write=True)
    changed = tmp_path / "processkit" / "engine" / "state.py"
    changed.write_text(changed.read_text() + "\nCHANGED = 7\n")
    os.utime(changed, (1, 1))  # an mtime no pyc or row of it can carry
    report = "print(sys.modules['processkit.engine.state'].CHANGED)"
    assert _run(root, tmp_path, write=False, report=report).stdout.split() == ["7"]


def test_a_source_replaced_with_its_size_and_mtime_kept_is_not_taken_from_the_bundle(tmp_path):
    """An upgrade can keep a same-sized source's mtime (an installer keeping a wheel's times,
    ``cp -a``); the installer writes the pyc again, never the bundle. A row is keyed on the
    source's status-change time too, which no installer sets back: the new code runs."""
    root = _copy(tmp_path)
    _run(root, tmp_path, write=True)
    changed = tmp_path / "processkit" / "engine" / "state.py"
    was = changed.stat()
    text = changed.read_text()
    added = "\nCHANGED = 7\n"
    first_line = text.index("\n")
    assert first_line > len(added) + 3, "the docstring's first line is long enough to give room"
    text = text[: first_line - len(added)] + text[first_line:] + added  # the same size
    changed.unlink()
    changed.write_text(text)
    os.utime(changed, ns=(was.st_atime_ns, was.st_mtime_ns))
    assert (changed.stat().st_size, changed.stat().st_mtime_ns) == (was.st_size, was.st_mtime_ns)
    for pyc in (changed.parent / "__pycache__").glob("state.*.pyc"):
        pyc.unlink()  # the installer's pyc would hold the new code; none makes the source's
    report = "print(sys.modules['processkit.engine.state'].CHANGED)"
    assert _run(root, tmp_path, write=False, report=report).stdout.split() == ["7"]


def test_a_bundle_that_is_not_one_is_ignored_and_written_again(tmp_path):
    """Garbage, another interpreter's magic number or a truncated marshal in the bundle's place:
    the run loads its modules from their pycs as before, and leaves a good bundle."""
    root = _copy(tmp_path)
    os.makedirs(os.path.dirname(_bundle(root)), exist_ok=True)
    for content in (b"not a bundle", b"\0\0\0\0" + b"x" * 100, None):
        if content is None:  # a good one cut short
            with open(_bundle(root), "rb") as handle:
                content = handle.read()[:5000]
        with open(_bundle(root), "wb") as handle:
            handle.write(content)
        _run(root, tmp_path, write=True)
        with open(_bundle(root), "rb") as handle:
            assert len(handle.read()) > 100_000


def test_no_bundle_is_written_when_byte_code_is_not(tmp_path):
    """``-B`` (and ``PYTHONDONTWRITEBYTECODE``): nothing is written beside the sources."""
    root = _copy(tmp_path)
    _run(root, tmp_path, write=False)
    assert not os.path.exists(_bundle(root))
    assert [name for name in os.listdir(os.path.dirname(_bundle(root))) if not name.endswith(".pyc")] == []


def test_only_a_run_uses_a_bundle(tmp_path):
    """Another command reads and writes none: the bundle holds what ``run`` loads."""
    root = _copy(tmp_path)
    script = (
        f"import sys; sys.path.insert(0, {root!r}); sys.argv[1:] = ['list']\n"
        "from processkit.cli.quickimport import install\ninstall()\n"
        "from processkit.cli.main import entry\nentry()\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PROCESSKIT_CLI_REGISTRY_DIR"] = str(tmp_path / "registry")
    result = subprocess.run([sys.executable, "-S", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert not os.path.exists(_bundle(root))


_MADE = (
    "[print(name, isinstance(m.__loader__, __import__('_frozen_importlib_external').SourceFileLoader), m.__spec__.name == name, m.__spec__.origin == m.__file__,"
    " m.__spec__.cached == m.__cached__, m.__spec__.loader is m.__loader__, m.__spec__.has_location,"
    " getattr(m.__spec__, '_initializing', None),"
    " m.__package__, getattr(m, '__path__', None) == m.__spec__.submodule_search_locations,"
    " getattr(sys.modules[name.rpartition('.')[0]], name.rpartition('.')[2], None) is m)"
    " for name, m in sorted(sys.modules.items()) if name.startswith('processkit.') and hasattr(m, '__cached__')]"
)


def test_a_run_with_a_bundle_has_its_modules_before_it_asks_for_them_made_as_imports_make_them(tmp_path):
    """With a bundle, the launcher runs its modules before the CLI is imported (``_preload``),
    past the import system; each is made as an import makes it: spec, loader, file, cached byte
    code's path, package, path, its parent's attribute, and the spec's ``_initializing`` (False
    once loaded: an import of a loaded module asks, and a spec without it costs each such import
    an AttributeError made and dropped) (compared with the run that wrote the bundle, whose
    modules were imported; the module that writes the bundle, and the sweep it imports once the
    bundle is written, are loaded by that run alone)."""
    root = _copy(tmp_path)
    early = "print('early', 'processkit.engine.runner' in sys.modules)"
    imported = _run(root, tmp_path, write=True, report=_MADE, installed=early).stdout.splitlines()
    writer = ("processkit.cli.bundlewrite ", "processkit.freshnames ")  # the writer and the sweep it runs after
    imported = [line for line in imported if not line.startswith(writer + DEAD_RUNS)]
    preloaded = _run(root, tmp_path, write=False, report=_MADE, installed=early).stdout.splitlines()
    preloaded = [line for line in preloaded if not line.startswith(DEAD_RUNS)]
    assert imported[0] == "early False" and preloaded[0] == "early True"
    assert any(line.startswith("processkit.engine.runner True True") for line in preloaded)
    assert preloaded[1:] == imported[1:]


def test_an_import_trace_still_shows_a_runs_modules_when_a_bundle_is_there(tmp_path):
    """``-X importtime`` (``PYTHONPROFILEIMPORTTIME``) and ``-v`` see every import: no module is
    run past the import system then (tests/test_startup_imports.py reads that trace)."""
    root = _copy(tmp_path)
    _run(root, tmp_path, write=True)
    traced = _run(root, tmp_path, write=False, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert "processkit.engine.runner" in traced.stderr


def _rows(root: str) -> list[tuple]:
    import marshal

    with open(_bundle(root), "rb") as handle:
        return list(marshal.loads(handle.read()[4:]))


def _write_rows(root: str, rows: list[tuple]) -> None:
    import importlib.util
    import marshal

    with open(_bundle(root), "wb") as handle:
        handle.write(importlib.util.MAGIC_NUMBER + marshal.dumps(tuple(rows)))


def test_a_row_that_no_longer_serves_is_dropped_and_the_preloading_runs_again(tmp_path):
    """A row of a module that is gone (an upgrade removed it; here first in the file, where it
    stops the preloading) is not kept by the next run that writes the bundle: that run writes it
    again with its own modules only, and the run after it preloads every module again."""
    root = _copy(tmp_path)
    _run(root, tmp_path, write=True)
    rows = _rows(root)
    gone = os.path.join(root, "processkit", "gone.py")  # no such source
    _write_rows(
        root, [("processkit.gone", gone, False, rows[0][3], rows[0][4], compile("", gone, "exec"), False), *rows]
    )
    early = "print('early', 'processkit.engine.runner' in sys.modules)"
    assert _run(root, tmp_path, write=True, installed=early).stdout.split() == ["early", "False"]
    assert [row[0] for row in _rows(root)] == [row[0] for row in rows]
    assert _run(root, tmp_path, write=False, installed=early).stdout.split() == ["early", "True"]


def test_a_run_writes_only_the_rows_of_the_modules_it_loaded(tmp_path):
    """The bundle is the writing run's modules: a row that run never loaded (here another
    command's, after a stale row that stops the preloading and so has the run write the file
    again) is not carried over, where every later run would preload it for nothing."""
    root = _copy(tmp_path)
    _run(root, tmp_path, write=True)
    rows = _rows(root)
    extra = os.path.join(root, "processkit", "cli", "probe.py")  # a module no run loads
    held = os.stat(extra)
    state = ((int(held.st_mtime) & 0xFFFFFFFF, held.st_ctime_ns), held.st_size & 0xFFFFFFFF)
    with open(extra) as handle:
        code = compile(handle.read(), extra, "exec")
    stale = [(*row[:3], (0, 0), *row[4:]) if row[0] == "processkit.engine.state" else row for row in rows]
    _write_rows(root, [*stale, ("processkit.cli.probe", extra, False, *state, code, False)])  # one stale row: a rewrite
    report = "print('probe', 'processkit.cli.probe' in sys.modules)"
    assert _run(root, tmp_path, write=True, report=report).stdout.split() == ["probe", "False"]
    names = [row[0] for row in _rows(root)]
    assert "processkit.engine.state" in names
    assert "processkit.cli.probe" not in names


def test_a_run_keeps_no_row_of_a_module_its_work_asked_for_and_drops_an_older_writers(tmp_path):
    """A run whose work imported more than a plain run does (here a program that cannot start: the failure's event
    types and text checks, imported by the engine's functions) writes no row of those modules: every later plain run
    would unmarshal them for nothing, and no plain run writes the file again for an unused one. Such a run meeting the
    bundle again reads them from their pycs, no reason to write; a work row an older writer left has the next run
    write the file again without it."""
    root = _copy(tmp_path)
    missing = str(tmp_path / "no-such-program")
    # No cgroup sweep: another test's dead runner met on the way in would be work of its own.
    apart = {"PROCESSKIT_CONTAINMENT": "process_group"}
    _run(root, tmp_path, write=True, program=missing, env=apart)
    rows = {row[0]: row for row in _rows(root)}
    assert "processkit.events.types" not in rows and rows["processkit.engine.runner"][6] is False
    assert not [name for name, row in rows.items() if row[6]]
    assert "processkit.text" not in rows, "the failure's line made visible: work too, not a plain run's row"
    written = os.stat(_bundle(root)).st_mtime_ns
    loaded = "print('types', 'processkit.events.types' in sys.modules)"
    assert _run(root, tmp_path, write=True, report=loaded, env=apart).stdout.split() == ["types", "False"]
    assert _run(root, tmp_path, write=True, report=loaded, program=missing, env=apart).stdout.split() == [
        "types",
        "True",
    ]
    assert os.stat(_bundle(root)).st_mtime_ns == written
    types = os.path.join(root, "processkit", "events", "types.py")
    held = os.stat(types)
    state = ((int(held.st_mtime) & 0xFFFFFFFF, held.st_ctime_ns), held.st_size & 0xFFFFFFFF)
    with open(types) as handle:
        code = compile(handle.read(), types, "exec")
    _write_rows(root, [*rows.values(), ("processkit.events.types", types, False, *state, code, True)])
    _run(root, tmp_path, write=True, env=apart)
    assert [row[0] for row in _rows(root)] == list(rows)


def test_a_usage_error_leaves_the_bundle_as_it_was(tmp_path):
    """A usage error runs no command's work, yet reads ``argparse`` and the text checks from
    their pycs: written into the bundle, every plain run after it preloaded them (+50 % of a
    run's start-up instructions), for good."""
    root = _copy(tmp_path)
    apart = {"PROCESSKIT_CONTAINMENT": "process_group"}
    _run(root, tmp_path, write=True, env=apart)
    written = os.stat(_bundle(root)).st_mtime_ns
    bogus = "sys.argv[1:] = ['run', '--no-such-flag', '--', 'true']"
    _run(root, tmp_path, write=True, installed=bogus, env=apart, code=100)
    assert os.stat(_bundle(root)).st_mtime_ns == written
    assert "processkit.cli.parsing" not in [row[0] for row in _rows(root)]


def test_an_import_from_code_with_odd_globals_is_still_an_import(tmp_path):
    """The finder looks at the importing frame's ``__name__``: one that is no string (code run
    by ``exec`` with globals of its own) must not turn the import into a TypeError."""
    root = _copy(tmp_path)
    odd = 'exec("def f():\\n    import processkit.text\\nf()", {"__name__": 5}); exec("import processkit.bounded", {"__name__": []})'
    done = _run(root, tmp_path, write=False, installed=odd, env={"PROCESSKIT_CONTAINMENT": "process_group"})
    assert done.returncode == 0, done.stderr


_COUNT_CLASSES = (
    "import builtins\n"
    "made = []\n"
    "build = builtins.__build_class__\n"
    "def counted(body, name, *args, **kwargs):\n"
    "    made.append(body.__module__ + '.' + name)\n"
    "    return build(body, name, *args, **kwargs)\n"
    "builtins.__build_class__ = counted\n"
)


def test_a_preloaded_run_makes_each_class_once_and_none_of_the_launchers_own(tmp_path):
    """With a bundle, every module is run once (a package's ``__init__`` importing its modules
    while it is preloaded takes them from their rows, not run again by the import system: two
    copies of a class would be two types), and the launcher makes no class of its own for it
    (a finder class and a loader class: ~0.3 M instructions a run)."""
    root = _copy(tmp_path)
    # No cgroup sweep: another test's dead runner met on the way in is work the bundle keeps no
    # row of, so its modules would come through the launcher's finder (its loader class made).
    apart = {"PROCESSKIT_CONTAINMENT": "process_group"}
    _run(root, tmp_path, write=True, env=apart)
    # A run's sweep of the host's run directories still meets a dead run (another test's killed
    # runner) under process_group: its modules, which have no row, come through the launcher's
    # finder, whose loader class is then made. Said by the report, and only then allowed.
    report = f"print(*made, *(name for name in {DEAD_RUNS!r} if name in sys.modules))"
    made = _run(root, tmp_path, write=False, first=_COUNT_CLASSES, report=report, env=apart).stdout.split()
    swept = any(name in made for name in DEAD_RUNS)
    assert "processkit.containment.accounting.Usage" in made
    ours = [name for name in made if name.startswith("processkit.") and name not in DEAD_RUNS]
    assert sorted(name for name in set(ours) if ours.count(name) > 1) == []
    launchers = [name for name in made if name.startswith("processkit.cli.")]
    if swept:
        launchers = [name for name in launchers if not name.startswith("processkit.cli.quickimport.")]
    assert launchers == ["processkit.cli.main.Invocation"]


_LEAN = (
    "runner, events = sys.modules['processkit.engine.runner'], sys.modules['processkit.events.base']\n"
    "    swept = 'processkit.containment.sweep_mark' in sys.modules or 'processkit.containment.sweep_dead' in sys.modules\n"
    "    print('swept' if swept else '__future__' in sys.modules, 'annotations' in vars(runner), runner.__doc__ is None)\n"
    "    print(runner.execute.__doc__ is None, runner.execute.__annotations__ == {}, sys.modules['processkit.plain'].Plain.__doc__ is None)\n"
    "    print(repr(sorted(events.RunStarted.__annotations__.items())), events.RunStarted._fields)"
)


def test_a_run_from_its_bundle_runs_lean_code_and_never_imports_the_future_module(tmp_path):
    """The bundle's rows are compiled without docstrings, functions' annotations and the
    ``from __future__ import annotations`` statement (``cli/bundlewrite.py``): a run from it
    imports no ``__future__`` (nor does the launcher's finder), its modules have no docstrings and
    their functions no annotations, a class's annotations are as the source's (records read
    them), and the run is the same run."""
    root = _copy(tmp_path)
    apart = {"PROCESSKIT_CONTAINMENT": "process_group"}  # no cgroup sweep: another test's dead runner is work
    written = _run(root, tmp_path, write=True, report=_LEAN, env=apart).stdout.splitlines()
    # a dead run's sweep (another test's killed runner: marked, then ended) loads its code from its
    # pycs, which import ``__future__``
    written[0] = written[0].replace("swept", "True")
    assert written[:2] == ["True True False", "False False False"]  # the run that wrote it: its pycs
    lean = _run(root, tmp_path, write=False, report=_LEAN, env=apart).stdout.splitlines()
    assert lean[:2] in (["False False True", "True True True"], ["swept False True", "True True True"])
    assert lean[2] == written[2] and "('root_pid', 'int | None')" in lean[2]
    assert b'"event":"runner_exit"' in (tmp_path / "run.jsonl").read_bytes()


_CRAFTED = '''"""The module's docstring."""

from __future__ import annotations

import sys


def documented(value: int, *rest: str, flag: bool = False, **more: object) -> str | None:
    """A function's docstring."""
    return "a string that is not a docstring"


def only_a_docstring(value: int) -> None:
    """Nothing else."""


class Record:
    """A class's docstring."""

    field: NotDefinedAnywhere = 1  # a class's annotation: kept, and not evaluated (the future's flag)

    def method(self) -> Record:
        """A method's docstring."""
        assert self.field == 2, "asserts are kept"


if sys.platform:

    def in_an_if(x: int) -> int:
        """In an if."""
        return x


try:
    raise ImportError
except ImportError:

    async def in_a_handler(y: str) -> str:
        """In a handler."""
        return y


match sys.platform:
    case _:

        class InACase:
            """In a case."""
'''


def test_lean_code_is_the_sources_without_docstrings_signature_annotations_or_the_future_import(tmp_path):
    """``bundlewrite.lean``: what it leaves out, and what it keeps (a class's annotations,
    unevaluated; asserts; every other string; line numbers)."""
    from processkit.cli import bundlewrite

    source = str(tmp_path / "crafted.py")
    code = compile(_CRAFTED, source, "exec")
    lean = bundlewrite.lean(_CRAFTED.encode(), source, code)
    assert lean is not code
    module = type(sys)("crafted")
    exec(lean, vars(module))
    space = vars(module)
    assert "annotations" not in space and module.__doc__ is None
    functions = [space["documented"], space["only_a_docstring"], space["Record"].method, space["in_an_if"]]
    functions.append(space["in_a_handler"])
    assert [(f.__doc__, f.__annotations__) for f in functions] == [(None, {})] * 5
    assert space["Record"].__doc__ is None and space["InACase"].__doc__ is None
    assert space["Record"].__annotations__ == {"field": "NotDefinedAnywhere"}
    assert space["documented"](1) == "a string that is not a docstring" and space["only_a_docstring"](1) is None
    try:
        space["Record"]().method()
    except AssertionError as failure:
        assert str(failure) == "asserts are kept"
        assert (
            failure.__traceback__.tb_next.tb_lineno
            == _CRAFTED.splitlines().index('        assert self.field == 2, "asserts are kept"') + 1
        )
    else:
        raise AssertionError("the assert was compiled out")
    assert bundlewrite.lean(b"def broken(:\n", source, code) is code


def test_a_source_changed_before_the_bundle_is_written_keeps_its_pycs_code_in_its_row(tmp_path):
    """The writing run compiles a lean row from its module's source only while that source is
    the one its pyc was read for: a source changed since keeps the pyc's code (its row is stale
    for the next run anyway); the others are lean."""
    root = _copy(tmp_path)
    changed = tmp_path / "processkit" / "engine" / "state.py"
    runner = tmp_path / "processkit" / "engine" / "runner.py"
    original = changed.read_text()
    change_before_saving = (
        "quick = sys.modules['processkit.cli.quickimport']\n"
        "save = quick.save\n"
        "def changed_then_saved():\n"
        f"    open({str(changed)!r}, 'a').write('CHANGED = 7\\n')\n"
        "    save()\n"
        "quick.save = changed_then_saved\n"
    )
    _run(root, tmp_path, write=True, installed=change_before_saving)
    codes = {row[0]: row[5] for row in _rows(root)}
    assert codes["processkit.engine.state"] == compile(original, str(changed), "exec", dont_inherit=True)
    assert codes["processkit.engine.runner"] != compile(runner.read_text(), str(runner), "exec", dont_inherit=True)


def test_a_bench_keeps_its_own_bundle_and_takes_its_modules_from_it(tmp_path):
    """``bench`` imports some 110 modules of the package: its own bundle, beside the run's, is
    written by a first benchmark and serves every processkit module of the next."""
    root = _copy(tmp_path)
    script = (
        f"import os, sys; sys.path.insert(0, {root!r}); sys.path.append({_CFFI!r})\n"
        "sys.argv[1:] = ['bench', '-N', '--runs', '1', '--style', 'none', 'true']\n"
        "def report(code):\n"
        f"    {_LOADERS}\n"
        "    sys.stdout.flush()\n"
        "    real(code)\n"
        "real, os._exit = os._exit, report\n"
        "from processkit.cli.quickimport import install\ninstall()\n"
        "from processkit.cli.main import entry\nentry()\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    runs = [subprocess.run([sys.executable, "-S", "-c", script], env=env, capture_output=True, text=True, timeout=60)]
    bundle = os.path.join(root, "processkit", "cli", "__pycache__", f"bench.{TAG}.bundle")
    assert runs[0].returncode == 0, runs[0].stderr
    assert os.path.exists(bundle) and not os.path.exists(_bundle(root))
    runs.append(
        subprocess.run([sys.executable, "-S", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    )
    assert runs[1].returncode == 0, runs[1].stderr
    loaders = dict(line.split() for line in runs[1].stdout.splitlines())
    assert len(loaders) > 60 and "processkit.benchmark.session" in loaders
    before = {"processkit.cli", "processkit.cli.quickimport", "processkit._native"}  # before the finder; C
    assert {name for name, loader in loaders.items() if loader != "launcher"} == before


def test_an_install_that_cannot_take_the_bundle_compiles_nothing_at_exit(tmp_path):
    """A read-only install (a read-only root, a package another user owns) can never keep a
    bundle, so every run would miss every row: its exit must not read and compile the sources
    for a file it cannot write (``quickimport.save`` asks first; ``bundlewrite.write`` compiles
    only once its file is open)."""
    root = _copy(tmp_path)
    cache = os.path.join(root, "processkit", "cli", "__pycache__")
    # compile's audit event names each source compiled; the package's own sources are the bundle's
    counted = (
        "seen = []\n"
        f"sys.addaudithook(lambda event, args: event == 'compile' and str(args[1]).startswith({root!r}) and seen.append(1))"
    )
    if os.geteuid() == 0:  # root writes whatever a mode says: the directory a read-only mount
        if shutil.which("mount") is None:
            pytest.skip("needs mount to make a read-only directory as root")
        counted = (  # in a mount namespace of the child's own, private from the host's
            "import ctypes, subprocess\n"
            "assert ctypes.CDLL(None, use_errno=True).unshare(0x00020000) == 0\n"
            "subprocess.run(['mount', '--make-rprivate', '/'], check=True)\n"
            f"subprocess.run(['mount', '--bind', {cache!r}, {cache!r}], check=True)\n"
            f"subprocess.run(['mount', '-o', 'remount,bind,ro', {cache!r}], check=True)\n"
        ) + counted
    else:
        os.chmod(cache, 0o555)
    result = _run(root, tmp_path, write=True, first=counted, report="print(len(seen))")
    assert result.stdout.split() == ["0"]
    assert not os.path.exists(_bundle(root))


def test_a_writer_removes_the_stale_temporary_files_killed_writers_left_and_nothing_else(tmp_path):
    """A run SIGKILLed while writing its bundle leaves its temporary file (a bundle's size) for
    good: the next writer removes such leftovers, only its own name pattern, only this user's,
    only stale ones (a writer at work beside it keeps its file)."""
    root = _copy(tmp_path)
    _run(root, tmp_path, write=True)
    bundle = _bundle(root)
    directory = os.path.dirname(bundle)
    old = os.stat(bundle).st_mtime - 3600

    def plant(name: str, *, stale: bool = True, owner: int | None = None) -> str:
        path = os.path.join(directory, name)
        with open(path, "wb") as handle:
            handle.write(b"x" * 1000)
        if owner is not None:
            os.chown(path, owner, owner)
        if stale:
            os.utime(path, (old, old))
        return path

    base = os.path.basename(bundle)
    left = plant(f"{base}-4242-0123abcd.tmp")
    bench_left = plant(f"bench.{TAG}.bundle-4243-89abcdef.tmp")  # bench's writer sweeps its own
    kept = [
        plant(f"{base}-4244-fedcba98.tmp", stale=False),  # a writer at work
        plant(f"{base}-x-0123abcd.tmp"),  # not a name the writer makes
        plant(f"{base}.tmp"),
        plant("other-4245-0123abcd.tmp"),
    ]
    if os.geteuid() == 0:  # another user's, under the writer's name: never touched
        kept.append(plant(f"{base}-4246-00112233.tmp", owner=65534))
    os.unlink(bundle)  # the next run writes it again
    _run(root, tmp_path, write=True)
    assert os.path.getsize(bundle) > 100_000
    assert not os.path.exists(left)
    assert os.path.exists(bench_left)
    assert [path for path in kept if not os.path.exists(path)] == []


def test_the_sources_checked_at_once_read_as_each_stat_reads_them(tmp_path):
    """The launcher reads its preloaded rows' source states in one call of the C module
    (``_check_sources``): the same states ``_source_state`` reads one ``stat`` at a time, an
    mtime's whole seconds as ``stat``'s float gives them (a time a nanosecond short of a second
    included), and none for a source that is gone; the rows of another copy are not read."""
    if native.module() is None:
        pytest.skip("the native module is not built here")
    from processkit.cli import quickimport

    root = tmp_path / "processkit"
    (root / "engine").mkdir(parents=True)
    times = [(1_700_000_000, 999_999_999), (1_700_000_001, 0), (1_600_000_000, 500_000_000), (-2, 500_000_000)]
    names, rows = [], {}
    for index, (seconds, nanoseconds) in enumerate(times):
        source = root / "engine" / f"m{index}.py"
        source.write_text("x = 1\n" * index)
        os.utime(source, ns=(0, seconds * 1_000_000_000 + nanoseconds))
        names.append(f"processkit.engine.m{index}")
        rows[names[-1]] = (str(source), False, 0, 0, None, False)
    rows["processkit.engine.gone"] = (str(root / "engine" / "gone.py"), False, 0, 0, None, False)
    rows["processkit.engine.other"] = ("/elsewhere/processkit/engine/other.py", False, 0, 0, None, False)
    saved = dict(quickimport._bundle)
    try:
        quickimport._bundle.clear()
        quickimport._bundle.update(rows)
        quickimport._checked.clear()
        quickimport._check_sources(str(root))
        checked = dict(quickimport._checked)
    finally:
        quickimport._bundle.clear()
        quickimport._bundle.update(saved)
        quickimport._checked.clear()
    assert checked == {name: quickimport._row_state(quickimport._source_state(rows[name][0])) for name in names}


# The directories of the package copies the run's modules came from.
_COPIES = (
    "print(*sorted({m.__file__.rpartition('/processkit/')[0] for n, m in sys.modules.items()"
    " if n.startswith('processkit.') and getattr(m, '__file__', None)}))"
)


@pytest.mark.parametrize("with_native", [True, False], ids=["native", "no-native"])
def test_a_copied_installs_bundle_does_not_serve_the_first_copys_code(tmp_path, with_native):
    """A copy of an install takes along the first copy's bundle, whose rows name the first copy's
    sources, unchanged and still there: the copy runs its own code, never the first's. With the C
    module the rows' sources are checked at once (``_check_sources``), without it one by one
    (``_made``); both leave another copy's rows alone."""
    if with_native and native.module() is None:
        pytest.skip("the native module is not built here")
    first = _copy(tmp_path / "a")
    _run(first, tmp_path, write=True)
    second = str(tmp_path / "b")
    shutil.copytree(first, second)  # the bundle and the sources' times and sizes with them
    no_native = "" if with_native else "sys.modules['processkit._native'] = None"
    env = {} if with_native else {"PROCESSKIT_PUMP": "python"}
    copies = _run(second, tmp_path, write=False, report=_COPIES, first=no_native, env=env).stdout.split()
    assert copies == [second]


def _bench(root: str, tmp_path) -> subprocess.CompletedProcess:
    """A ``bench`` of one run through the launcher's finder over the copy, byte code written, each fork of the
    launcher's process logged to ``forks.jsonl`` with the package's modules loaded then."""
    log = tmp_path / "forks.jsonl"
    log.write_text("")
    script = (
        f"import json, os, sys; sys.path.insert(0, {root!r}); sys.path.append({_CFFI!r})\n"
        "real, main_pid = os.fork, os.getpid()\n"
        "def fork():\n"
        "    loaded = sorted(name for name in sys.modules if name.startswith('processkit.'))\n"
        "    pid = real()\n"
        "    if pid > 0 and os.getpid() == main_pid:\n"
        f"        with open({str(log)!r}, 'a') as handle: handle.write(json.dumps(loaded) + '\\n')\n"
        "    return pid\n"
        "os.fork = fork\n"
        "sys.argv[1:] = ['bench', '-N', '--runs', '1', '--style', 'none', 'true']\n"
        "from processkit.cli.quickimport import install\ninstall()\n"
        "from processkit.cli.main import entry\nentry()\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-S", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done


def _bench_rows(root: str) -> list[tuple]:
    import marshal

    with open(os.path.join(root, "processkit", "cli", "__pycache__", f"bench.{TAG}.bundle"), "rb") as handle:
        return list(marshal.loads(handle.read()[4:]))


def _forked_early(tmp_path) -> bool:
    """Whether the perf helper was forked before ``bench``'s modules ran (the launcher's ``bench_start`` step)."""
    import json

    forks = [json.loads(line) for line in (tmp_path / "forks.jsonl").read_text().splitlines()]
    assert len(forks) == 1, forks
    return "processkit.benchmark.perf_switch" in forks[0] and "processkit.benchmark.session" not in forks[0]


def test_a_bench_bundle_without_the_start_steps_row_still_forks_the_helper_early(tmp_path):
    """A ``bench`` bundle an older install wrote has no row of ``cli/bench_start.py`` (an upgrade leaves the file in
    place): the launcher runs the step all the same, as the source is there, and the bundle is written with it."""
    root = _copy(tmp_path)
    _bench(root, tmp_path)
    rows = _bench_rows(root)
    assert "processkit.cli.bench_start" in [row[0] for row in rows]
    _write_bench_rows(root, [row for row in rows if row[0] != "processkit.cli.bench_start"])
    for _ in range(2):
        _bench(root, tmp_path)
        assert _forked_early(tmp_path)
    assert "processkit.cli.bench_start" in [row[0] for row in _bench_rows(root)]


def _write_bench_rows(root: str, rows: list[tuple]) -> None:
    import importlib.util
    import marshal

    with open(os.path.join(root, "processkit", "cli", "__pycache__", f"bench.{TAG}.bundle"), "wb") as handle:
        handle.write(importlib.util.MAGIC_NUMBER + marshal.dumps(tuple(rows)))


def test_a_bench_bundle_row_of_a_start_step_since_gone_is_no_step_and_is_dropped(tmp_path):
    """A bundle row of a ``cli/<command>_start.py`` a later version dropped (here: its source and pyc removed) is no
    error: ``bench`` runs (its helper forked by ``cli/bench.py``), and the bundle is written again without it."""
    root = _copy(tmp_path)
    _bench(root, tmp_path)
    assert "processkit.cli.bench_start" in [row[0] for row in _bench_rows(root)]
    cli = os.path.join(root, "processkit", "cli")
    os.unlink(os.path.join(cli, "bench_start.py"))
    os.unlink(os.path.join(cli, "__pycache__", f"bench_start.{TAG}.pyc"))
    for _ in range(2):
        _bench(root, tmp_path)
        _forked_early(tmp_path)  # the helper, once
    assert "processkit.cli.bench_start" not in [row[0] for row in _bench_rows(root)]


def test_a_run_meeting_a_dead_runs_leftovers_works_and_keeps_no_row_of_what_it_took_to_end_them(tmp_path, own_tmp):
    """A runner killed mid-run (SIGKILL: no clean-up) leaves its group and run directory; the next run ends them
    (``containment/sweep_dead.py`` and what it imports, loaded only then) and runs as usual, and its bundle keeps no
    row of those modules, which every plain run after it would unmarshal for nothing. The run's ``dead`` mark says
    it was first seen dead a grace ago (a run ends it only then). The killed runner and the next run have a /tmp of
    their own (``own_tmp``), so no other run's sweep meets the aged run directory first; where they cannot (not
    root), any run on the machine may end the leftovers first: the test is skipped when this one did not meet them."""
    import glob
    import json
    import signal
    import time

    from processkit.containment.sweep import DEAD_GRACE_SECONDS
    from processkit.rundir import DEAD_NAME

    root = _copy(tmp_path)
    _run(root, tmp_path, write=True)
    events = tmp_path / "killed.jsonl"
    script = (
        f"import sys; sys.path.insert(0, {root!r}); sys.path.append({_CFFI!r})\n"
        f"sys.argv[1:] = ['run', '--jsonl', {str(events)!r}, '--', 'sleep', '60']\n"
        "from processkit.cli.quickimport import install\ninstall()\n"
        "from processkit.cli.main import entry\nentry()\n"
    )
    runner = subprocess.Popen([*own_tmp.prefix, sys.executable, "-S", "-B", "-c", script], stdin=subprocess.DEVNULL)
    child = None
    try:
        deadline = time.monotonic() + SAFETY_NET
        while child is None and time.monotonic() < deadline and runner.poll() is None:
            lines = events.read_text().splitlines() if events.exists() else []
            members = [m for line in lines for m in json.loads(line).get("members") or () if line.endswith("}")]
            child = members[0] if members else None
            time.sleep(0.02)
        assert child is not None, "the run never reported its child"
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=SAFETY_NET)
    seen = time.time() - DEAD_GRACE_SECONDS
    for found in glob.glob(str(own_tmp.real / f"pkc-{runner.pid}-*")):
        # Only in a real directory of ours no one else may enter, a new file (never a link followed);
        # nothing when another run ended it meanwhile, or the name is not what this runner made.
        with contextlib.suppress(OSError):
            home = os.open(found, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                facts = os.fstat(home)
                if facts.st_uid == os.getuid() and not facts.st_mode & 0o077:
                    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                    made = os.open(DEAD_NAME, flags, 0o600, dir_fd=home)
                    try:
                        os.utime(made, (seen, seen))
                    finally:
                        os.close(made)
            finally:
                os.close(home)
    try:
        met = "print('met', 'processkit.containment.sweep_dead' in sys.modules)"
        result = _run(root, tmp_path, write=True, report=met, prefix=tuple(own_tmp.prefix))
        if result.stdout.split()[-2:] != ["met", "True"]:
            pytest.skip("another run on this machine ended the dead run's leftovers first")
        assert "Traceback" not in result.stderr, result.stderr
        assert not [row[0] for row in _rows(root) if row[6] or row[0].endswith("sweep_dead")]
    finally:  # the killed run's child, when no sweep ended it (only while it is still that process)
        try:
            with open(f"/proc/{child['pid']}/stat") as handle:
                if handle.read().rpartition(")")[2].split()[19] == child["start_time"]:
                    os.kill(child["pid"], signal.SIGKILL)
        except (OSError, IndexError):
            pass


def test_a_run_that_cut_its_capture_leaves_the_next_plain_runs_no_heavier(tmp_path):
    """A run whose capture its cap cut says so from the CLI (``events.cuts``), so the bundle it
    writes keeps that module, which every later plain run then loads before its work: it imported
    ``typing`` (and ``re``, ``enum``, ...), 1.4x a plain run's start-up CPU, for good."""
    root = _copy(tmp_path)
    _run(root, tmp_path, write=True)
    cap = str(tmp_path / "cap")
    cut = _run(
        root,
        tmp_path,
        write=True,
        program="printenv",
        code=0,
        options=("--capture-dir", cap, "--capture-max-bytes", "1"),
    )
    assert "capture was cut" in cut.stderr, cut.stderr
    heavy = "print(sorted(name for name in ('typing', 're', 'enum') if name in sys.modules))"
    assert _run(root, tmp_path, write=False, report=heavy).stdout.strip() == "[]"

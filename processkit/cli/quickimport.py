"""The launcher's finder for processkit's own modules: their byte code read directly.

The interpreter's path finder spends ~0.3 M instructions on each of a run's ~75 modules (bench/README.md,
"Start-up: the launcher's finder"); here a module of this package is its source's ``stat`` and its pyc's
``open``/``read``, checked as the interpreter checks it; anything else (no, stale or hash-based byte code, an
extension, a namespace package, ``-O``) is None.

A ``run`` (and a ``bench``, a file of its own) goes further: one file, ``cli/__pycache__/run.<cache tag>.bundle`` (the
magic number, then one marshal of ``(name, source, is package, source mtime, source size, code, asked at work)`` rows
in the order the modules finished, compiled lean by ``cli/bundlewrite.py``), mapped and unmarshalled at once, a row
used only for this copy's sources while its source's ``stat`` shows what it recorded. The rows' modules run before the
CLI asks (``_preload``), but those a command's work imported (``_asked_at_work``; a ``run`` keeps none). A module
served from its pyc, or a preloaded row left unused, has the run write the file again at exit (``save``).

The launcher (``cli/processkit-cli``, hand-written: a console_scripts one imports ``re``; its reasons are here, as
comments would be tokenized on every start) raises the collector's threshold before the first import (``cli/main.py``)
and takes its own directory off ``sys.path``. Only it installs the finder (a library must not change its host's import
system). It tries ``<name>.py`` before ``<name>/__init__.py``, the interpreter's reverse: the same while no name is
both, nor an extension beside a source of its name (``tests/test_startup_imports.py``). A command's
``cli/<command>_start.py`` (``STARTED_COMMANDS``) runs before its modules.
"""

# No ``from __future__ import annotations``: it imports ``__future__``, which a bundled run never does.
import sys
from _frozen_importlib import ModuleSpec
from _frozen_importlib_external import MAGIC_NUMBER, SourceFileLoader
from marshal import loads
from posix import O_CLOEXEC, O_RDONLY, W_OK, access, close, environ, fstat, read, stat
from posix import open as open_fd

PREFIX = "processkit."
COMMAND_PACKAGES = ("processkit.cli.", "processkit.benchmark.")  # whose functions import a command's modules
CO_OPTIMIZED = 1  # a code object's flag: a function's body (``inspect.CO_OPTIMIZED``)
READ_SIZE = 64 * 1024  # above every pyc of the package (the largest is ~33 KiB)
BUNDLE_LIMIT = 16 * 1024 * 1024  # a bundle read stops here (a plain run's is ~0.6 MiB)
BUNDLED_COMMANDS = ("run", "bench")  # the commands whose modules are kept together, a file each
STARTED_COMMANDS = ("bench",)  # those with a step of their own before their modules: cli/<command>_start.py
WORKLESS_COMMANDS = ("run",)  # those whose bundle keeps no work row: one run a process, its work rare

_bundle: dict = {}  # name -> (source, is package, mtime, size, code, asked at work): rows read from the bundle
_served: dict = {}  # the rows of the modules this process was given, however found
_bundle_path: list[str] = []  # set while a bundle is in use: where it is kept, and the command's name
_order: list[str] = []  # the modules given through the import system, in the order they finished
_preloading: list[str] = []  # while ``_preload`` runs: the package's directory
_handed: dict = {}  # name -> (module, code, spec): what ``find_spec`` found for ``create_module``
_missed: list[str] = []  # modules served from a pyc while a bundle was in use: it is written again
_loader_class: list[type] = []  # ``_Loader``, made the first time the finder serves a module
_checked: dict = {}  # name -> its row's state of its source, read for every preloaded row at once (``_check_sources``)
TAG = sys.implementation.cache_tag
HERE = __file__.rpartition("/")[0]  # ``cli``'s directory, in the package's (``ROOT``)
ROOT = HERE.rpartition("/")[0]


def _loader(fullname: str, path: str, code):
    """The interpreter's source loader, handed the code the finder read; made on first use: a run whose modules are
    all preloaded needs none (~0.15 M instructions a run)."""
    if not _loader_class:

        class _Loader(SourceFileLoader):
            def get_code(self, fullname):
                code = self._code
                if code is None or fullname != self.name:
                    return super().get_code(fullname)
                self._code = None  # held once: a reload reads the files again
                return code

            def exec_module(self, module) -> None:
                super().exec_module(module)
                _order.append(self.name)  # the order modules finish in: the bundle's, for ``_preload``

        _loader_class.append(_Loader)
    loader = _loader_class[0](fullname, path)
    loader._code = code
    return loader


def _read_all(path: str):
    """The bytes of ``path``, a pyc or a source ``bundlewrite.save`` reads; None: unreadable, past ``BUNDLE_LIMIT``."""
    try:
        fd = open_fd(path, O_RDONLY | O_CLOEXEC)
    except OSError:
        return None
    try:
        data = read(fd, READ_SIZE)  # a regular file's read comes back short only at its end
        while len(data) % READ_SIZE == 0 and data:  # a pyc this big is rare: read on to the end
            more = read(fd, READ_SIZE)
            if not more:
                break
            data += more
            if len(data) > BUNDLE_LIMIT:
                return None
    except OSError:
        return None
    finally:
        close(fd)
    return data


def _source_state(source: str):
    """``(mtime, size, ctime ns)`` of the source, the first two as a pyc records them; None when it cannot be read."""
    try:
        held = stat(source)
    except OSError:
        return None
    return int(held.st_mtime) & 0xFFFFFFFF, held.st_size & 0xFFFFFFFF, held.st_ctime_ns


def _row_state(state) -> tuple:
    """What a bundle row keeps of its source's state: a pyc's pair, and the status-change time, which no installer or
    copy sets back (``cp -a`` still changes it): the pyc is written again at install, the bundle is not."""
    return (state[0], state[2]), state[1]


def _byte_code(source: str, cached: str):
    """``(code, source state)`` from ``cached`` when it is a valid timestamp pyc of ``source``."""
    data = _read_all(cached)
    if data is None:
        return None
    state = _source_state(source)
    if (
        state is None
        or len(data) < 16
        or data[:4] != MAGIC_NUMBER
        or data[4:8] != b"\0\0\0\0"  # flags: 0 is timestamp mode; hash-based pycs go the usual way
        or int.from_bytes(data[8:12], "little") != state[0]
        or int.from_bytes(data[12:16], "little") != state[1]
    ):
        return None
    try:
        return loads(memoryview(data)[16:]), state
    except (EOFError, ValueError, TypeError):
        return None


def _found(fullname: str, source: str, cached: str, package: bool):
    """The code of ``fullname``: its bundle row's while the row names ``source`` and the source is as recorded, else
    its pyc's (a row of it kept for ``save`` while a bundle is in use)."""
    row = _bundle.get(fullname)
    if row is not None and row[0] == source and row[1] is package:
        state = _source_state(source)
        if state is not None and _row_state(state) == (row[2], row[3]):
            _served[fullname] = row
            return row[4]
    found = _byte_code(source, cached)
    if found is None:
        return None
    code, state = found
    if _bundle_path:
        _served[fullname] = (source, package, *_row_state(state), code, _asked_at_work(fullname))
        _missed.append(fullname)
    return code


def _asked_at_work(fullname: str) -> bool:
    """Whether ``fullname`` is imported by a command's work: by a function outside ``cli/``, ``benchmark/``
    (which import a command's modules before its work) and its package's ``__init__`` (which picks a module for
    this host), or by the body of a module that was. Its row is not preloaded: a plain run runs none of it."""
    try:
        frame = sys._getframe(3)  # past ``_found`` and ``find_spec``: the import system's frames, then the importer
    except ValueError:  # ``find_spec`` called from the top of a stack, not by an import
        return False
    while frame.f_code.co_filename.startswith("<frozen importlib"):
        if frame.f_back is None:
            return False
        frame = frame.f_back
    name = frame.f_globals.get("__name__")
    if type(name) is not str:  # none, or code exec'd with odd globals: never an import's failure
        return False
    if not frame.f_code.co_flags & CO_OPTIMIZED:  # a module's (or class's) body: as its module was asked for
        row = _served.get(name) or _bundle.get(name)
        return row is not None and row[5]
    return name.startswith(PREFIX) and not name.startswith(COMMAND_PACKAGES) and name != fullname.rpartition(".")[0]


def find_spec(fullname: str, path=None, target=None):
    """The meta path finder's one method (a class would be one more to make each start), for ``processkit.*``."""
    if not fullname.startswith(PREFIX) or path is None or len(path) != 1:
        return None
    row = _bundle.get(fullname)
    if row is not None and (_preloading or row[5]):  # a package's import while preloading, or a work row
        made = _made(fullname, _preloading[0] if _preloading else ROOT)
        if made is not None:  # this module is the loader: ``create_module``, ``exec_module``
            _handed[fullname] = (*made, made[0].__spec__)
            return ModuleSpec(fullname, sys.modules[__name__])  # type: ignore[arg-type] # a loader's two functions
    base = path[0]
    leaf = fullname.rpartition(".")[2]
    code = None
    if row is None or row[1] is not True:  # a package's row spares the look for a module first
        source = f"{base}/{leaf}.py"
        cached = f"{base}/__pycache__/{leaf}.{TAG}.pyc"
        code = _found(fullname, source, cached, False)
    package = None
    if code is None:
        source = f"{base}/{leaf}/__init__.py"
        cached = f"{base}/{leaf}/__pycache__/__init__.{TAG}.pyc"
        code = _found(fullname, source, cached, True)
        if code is None:
            return None
        package = [f"{base}/{leaf}"]
    spec = ModuleSpec(fullname, _loader(fullname, source, code), origin=source, is_package=package is not None)
    spec._set_fileattr = True  # type: ignore[attr-defined] # as ``_made`` sets them: ``has_location``, and
    spec._cached = cached  # type: ignore[attr-defined] # ``cached``, not computed again from the origin
    if package is not None:
        spec.submodule_search_locations = package
    return spec


def _load_bundle(path: str) -> None:
    """The rows of the bundle at ``path``; none when it is missing, another's, or not ``save``'s."""
    try:
        fd = open_fd(path, O_RDONLY | O_CLOEXEC)
    except OSError:
        return
    try:
        size = fstat(fd).st_size
        if not 4 < size <= BUNDLE_LIMIT:
            return
        rows = _mapped_rows(fd, size)
    except (OSError, ValueError):
        return
    finally:
        close(fd)
    if type(rows) is not tuple:
        return
    code = type(_load_bundle.__code__)
    for row in rows:
        if type(row) is tuple and len(row) == 7 and type(row[0]) is str:
            if type(row[5]) is code and type(row[6]) is bool:  # a row as ``save`` writes it
                _bundle[row[0]] = row[1:]


def _mapped_rows(fd: int, size: int):
    """The rows unmarshalled from a private mapping of the bundle open at ``fd`` (a read's buffer would be ~150
    fresh pages, each a fault); None when it is not one. Mapped by libc's ``mmap`` through the C module, which a
    run loads to spawn anyway, not the ``mmap`` extension module, but where the C module was not built."""
    try:
        from .. import _native
    except ImportError:
        from mmap import MAP_PRIVATE, PROT_READ, mmap

        mapped = mmap(fd, size, MAP_PRIVATE, PROT_READ)
        view, unmap = memoryview(mapped), mapped.close
    else:
        ffi, lib = _native.ffi, _native.lib
        address = lib.mmap(ffi.NULL, size, lib.PROT_READ, lib.MAP_PRIVATE, fd, 0)
        if ffi.cast("intptr_t", address) == -1:  # MAP_FAILED
            return None
        view, unmap = memoryview(ffi.buffer(ffi.cast("char *", address), size)), lambda: lib.munmap(address, size)
    try:
        with view as data:
            return loads(data[4:]) if data[:4] == MAGIC_NUMBER else None
    except (EOFError, ValueError, TypeError):
        return None
    finally:  # the rows hold copies: no view of the mapping is left
        unmap()


def install() -> None:
    """Put the finder first where the byte code is the kind it reads; for a bundled command, read its bundle first."""
    if TAG is None or sys.flags.optimize:
        return
    command = sys.argv[1] if len(sys.argv) > 1 else None
    if command in BUNDLED_COMMANDS:
        _bundle_path.extend((f"{HERE}/__pycache__/{command}.{TAG}.bundle", command))
        _load_bundle(_bundle_path[0])
    sys.meta_path.insert(0, sys.modules[__name__])
    if command in STARTED_COMMANDS:  # decided by its source, never the bundle: an older one's rows can lack it
        try:  # or name a module since gone: no step then, and that row, unused, has the file written again
            __import__(f"{PREFIX}cli.{command}_start", fromlist=("start",)).start()
        except ImportError:
            pass
    if _bundle and not (sys.flags.verbose or "importtime" in sys._xoptions or b"PYTHONPROFILEIMPORTTIME" in environ):
        _preload()


def _preload() -> None:
    """Run the bundle's modules (but its work rows) in the order the last run's finished in, each into a module of
    its own, past the import system's locks, lookups and attribute copying (~40 k instructions a module). A
    package finished after its first modules is run from its row when the first is reached, and what its
    ``__init__`` imports of them from theirs (``find_spec`` hands them to this module as their loader). A changed
    source or a failing module ends the preloading: the rest are imported as usual."""
    root = ROOT
    _preloading.append(root)
    _check_sources(root)
    try:
        for name, row in list(_bundle.items()):
            if not row[5] and name not in sys.modules and not _run_row(name, root):
                return
    finally:
        _preloading.clear()


def _check_sources(root: str) -> None:
    """The preloaded rows' sources' states in one call of the C module (``csrc/sources.c``) where the launcher loaded
    it: ~0.5 us a source, ~2.6 through ``stat``; ``_made`` takes each row's once, its source found this copy's here."""
    native = sys.modules.get(f"{PREFIX}_native")
    rows = [(name, row[0]) for name, row in _bundle.items() if not row[5] and row[0] == _where(name, row[1], root)]
    if native is None or not rows:
        return
    ffi = native.ffi
    out = ffi.new("long long[]", 4 * len(rows))
    joined = "\0".join([source for _, source in rows]).encode(sys.getfilesystemencoding(), "surrogateescape")
    native.lib.pk_source_states(joined, len(rows), out)
    states = ffi.unpack(out, 4 * len(rows))
    for index, (name, _) in enumerate(rows):
        seconds, nanoseconds, size, changed = states[4 * index : 4 * index + 4]
        if size >= 0:  # ``_row_state`` of ``_source_state``'s: the time as ``stat``'s float gives it
            _checked[name] = (int(seconds + nanoseconds * 1e-9) & 0xFFFFFFFF, changed), size & 0xFFFFFFFF


def _where(name: str, package: bool, root: str) -> str:
    """The source of the module ``name`` in the package at ``root``."""
    return f"{root}/{name[len(PREFIX) :].replace('.', '/')}{'/__init__.py' if package else '.py'}"


def _run_row(name: str, root: str) -> bool:
    """Run the row of ``name`` (its package's first, if not loaded) into a new module; whether the module is loaded."""
    modules = sys.modules
    parent, _, leaf = name.rpartition(".")
    if parent not in modules and (parent not in _bundle or not _run_row(parent, root)):
        return False
    if name in modules:  # its package's ``__init__`` imported it
        return True
    made = _made(name, root)
    if made is None:
        return False
    module, code = made
    modules[name] = module
    try:
        _execute(name, module, code, module.__spec__)
    except Exception:  # noqa: BLE001 - raised again, in place, by the run's own import
        del modules[name]
        return False
    setattr(modules[parent], leaf, module)
    return True


def _made(name: str, root: str):
    """``(module, code)`` for the row of ``name``, made as imports make one; None: another copy's, a changed source."""
    source, package, mtime, size, code, _ = _bundle[name]
    checked = _checked.pop(name, None)  # None: not read at once (no C module), or a row of another copy of the package
    if checked is None and source == _where(name, package, root):
        state = _source_state(source)
        checked = state and _row_state(state)
    if checked != (mtime, size):
        return None  # another copy's row, a changed source, or one that cannot be read
    directory, _, file_name = source.rpartition("/")
    cached = f"{directory}/__pycache__/{file_name[:-3]}.{TAG}.pyc"
    spec = ModuleSpec(name, SourceFileLoader(name, source), origin=source, is_package=package)
    spec._set_fileattr = True  # type: ignore[attr-defined] # ``has_location``'s and ``cached``'s fields, set as their
    spec._cached = cached  # type: ignore[attr-defined] # setters set them, not through them (a Python call each)
    # As the import system's, False once run: an import of a loaded module asks (else an error made and dropped)
    spec._initializing = True  # type: ignore[attr-defined] # the import system's own mark, untyped
    module = type(sys)(name)
    attributes = vars(module)
    attributes.update(__spec__=spec, __loader__=spec.loader, __file__=source, __cached__=cached)
    attributes["__package__"] = name if package else name.rpartition(".")[0]
    if package:
        module.__path__ = spec.submodule_search_locations = [directory]
    return module, code


def create_module(spec):
    """The import system's first step for a module ``find_spec`` handed here: the one made from its row."""
    return _handed[spec.name][0]


def exec_module(module) -> None:
    """The import system's second step for such a module: its row's code, run into it."""
    name = module.__name__
    made, code, spec = _handed.pop(name)
    module.__spec__ = spec  # the spec it was made with, not the one the import system was handed
    _execute(name, module, code, spec)


def _execute(name: str, module, code, spec) -> None:
    """Run a row's code into its module (``_preload``'s way and the import system's), its spec's mark cleared."""
    try:
        exec(code, vars(module))
    finally:
        spec._initializing = False
    _served[name] = _bundle[name]
    _order.append(name)


def save() -> None:
    """Write the bundle again (``cli/bundlewrite.py``), this run's modules' rows only, when it read a module's pyc or
    left a preloaded row unused (a removed module's, another copy's); not for an unused work row (its unmarshal only:
    a host's runs differ in what they ask). A ``run`` writes none (its unmarshal would cost every plain run after a
    rare one): its work modules read from their pycs are no miss, and an older writer's work row is one."""
    if sys.dont_write_bytecode or sys.pycache_prefix:  # byte code kept elsewhere, or not at all
        return
    workless = bool(_bundle_path) and _bundle_path[1] in WORKLESS_COMMANDS  # none: a command of no bundle
    missed = [name for name in _missed if not (workless and _served[name][5])]
    unused = any(not row[5] and name not in _served or workless and row[5] for name, row in _bundle.items())
    if (not missed and not unused) or not access(_bundle_path[0].rpartition("/")[0], W_OK):
        return  # nothing to write, or an install this user cannot write to: nothing read or compiled
    from .bundlewrite import save as write_again  # which leaves its own module out of the rows

    write_again(sys.modules[__name__], not workless)

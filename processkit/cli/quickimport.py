"""The launcher's finder for processkit's own modules: their byte code read directly.

A plain ``run`` imports some 75 processkit modules, and the interpreter's general path finder
spends about 0.3 M instructions on each before the module's own code runs (an empty module:
bench/README.md, "Start-up: the launcher's finder"): the directory's listing and its mtime,
every loader suffix tried in turn, the cache path computed twice, the byte code read through
three layers of Python. Here a module of this package is its source's ``stat`` and its
``__pycache__`` file's ``open``/``read``, checked as the interpreter checks it (magic number,
timestamp mode, the source's mtime and size); anything else (no byte code yet, a stale or
hash-based one, an extension module, a namespace package, optimisation flags) returns None and
the interpreter's own finder takes the module as before, so what is imported never changes.

Only the launcher installs it (``processkit/cli/processkit-cli``): a library must not change
its host's import system. Modules are found as ``<name>.py`` before ``<name>/__init__.py``, the
reverse of the interpreter's order, which is the same answer as long as no name in the package
is both; ``tests/test_startup_imports.py`` holds the package to that, and to no extension
module beside a source of the same name.
"""

from __future__ import annotations

import sys
from _frozen_importlib import ModuleSpec
from _frozen_importlib_external import MAGIC_NUMBER, SourceFileLoader
from marshal import loads
from posix import O_CLOEXEC, O_RDONLY, close, read, stat
from posix import open as open_fd

PREFIX = "processkit."
READ_SIZE = 64 * 1024  # above every pyc of the package (the largest is ~33 KiB)


class _Loader(SourceFileLoader):
    """The interpreter's own source loader (resources, source, data as usual), handed the code
    the finder already read so that ``exec_module`` does not read it again."""

    def __init__(self, fullname: str, path: str, code) -> None:
        self.name = fullname
        self.path = path
        self._code = code

    def get_code(self, fullname):
        code = self._code
        if code is None or fullname != self.name:
            return super().get_code(fullname)
        self._code = None  # held once: a reload reads the files again
        return code


def _byte_code(source: str, cached: str):
    """The code object in ``cached`` when it is a valid timestamp pyc of ``source``, else None."""
    try:
        fd = open_fd(cached, O_RDONLY | O_CLOEXEC)
    except OSError:
        return None
    try:
        data = read(fd, READ_SIZE)  # a regular file's read comes back short only at its end
        while len(data) % READ_SIZE == 0 and data:  # a pyc this big is rare: read on to the end
            more = read(fd, READ_SIZE)
            if not more:
                break
            data += more
    except OSError:
        return None
    finally:
        close(fd)
    try:
        held = stat(source)
    except OSError:
        return None
    if (
        len(data) < 16
        or data[:4] != MAGIC_NUMBER
        or data[4:8] != b"\0\0\0\0"  # flags: 0 is timestamp mode; hash-based pycs go the usual way
        or int.from_bytes(data[8:12], "little") != int(held.st_mtime) & 0xFFFFFFFF
        or int.from_bytes(data[12:16], "little") != held.st_size & 0xFFFFFFFF
    ):
        return None
    try:
        return loads(memoryview(data)[16:])
    except (EOFError, ValueError, TypeError):
        return None


class Finder:
    """A meta path finder for ``processkit.*`` submodules with a valid pyc; None for the rest."""

    tag = sys.implementation.cache_tag

    @classmethod
    def find_spec(cls, fullname: str, path=None, target=None):
        if not fullname.startswith(PREFIX) or path is None or len(path) != 1:
            return None
        base = path[0]
        leaf = fullname.rpartition(".")[2]
        source = f"{base}/{leaf}.py"
        cached = f"{base}/__pycache__/{leaf}.{cls.tag}.pyc"
        code = _byte_code(source, cached)
        package = None
        if code is None:
            source = f"{base}/{leaf}/__init__.py"
            cached = f"{base}/{leaf}/__pycache__/__init__.{cls.tag}.pyc"
            code = _byte_code(source, cached)
            if code is None:
                return None
            package = [f"{base}/{leaf}"]
        spec = ModuleSpec(fullname, _Loader(fullname, source, code), origin=source, is_package=package is not None)
        spec.has_location = True
        spec.cached = cached  # what it would otherwise compute again from the origin
        if package is not None:
            spec.submodule_search_locations = package
        return spec


def install() -> None:
    """Put the finder first, where the interpreter's byte code is the plain kind it reads."""
    if Finder.tag is None or sys.flags.optimize:
        return
    sys.meta_path.insert(0, Finder)

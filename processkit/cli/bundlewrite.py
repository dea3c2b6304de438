"""The run's byte-code bundle written to its file (``cli/quickimport.py`` reads it, and decides when
it must be written again). Apart from the reader so that a run whose bundle is current, the
common case, neither loads nor unmarshals this code.

A module the writing run read from its pyc is compiled again for its row, from its source, without
what nothing in a run reads: its docstrings, its functions' annotations, and its ``from __future__
import annotations`` statement (the future's flag is given to the compiler instead, so annotations
stay unevaluated strings as before; the statement itself is an import run in every module, ~8 k
instructions each, and the first imports ``__future__``). Every other statement, name, constant,
line number and ``assert`` is compiled as the interpreter compiles it, and a class's annotations
(which ``plain`` records read) are kept. That is about a quarter less code to unmarshal and keep:
bench/README.md, "Start-up: the bundle without what a run never reads". A row whose source is no
longer what the row recorded keeps the pyc's code (``quickimport.save`` reads the sources; the
next run finds such a row stale anyway).
"""

from __future__ import annotations

import __future__
import _ast
from _frozen_importlib_external import MAGIC_NUMBER
from marshal import dumps
from posix import (
    O_CLOEXEC,
    O_CREAT,
    O_EXCL,
    O_WRONLY,
    close,
    getpid,
    rename,
    stat,
    unlink,
    urandom,
)
from posix import open as open_fd

from ..writeall import write_all

# compile's flag for the syntax tree (not ``ast.parse``: the ``ast`` module imports enum and contextlib)
_TREE_ONLY: int = _ast.PyCF_ONLY_AST


def save(finder, keep_work: bool) -> None:
    """Write ``finder``'s (``cli/quickimport.py``'s) bundle again: the rows of the modules its run
    was given, in the order they finished (but work rows, unless ``keep_work``: ``finder.save``
    decides, for a command that keeps none); those read from a pyc compiled again, lean, from their
    sources, read here while they are as their rows recorded."""
    served = {name: row for name, row in finder._served.items() if name != __name__ and (keep_work or not row[5])}
    rows = {name: served[name] for name in finder._order if name in served}
    rows.update((name, row) for name, row in served.items() if name not in rows)
    sources = {}
    for name in finder._missed:
        if name not in rows:  # a row left out: this module's own, or a work row kept none of
            continue
        source, _, key, size, _, _ = rows[name]
        text = finder._read_all(source)
        state = finder._source_state(source)  # after the read: a source changed since its pyc was read differs
        if text is not None and state is not None and finder._row_state(state) == (key, size):
            sources[name] = text
    finder._missed.clear()
    write(finder._bundle_path[0], tuple((name, *row) for name, row in rows.items()), sources)


def write(path: str, rows: tuple, sources: dict) -> None:
    """The interpreter's magic number and one marshal of ``rows``, put at ``path`` whole or not
    at all (a temporary file renamed over it); best effort: a read-only install keeps none. The
    rows of the modules ``sources`` holds the text of (those read from their pycs) are compiled
    lean first."""
    temporary = f"{path}-{getpid()}-{urandom(4).hex()}.tmp"  # MANIFEST.in keeps a leftover out of an sdist
    try:
        mode = stat(__file__).st_mode & 0o666  # as a pyc takes its source's: no wider than the code
        fd = open_fd(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
    except OSError:
        return
    try:  # compiled once the file is open, inside the clean-up: a signal meanwhile keeps the exit
        rows = tuple(
            (*row[:5], lean(sources[row[0]], row[1], row[5]), row[6]) if row[0] in sources else row for row in rows
        )
        write_all(fd, MAGIC_NUMBER + dumps(rows))
        close(fd)
        fd = -1
        rename(temporary, path)
        sweep(path)
    except BaseException:  # noqa: BLE001 - a write error, or a signal at the run's exit: no file left, exit kept
        if fd >= 0:
            close(fd)
        try:
            unlink(temporary)
        except OSError:
            pass


def sweep(path: str) -> None:
    """Remove the temporary files writers of ``path`` left when killed while writing, each a
    bundle's size for good (``freshnames.sweep``): only names ``write`` makes, and only in a
    directory of this user's that no one else can write (so no one else's file can be there
    under that name); stale by the file system's clock, as the leftovers' times are."""
    directory, _, name = path.rpartition("/")
    try:
        now = stat(path).st_mtime
    except OSError:
        return
    from ..freshnames import fresh_of  # after the rows are written: no row of its own
    from ..freshnames import sweep as remove_stale

    # ``write``'s temporary names of ``name``: ``<name>-<pid>-<8 hex>.tmp``
    remove_stale(directory, lambda entry: fresh_of(entry, name + "-", "-"), now, private=True)


def lean(text: bytes, source: str, code):
    """The module ``source`` compiled from ``text`` without docstrings, functions' annotations
    and the annotations future; ``code``, its pyc's, when that fails."""
    try:
        tree = compile(text, source, "exec", _TREE_ONLY, dont_inherit=True)
        flags = _strip_future(tree)
        _strip(tree.body, True)
        return compile(tree, source, "exec", flags, dont_inherit=True, optimize=0)
    except Exception:  # noqa: BLE001 - a cache: whatever fails to compile keeps the code that was read
        return code


def _strip_future(tree) -> int:
    """Take ``from __future__ import annotations`` (alone) out of the module's first statements;
    the compiler flag it would have set, else 0."""
    for index, node in enumerate(tree.body[:3]):  # after a docstring, among the futures
        if (
            type(node) is _ast.ImportFrom
            and node.module == "__future__"
            and [(alias.name, alias.asname) for alias in node.names] == [("annotations", None)]
        ):
            del tree.body[index]
            return __future__.annotations.compiler_flag
    return 0


def _strip(body, own: bool) -> None:
    """In a block of statements, drop its docstring (``own``: the block is a module's, class's or
    function's body) and, in every definition within it, the definition's docstring and its
    signature's annotations."""
    first = body[0] if own and body else None
    if type(first) is _ast.Expr and type(first.value) is _ast.Constant and type(first.value.value) is str:
        if len(body) == 1:  # the docstring alone: a ``pass`` where it stood
            where = {name: getattr(first, name) for name in ("lineno", "col_offset", "end_lineno", "end_col_offset")}
            body[0] = _ast.Pass(**where)
        else:
            del body[0]
    for node in body:
        kind = type(node)
        if kind is _ast.FunctionDef or kind is _ast.AsyncFunctionDef:
            arguments = node.args
            for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
                argument.annotation = None
            for argument in (arguments.vararg, arguments.kwarg):
                if argument is not None:
                    argument.annotation = None
            node.returns = None
            _strip(node.body, True)
        elif kind is _ast.ClassDef:
            _strip(node.body, True)
        else:  # an if, for, while, with, try or match: the blocks it holds
            for field in ("body", "orelse", "finalbody"):
                _strip(getattr(node, field, ()), False)
            for block in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
                _strip(block.body, False)

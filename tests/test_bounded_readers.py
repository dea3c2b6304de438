"""Rule 3 (docs/threat-model.md): every reader of a file named by a user goes through
``processkit/bounded.py``. This scans the package's sources and fails naming every read of a
file by name anywhere else: ``open()`` for reading, a read-only ``os.open``, ``Path.read_text`` /
``read_bytes``, ``json.load``. The few reads that stay outside are listed below, each with why."""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "processkit"

# (module, enclosing function) -> why that read does not go through bounded.py.
ALLOWED = {
    # The kernel's own files under /proc and /sys: bounded by what the kernel writes there.
    ("containment/cgroupfs.py", "read_bytes"): "a cgroup or /proc file of the kernel's, at most READ_LIMIT (read_on)",
    ("containment/cgroupfs.py", "open_in"): "a lent group's cgroup files, each pread READ_CHUNK at a time",
    ("containment/members.py", "usage_of"): "/proc/<pid>/status",
    ("engine/stdin_feed.py", "open_source"): "an API input=, the service's own memfd (its place): pumped by the loop",
    ("containment/members.py", "_io_counters"): "/proc/<pid>/io",
    ("containment/leftovers.py", "children"): "/proc/<pid>/task/<tid>/children",
    ("pathtrust.py", "trusted"): "/proc/self/uid_map and /proc/sys/kernel/overflowuid",
    ("mountinfo.py", "_read_mounts"): "/proc/self/mountinfo",
    ("containment/sweep_mark.py", "_holders"): "/proc/locks, for the holders of a run's lock",
    ("cli/main.py", "undo_locale_coercion"): "/proc/self/environ, the environment the runner was started with",
    # The package's own data, shipped with it.
    ("events/validate.py", "load_schema"): "a schema shipped as package data",
    ("cli/probe.py", "main"): "the shipped event schema, printed",
    # Streams copied to a child as they come, never held: the child paces the reading.
    ("engine/pty.py", "take"): "this process's own stdin, pumped to the pty",
    ("engine/pump.py", "watch"): "/proc/self/fd/<n>: the child's output pipe again, pumped as it comes",
    ("pathreopen.py", "reopen"): "the file an O_PATH handle names, opened to be written; the flags are its writer's",
    (
        "pathreopen.py",
        "_reopen_at",
    ): "reopen's open by name where there is no /proc: the same file (device and inode checked), the same flags and O_NOFOLLOW",
    # Reads of what this program itself made, at offsets and sizes it recorded.
    ("api/wire.py", "read_back"): "a run's memfd or scratch file, read back by the runner service or its caller",
    ("service/scratch.py", "_sweep_marked"): "the scratch mark, opened only to be locked and unlinked: never read",
    ("readback.py", "same_file"): "/proc/self/fd/<n>: the run's own capture or stream file reopened for its "
    "carrier, which reads it only through api/wire.read_back (at what the run wrote), or a ring put in order",
}


def _reads(tree: ast.AST):
    """(line, enclosing function, what) for each read of a file by name in ``tree``."""
    imported = {
        alias.asname or alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    # A name's assigned values, so ``os.open(path, flags)`` is judged by what ``flags`` holds.
    assigned: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned[target.id] = assigned.get(target.id, "") + " " + ast.unparse(node.value)
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call):
            what = _read_call(node, imported, assigned)
            if what is not None:
                found.append((node.lineno, function, what))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return found


def _read_call(call: ast.Call, imported: set[str], assigned: dict[str, str]) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id == "open":
        return None if _writing_mode(call, 1) else "open() for reading"
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        owner, name = func.value.id, func.attr
        if (owner, name) in (("io", "open"), ("codecs", "open")):
            return None if _writing_mode(call, 1) else f"{owner}.open() for reading"
        if (owner, name) == ("os", "open") and call.args:
            flags = ast.unparse(call.args[1]) if len(call.args) > 1 else ""
            for name in (
                [node.id for node in ast.walk(call.args[1]) if isinstance(node, ast.Name)] if len(call.args) > 1 else []
            ):
                flags += assigned.get(name, "")
            if not any(word in flags for word in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_DIRECTORY", "O_PATH")):
                return "os.open() read-only"
        if (owner, name) == ("json", "load"):
            return "json.load() of a file"
    if isinstance(func, ast.Attribute) and func.attr in ("read_text", "read_bytes"):
        receiver = func.value
        if isinstance(receiver, ast.Name) and receiver.id in imported:
            return None  # a module of ours (cgroupfs.read_text), not a Path
        return f"Path.{func.attr}()"
    return None


def _writing_mode(call: ast.Call, index: int) -> bool:
    mode = (
        call.args[index] if len(call.args) > index else next((k.value for k in call.keywords if k.arg == "mode"), None)
    )
    if mode is None:
        return False
    if not isinstance(mode, ast.Constant) or not isinstance(mode.value, str):
        return True  # a computed mode (cli/main.py's stdio): not a read by name
    return any(ch in mode.value for ch in "wax+")


def test_every_read_of_a_file_by_name_goes_through_bounded():
    offenders = []
    used = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module == "bounded.py":
            continue
        for line, function, what in _reads(ast.parse(path.read_text(), module)):
            if (module, function) in ALLOWED:
                used.add((module, function))
                continue
            offenders.append(f"processkit/{module}:{line} in {function}(): {what}")
    assert not offenders, (
        "reads that bypass processkit/bounded.py (route them, or allow one here, saying why):\n" + "\n".join(offenders)
    )
    assert not set(ALLOWED) - used, f"allowed reads that no longer exist: {sorted(set(ALLOWED) - used)}"


def test_the_scan_sees_each_kind_of_read():
    """The scan itself: each form it must catch is caught, and a write is not."""
    source = """
import json, os, pathlib
def f(p):
    open(p)
    open(p, "rb")
    os.open(p, os.O_RDONLY | os.O_CLOEXEC)
    pathlib.Path(p).read_text()
    json.load(open(p, "w"))
    open(p, "w")
    os.open(p, os.O_WRONLY | os.O_CREAT)
"""
    found = [what for _, _, what in _reads(ast.parse(source))]
    assert found == [
        "open() for reading",
        "open() for reading",
        "os.open() read-only",
        "Path.read_text()",
        "json.load() of a file",
    ]

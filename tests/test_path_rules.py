"""Rules 1 and 2 of docs/threat-model.md, held by reading the sources: every file created or
written by name goes through ``safepath`` (and ``userfiles`` and ``useroutputs``, built on it),
and no open of a path can wait (a FIFO's open waits for its other end).

The scan walks every module of ``processkit`` (``ast``) and names each call that creates or
writes a file by name (``open()`` with ``w``/``a``/``x``/``+``, ``os.open`` with ``O_CREAT``,
``O_WRONLY``, ``O_RDWR``, ``O_TRUNC`` or ``O_APPEND``, ``Path.write_text``/``write_bytes``,
``os.mkdir``/``makedirs``/``mkfifo``/``link``/``symlink``/``chmod``, ``os.rename``/``replace``,
``shutil``'s copies and moves, ``tempfile`` with ``dir=``) or opens a path for reading in a way
that can wait (``open()`` for reading, ``Path.read_text``/``read_bytes``, ``os.open`` without
``O_NONBLOCK``, ``O_PATH`` or ``O_DIRECTORY``), outside the modules that hold the rules. The
kernel's own files (``/proc``, ``/sys``, ``os.devnull``) never wait and are not another user's.
A call site that is not one of the justified exceptions below fails the test, named by file,
line and function; an exception that no longer matches a call site fails it too, so the list
stays true.
"""

from __future__ import annotations

import ast
from pathlib import Path

import processkit

PACKAGE = Path(processkit.__file__).parent
RULE_MODULES = {"safepath.py", "pathreopen.py", "userfiles.py", "useroutputs.py"}  # the rules themselves

# (module, enclosing function, call) -> why this call may bypass the rules. Each is inside a
# directory the program made or proved private, a kernel interface, its own package data, or
# a wait that holds up nothing else.
ALLOWED = {
    # The cgroup mount: kernel interface files and the run's own groups, never a FIFO or a link.
    ("containment/cgroupfs.py", "make_group", "os.mkdir"): "a cgroup, made in the runner's delegated cgroup",
    ("containment/cgroupfs.py", "make_group", "os.open:write"): "the new cgroup's own cgroup.procs",
    ("containment/cgroupfs.py", "open_in", "os.open:read"): (
        "a lent group's interface file (its tasks read then joined, its counters read and reset in place)"
    ),
    ("containment/cgroupfs.py", "read_bytes", "os.open:read"): "a cgroup interface file",
    ("containment/cgroupfs.py", "write_text", "os.open:write"): "a cgroup interface file",
    ("containment/stragglers.py", "_evacuate", "os.open:write"): "the parent cgroup's cgroup.procs",
    ("mountinfo.py", "_read_mounts", "open:read"): "/proc/self/mountinfo (a parameter so tests can pass a copy)",
    # The controlling terminal, left by the Popen spawn's child before its exec (never a path a user names).
    ("engine/child_terminal.py", "drop_terminal", "os.open:write"): "/dev/tty, O_NOCTTY | O_NONBLOCK: TIOCNOTTY",
    # The package's own files.
    ("cli/probe.py", "main", ".read_bytes"): "the shipped event schema, package data",
    ("events/validate.py", "load_schema", ".read_text"): "a shipped schema, package data",
    # The doctor's scratch: a fresh 0700 directory of its own (mkdir never follows a link).
    ("doctor/scratch.py", "scratch_dir", "os.mkdir"): "a fresh name, mode 0700, EEXIST retried",
    ("doctor/qualification.py", "Qualification._launch", "open:write"): "inside the doctor's own 0700 scratch",
    ("doctor/qualification.py", "Qualification._settle", "open:write"): "inside the doctor's own 0700 scratch",
    # A run's own directory (rundir, liveness): made 0700 afresh, or checked this user's, not a link.
    ("rundir.py", "RunDir._make", "os.mkdir"): "a fresh name, mode 0700, EEXIST retried",
    ("rundir.py", "RunDir._record", "os.open:write"): "O_EXCL inside the run's own 0700 directory",
    ("containment/sweep_mark.py", "dead_for", "os.open:write"): (
        "O_EXCL | O_NOFOLLOW | O_NONBLOCK at a descriptor of a dead run's private directory (opened"
        " O_DIRECTORY | O_NOFOLLOW, checked its owner's), the one whose lock the sweep holds; an"
        " existing name is only lstat'ed"
    ),
    ("liveness.py", "take", "os.open:write"): "O_EXCL | O_NOFOLLOW inside the run's own 0700 directory",
    ("liveness.py", "probe", "os.open:write"): "O_NONBLOCK | O_NOFOLLOW, then checked a regular file",
    # The registry: safepath.private_directory proved it this user's and writable by no one else.
    ("registry/registration.py", "write_record", "os.open:write"): "O_EXCL | O_NOFOLLOW in the private registry",
    ("registry/tombstones.py", "bury", "os.rename"): "within the private registry",
    ("registry/stream_guard.py", "_opened", "os.open:write"): "O_NOFOLLOW | O_NONBLOCK in the private "
    "registry, a name of its own (a stream's key), only locked",
    ("registry/stream_guard.py", "_opened", "os.chmod"): "a stream's key an older run made under a strict umask, "
    "made 0600 again: a name in the private registry, which only this user can have put there",
    ("registry/tombstones.py", "write_new", "os.open:write"): "O_EXCL | O_NOFOLLOW in a private directory",
    ("control/server.py", "_listen_at", "os.chmod"): "the socket it has just bound, in its fresh 0700 directory",
    # A batch's --out: made or checked by safepath.private_directory (batching/outdir.py).
    ("batching/outdir.py", "ensure_directory", "os.mkdir"): "a job directory inside the checked --out",
    ("batching/recorder.py", "_open_summary", "os.open:write"): "O_NOFOLLOW inside the checked --out",
    ("batching/outdir.py", "lock_out", "os.open:read"): (
        "O_NOFOLLOW | O_NONBLOCK inside the checked --out, then checked a regular file of this user's"
    ),
    ("batching/began.py", "Record.__init__", "os.open:write"): "O_NOFOLLOW | O_NONBLOCK in .dask-began, "
    "which ensure_directory made or checked inside the checked --out",
    ("batching/attempt.py", "_move_attempt_aside", "os.rename"): "a retried job's stream and capture moved inside "
    "its job directory, which ensure_directory checked is the caller's own and writable by no one else",
    ("capture_layout.py", "_placed", "os.open:write"): "O_EXCL | O_NOFOLLOW, a fresh name, through a descriptor "
    "of the checked capture directory",
    ("capture_layout.py", "_placed", "os.rename"): "that fresh file renamed over the record's name (never written "
    "through what is there), only where that is this user's regular file, through the same descriptor",
    # The API's own scratch files, made by tempfile.mkstemp/mkdtemp (O_EXCL, 0600/0700).
    ("service/scratch.py", "make", "tempfile.mkdtemp"): "the runner service's scratch directory: "
    "mkdir of a fresh random name, 0700, in the batch base (a private runtime dir or a sticky root tmpfs)",
    ("service/scratch.py", "_rename_fresh", "os.rename"): "that directory, just made and locked under a name the "
    "sweep passes over, renamed to a fresh random name beside it (a sticky root tmpfs or a private runtime dir); "
    "a name another user took is passed over for a new one",
    ("service/held_capture.py", "copied", "os.makedirs"): "a request's directory inside the service's "
    "own scratch directory (scratch.make: a fresh 0700 name), so nothing another user made is in its path",
    ("service/scratch.py", "_held_shared", "os.open:write"): "the user's empty mark beside its scratch directory in "
    "a later base: O_NOFOLLOW | O_NONBLOCK, used only when it is this user's regular file with no other name, "
    "never written",
    (
        "service/scratch.py",
        "run_directory",
        "os.mkdir",
    ): "a run's capture directory: a fresh name (the request's id) in the service's own 0700 scratch",
    ("service/scratch.py", "copy_out", "os.open:write"): "O_EXCL | O_NOFOLLOW inside the service's own 0700 scratch",
    # Waits that hold up nothing else: before the process's only loop starts, with a stop signal
    # keeping its default effect, on a path its own caller named (a pipe's writer may come later).
}

WRITE_FLAGS = {"O_CREAT", "O_WRONLY", "O_RDWR", "O_TRUNC", "O_APPEND"}
SAFE_READ_FLAGS = {"O_NONBLOCK", "O_PATH", "O_DIRECTORY"}
MAKERS = {
    "os.mkdir",
    "os.makedirs",
    "os.mkfifo",
    "os.link",
    "os.symlink",
    "os.chmod",
    "os.rename",
    "os.replace",
    "shutil.copy",
    "shutil.copy2",
    "shutil.copyfile",
    "shutil.copytree",
    "shutil.move",
}
TEMPFILES = {"mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryDirectory", "SpooledTemporaryFile"}
KERNEL_PATHS = ("/proc/", "/sys/")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _kernel_path(node: ast.AST | None) -> bool:
    """A literal path into /proc or /sys, or os.devnull: the kernel's, never a FIFO."""
    if node is None:
        return False
    if _dotted(node) == "os.devnull":
        return True
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith(KERNEL_PATHS)
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value).startswith(KERNEL_PATHS)
    return False


class Scan(ast.NodeVisitor):
    def __init__(self, module: str, tree: ast.Module):
        self.module = module
        self.where: list[str] = []
        self.found: list[tuple[str, str, str, int]] = []
        # names bound to flag expressions anywhere in the module (``flags = os.O_WRONLY | ...``)
        self.constants = {
            target.id: node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }

    def _scope(self, node) -> None:
        self.where.append(node.name)
        self.generic_visit(node)
        self.where.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def _flags(self, node: ast.AST, seen: int = 0) -> set[str]:
        names: set[str] = set()
        for part in ast.walk(node):
            if isinstance(part, ast.Attribute) and part.attr.startswith("O_"):
                names.add(part.attr)
            elif isinstance(part, ast.Name) and part.id in self.constants and seen < 5:
                names |= self._flags(self.constants[part.id], seen + 1)
        return names

    def _add(self, call: str, node: ast.Call) -> None:
        self.found.append((self.module, ".".join(self.where) or "<module>", call, node.lineno))

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        name = _dotted(node.func)
        first = node.args[0] if node.args else None
        keywords = {k.arg: k.value for k in node.keywords}
        if name in ("open", "io.open"):
            if "closefd" in keywords or _kernel_path(first):
                return
            mode = node.args[1] if len(node.args) > 1 else keywords.get("mode")
            text = mode.value if isinstance(mode, ast.Constant) else ("r" if mode is None else "w?")
            self._add("open:write" if set(str(text)) & set("wax+?") else "open:read", node)
        elif name == "os.open":
            flags = self._flags(node.args[1]) if len(node.args) > 1 else set()
            if flags & WRITE_FLAGS:
                if not _kernel_path(first):
                    self._add("os.open:write", node)
            elif not flags & SAFE_READ_FLAGS and not _kernel_path(first):
                self._add("os.open:read", node)
        elif name in MAKERS:
            self._add(name, node)
        elif name.startswith("tempfile.") and name.split(".")[-1] in TEMPFILES and "dir" in keywords:
            self._add(name, node)
        elif isinstance(node.func, ast.Attribute) and _dotted(node.func.value) != "cgroupfs":
            if node.func.attr in ("write_text", "write_bytes"):
                self._add(f".{node.func.attr}", node)
            elif node.func.attr in ("read_text", "read_bytes") and not node.args:
                self._add(f".{node.func.attr}", node)


def call_sites() -> list[tuple[str, str, str, int]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module in RULE_MODULES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        scan = Scan(module, tree)
        scan.visit(tree)
        found += scan.found
    return found


def test_every_file_written_by_name_goes_through_safepath_and_no_open_can_wait():
    sites = call_sites()
    bypassing = [
        f"processkit/{module}:{line}: {call} in {where}"
        for module, where, call, line in sites
        if (module, where, call) not in ALLOWED
    ]
    assert not bypassing, (
        "call sites outside safepath/userfiles/useroutputs (docs/threat-model.md, rules 1-2):\n" + "\n".join(bypassing)
    )
    stale = set(ALLOWED) - {(module, where, call) for module, where, call, _ in sites}
    assert not stale, f"allowed exceptions that match no call site any more: {sorted(stale)}"


def test_the_scan_finds_what_it_is_meant_to_find():
    """The scanner itself: each kind of call it must name is named, the safe forms are not."""
    source = """
import os, shutil, tempfile
_READ = os.O_RDONLY | os.O_CLOEXEC
def f(path, d):
    open(path, "w")
    open(path)
    open(f"/proc/{path}/stat", "rb")
    os.open(path, os.O_WRONLY | os.O_CREAT)
    os.open(path, _READ)
    os.open(path, _READ | os.O_NONBLOCK)
    os.makedirs(path)
    os.replace(path, d)
    shutil.move(path, d)
    tempfile.mkstemp(dir=d)
    tempfile.mkstemp()
    d.write_text("x")
    cgroupfs.write_text(path, "1")
"""
    tree = ast.parse(source)
    scan = Scan("example.py", tree)
    scan.visit(tree)
    assert [call for _, _, call, _ in scan.found] == [
        "open:write",
        "open:read",
        "os.open:write",
        "os.open:read",
        "os.makedirs",
        "os.replace",
        "shutil.move",
        "tempfile.mkstemp",
        ".write_text",
    ]

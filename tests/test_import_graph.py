"""No import cycles, and every import down the layering of docs/architecture.md ("Layers").

Every import counts: module-level, lazy (inside a function) and ``TYPE_CHECKING`` alike. A lazy
import only postpones a cycle to the first call, and a type-only one still ties the two
modules' designs together, so neither is an accepted way out. The graph is read from the
sources with ``ast`` (nothing is imported), so the test sees every branch, not just the ones
a run happens to take. ``cli/main.py`` imports each subcommand's module by the name the
``COMMANDS`` table (``cli/commands.py``) gives: those names are read from the table and count as
imports of ``cli.main``, the dispatcher (``cli/parsers.py`` reads the same names, for the same
package), and an import by any other computed name is refused, so no edge hides in a string.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import re
import textwrap
from pathlib import Path

import processkit

PACKAGE = Path(processkit.__file__).parent
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
SHARED = "the shared modules"
DISPATCHER = "processkit.cli.main"  # what imports each module COMMANDS names, by that name


def module_name(root: Path, path: Path) -> str:
    parts = ["processkit", *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(root: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(root, path): path for path in root.rglob("*.py")}


def extension_modules(root: Path = PACKAGE) -> set[str]:
    """The compiled modules (``processkit._native``): leaves of the graph, importing nothing."""
    return {module_name(root, path).split(".abi3")[0].split(".cpython")[0] for path in root.rglob("*.so")}


def command_modules(tree: ast.Module) -> list[str]:
    """The modules a module-level ``COMMANDS = {name: (module, summary)}`` table names, in its
    order; none where ``COMMANDS`` is another kind of table."""
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        if isinstance(target, ast.Name) and target.id == "COMMANDS" and isinstance(node.value, ast.Dict):
            entries = [entry for entry in node.value.values if isinstance(entry, ast.Tuple) and entry.elts]
            heads = [entry.elts[0] for entry in entries]
            if heads and all(isinstance(head, ast.Constant) and isinstance(head.value, str) for head in heads):
                return [head.value for head in heads]  # type: ignore[attr-defined]
    return []


def _reads_commands(argument: ast.expr) -> bool:
    """``COMMANDS[name][0]``: an import of a module the table names (counted from the table)."""
    return (
        isinstance(argument, ast.Subscript)
        and isinstance(argument.value, ast.Subscript)
        and isinstance(argument.value.value, ast.Name)
        and argument.value.value.id == "COMMANDS"
    )


# The launcher's import of a command's step before its modules run (``cli/quickimport.install``:
# ``f"{PREFIX}cli.{command}_start"``): an import of every such module.
START_STEPS = "processkit.cli.*_start"


def _names_a_start_step(argument: ast.expr) -> bool:
    return (
        isinstance(argument, ast.JoinedStr)
        and isinstance(argument.values[-1], ast.Constant)
        and argument.values[-1].value == "_start"
    )


def by_name(tree: ast.Module, where: str) -> tuple[set[str], list[str]]:
    """Imports by a computed name (``__import__``, ``importlib.import_module``): the literal
    names (``START_STEPS`` for the launcher's), and the call sites whose name the graph cannot
    read (anything but ``COMMANDS``' and the launcher's)."""
    named: set[str] = set()
    unread: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if called not in ("__import__", "import_module"):
            continue
        argument = node.args[0]
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            named.add(argument.value)
        elif _names_a_start_step(argument):
            named.add(START_STEPS)
        elif not _reads_commands(argument):
            unread.append(f"{where}:{node.lineno}")
    return named, unread


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The processkit modules ``name`` imports anywhere in its body, by statement or by name."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    found, _ = by_name(tree, str(path))
    if START_STEPS in found:
        found |= {module for module in known if fnmatch.fnmatchcase(module, START_STEPS)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # ``from package import module`` names the module itself
                submodule = f"{target}.{alias.name}"
                found.add(submodule if submodule in known else target)
    return {module for module in found if module in known and module != name}


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    modules = sources(root)
    known = set(modules) | extension_modules(root)
    graph = {name: imported_modules(name, path, known) for name, path in modules.items()}
    if DISPATCHER in graph:
        graph[DISPATCHER] |= set(commands_table(modules)) & known
    return graph


@functools.cache
def package_imports() -> dict[str, frozenset[str]]:
    """The package's own graph, read once a session (its sources do not change under the tests)
    and frozen, so no test's use of it can change what the next one sees."""
    return {name: frozenset(targets) for name, targets in import_graph().items()}


def commands_table(modules: dict[str, Path]) -> list[str]:
    """The modules the one ``COMMANDS`` table of ``cli`` names (``cli/commands.py`` holds it)."""
    found = [(name, command_modules(ast.parse(path.read_text()))) for name, path in modules.items() if ".cli." in name]
    tables = [(name, named) for name, named in found if named]
    assert len(tables) == 1, f"one COMMANDS table in cli, found {[name for name, _ in tables]}"
    return tables[0][1]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def package_of(module: str) -> str:
    """``processkit.cli.run`` -> ``cli``; a top-level module is its own unit (``spec``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "processkit"


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = package_of(module)
        packages.setdefault(source, set()).update({package_of(target) for target in targets} - {source})
    return packages


class Layering:
    """The architecture's "Layers" table: each unit's row, and the shared modules' group."""

    def __init__(self, text: str):
        self.allowed: dict[str, set[str]] = {}
        self.shared: set[str] = set()
        section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| Unit ")]
        for row in rows:
            first, may = row.strip().strip("|").split("|")
            if first.strip().startswith(SHARED):
                self.shared.update(re.findall(r"`([^`]+)`", first))
                continue
            for unit in re.findall(r"`([^`]+)`", first.split("(")[0]):
                self.allowed[unit] = set(re.findall(r"`([^`]+)`", may))

    def unit(self, module: str) -> str:
        package = package_of(module)
        return SHARED if package in self.shared else package

    def violations(self, graph: dict[str, set[str]]) -> list[str]:
        """Each import the table does not allow, as ``importer -> imported (unit -> unit)``."""
        found = []
        for module, targets in sorted(graph.items()):
            source = self.unit(module)
            for target in sorted(targets):
                into = self.unit(target)
                if into in (source, SHARED):
                    continue
                if into not in self.allowed.get(source, ()):
                    found.append(f"{module} -> {target} ({source} -> {into})")
        return found


def layering() -> Layering:
    return Layering(ARCHITECTURE.read_text())


def test_the_graph_sees_imports_of_every_form():
    graph = package_imports()
    assert "processkit.containment.base" in graph["processkit.containment"]  # from .base import
    assert "processkit.containment.cgroup_v2" in graph["processkit.containment"]  # lazy, from . import
    assert "processkit.errors" in graph["processkit.cli.main"]  # from ..errors import
    assert {"processkit.cli.run", "processkit.cli.batch"} <= graph[DISPATCHER]  # named in COMMANDS
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "processkit" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root / "processkit"


# The cycle issue 34 found, hidden from a graph of import statements: cli/main.py names batch's
# command module in a string, the command sits in batching, batching reads the API's keyword
# translation, and the API parses through cli.
PLANTED = {
    "__init__.py": "",
    "errors.py": "",
    "cli/__init__.py": "",
    "cli/commands.py": """
        COMMANDS = {"run": ("processkit.cli.run", "one run"), "batch": ("processkit.batching.command", "jobs")}
    """,
    "cli/main.py": """
        from ..errors import *
        from .commands import COMMANDS

        def main(name):
            return __import__(COMMANDS[name][0], fromlist=["main"])
    """,
    "cli/run.py": "from ..errors import *\n",
    "batching/__init__.py": "",
    "batching/command.py": "def main():\n    from ..api import options\n",
    "api/__init__.py": "",
    "api/options.py": "def parse():\n    from ..cli.run import parse\n",
}
PLANTED_LAYERS = """
## Layers

| Unit | May import (and the shared modules) |
|---|---|
| `cli` | `batching`, `api` |
| `batching` | `api` |
| `api` | — |
| the shared modules: `errors` | each other |
"""


def test_a_cycle_through_the_commands_table_is_found(tmp_path):
    root = _plant(tmp_path, PLANTED)
    graph = import_graph(root)
    assert "processkit.batching.command" in graph[DISPATCHER]
    assert cycles(package_graph(graph)) == [["api", "batching", "cli"]]
    assert Layering(PLANTED_LAYERS).violations(graph) == ["processkit.api.options -> processkit.cli.run (api -> cli)"]
    statements_only = {name: targets - {"processkit.batching.command"} for name, targets in graph.items()}
    assert cycles(package_graph(statements_only)) == []  # what a reader of import statements alone sees


def test_an_import_by_a_computed_name_is_refused(tmp_path):
    root = _plant(
        tmp_path,
        {**PLANTED, "cli/probe.py": "import importlib\n\ndef load(name):\n    return importlib.import_module(name)\n"},
    )
    assert _unread(root) == [f"{root / 'cli' / 'probe.py'}:4"]


def _unread(root: Path) -> list[str]:
    return [
        where
        for name, path in sorted(sources(root).items())
        for where in by_name(ast.parse(path.read_text()), str(path))[1]
    ]


def test_every_import_is_read_from_a_statement_or_a_name_the_graph_can_read():
    assert _unread(PACKAGE) == []


def test_the_commands_table_names_only_modules_that_exist():
    modules = sources()
    named = commands_table(modules)
    assert "processkit.cli.batch" in named
    assert [name for name in named if name not in modules] == []  # a misspelt name would be no edge


def test_no_module_imports_itself_back():
    assert cycles(package_imports()) == []


def test_no_subpackage_imports_itself_back():
    assert cycles(package_graph(package_imports())) == []


def test_every_import_goes_down_the_layers_of_the_architecture():
    assert layering().violations(package_imports()) == []


def test_the_layers_table_places_every_unit_and_allows_no_cycle():
    layers = layering()
    units = {layers.unit(module) for module in package_imports()} - {SHARED}
    assert sorted(units - set(layers.allowed)) == []  # a new subpackage or module gets its row
    assert sorted(set(layers.allowed) - units) == []  # no row for a unit that is gone
    assert cycles(layers.allowed) == []

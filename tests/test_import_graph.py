"""No import cycles, between processkit's modules or between its subpackages.

Every import counts: module-level, lazy (inside a function) and ``TYPE_CHECKING`` alike. A lazy
import only postpones a cycle to the first call, and a type-only one still ties the two
modules' designs together, so neither is an accepted way out. The graph is read from the
sources with ``ast`` (nothing is imported), so the test sees every branch, not just the ones
a run happens to take.
"""

from __future__ import annotations

import ast
from pathlib import Path

import processkit

PACKAGE = Path(processkit.__file__).parent
# (importer package, imported package) edges tolerated for now, each with the reason.
KNOWN_PACKAGE_EDGES = {}


def module_name(path: Path) -> str:
    parts = ["processkit", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def extension_modules() -> set[str]:
    """The compiled modules (``processkit._native``): leaves of the graph, importing nothing."""
    return {module_name(path).split(".abi3")[0].split(".cpython")[0] for path in PACKAGE.rglob("*.so")}


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The processkit modules ``name`` imports anywhere in its body."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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


def import_graph() -> dict[str, set[str]]:
    modules = sources()
    known = set(modules) | extension_modules()
    return {name: imported_modules(name, path, known) for name, path in modules.items()}


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


def test_the_graph_sees_imports_of_every_form():
    graph = import_graph()
    assert "processkit.containment.base" in graph["processkit.containment"]  # from .base import
    assert "processkit.containment.cgroup_v2" in graph["processkit.containment"]  # lazy, from . import
    assert "processkit.errors" in graph["processkit.cli.main"]  # from ..errors import
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_itself_back():
    assert cycles(import_graph()) == []


def test_no_subpackage_imports_itself_back():
    packages: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        source = package_of(module)
        edges = {package_of(target) for target in targets} - {source}
        packages.setdefault(source, set()).update(
            target for target in edges if (source, target) not in KNOWN_PACKAGE_EDGES
        )
    assert cycles(packages) == []

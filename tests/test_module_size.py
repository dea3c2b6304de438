"""No module of the package over 400 lines: a module that grows past it has taken on a second job,
and the layout (docs/architecture.md, one job per module) stops showing the architecture. The
limit is the design card's; the test names every module over it, so a split is asked for at the
change that crossed it, not found later."""

from __future__ import annotations

from pathlib import Path

import processkit

LIMIT = 400


def lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


def over(root: Path, limit: int = LIMIT) -> dict[str, int]:
    """Each module under ``root`` with more than ``limit`` lines, by its path below ``root``."""
    counts = {str(path.relative_to(root)): lines(path) for path in root.rglob("*.py")}
    return {name: count for name, count in counts.items() if count > limit}


def test_no_module_of_the_package_is_over_the_limit():
    assert over(Path(processkit.__file__).parent) == {}


def test_a_module_over_the_limit_is_named(tmp_path):
    (tmp_path / "small.py").write_text("x = 1\n" * LIMIT)
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "large.py").write_text("x = 1\n" * (LIMIT + 1))
    assert over(tmp_path) == {"inner/large.py": LIMIT + 1}

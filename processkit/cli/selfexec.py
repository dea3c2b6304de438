"""How to start this very program again: the same interpreter, entered the way the current
process was (the console script, or ``python -m processkit``), so a detached copy or a scratch
run executes exactly the code that launched it."""

from __future__ import annotations

import os
import sys


def program() -> list[str]:
    """The argv prefix that re-runs processkit-cli."""
    entered_as_module = getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", None)
    script = sys.argv[0] if sys.argv else ""
    if entered_as_module != "processkit.__main__" and script and os.path.isfile(script):
        return [sys.executable, os.path.abspath(script)]
    return [sys.executable, "-m", "processkit"]

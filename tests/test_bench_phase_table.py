"""Every phase ``bench/api_overhead.py --phases`` names is a function of this tree: a row for
one removed (``inbound.strays``) printed a phase that was never timed, as if it took nothing."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "api_overhead.py"


def test_each_phase_the_table_names_is_a_function_of_this_tree():
    spec = importlib.util.spec_from_file_location("api_overhead", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    missing = []
    for module, holder, name, label in script.PHASES:
        owner = importlib.import_module(module)
        owner = getattr(owner, holder) if holder else owner
        if not callable(getattr(owner, name, None)):
            missing.append(label)
    assert missing == []

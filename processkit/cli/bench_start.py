"""``bench``'s step before its modules run: the perf helper forked (``benchmark/perf_switch.py``).

The launcher (``cli/quickimport.install``) calls the ``start`` of a command's ``cli/<command>_start.py``,
where the command has one, once the command's bundle is read and before its modules run; it names
no command's helper itself. ``bench``'s forks the helper that waits out the kernel's grace period
for the per-task perf switch beside the start-up (~10 ms earlier than ``cli/bench.py`` would: the
figures in bench/README.md, "bench's fixed cost"); ``cli/bench.py`` still calls it for a ``bench``
started otherwise, where it does nothing once the helper exists.
"""

from ..benchmark.perf_switch import turn_on as start

__all__ = ["start"]

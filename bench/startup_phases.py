"""The launcher's steps for a plain ``run``, stopped after one of them: what each step of a run's
start-up costs, counted from outside by an instruction counter or ``perf stat``.

Run it with the interpreter of an environment processkit is installed in (a regular install, its
run bundle written once), from a directory of its own (a script's directory is first on
``sys.path``, and a large or changing listing there moves the counts):

    cd "$(mktemp -d)"
    for step in 0 1 2 3 4 5; do
      valgrind --tool=callgrind --callgrind-out-file=/dev/null X/bin/python /path/to/bench/startup_phases.py $step
    done

Steps: 0 the interpreter and this script; 1 ``quickimport`` imported (with the package and
``processkit.cli``); 2 the bundle mapped and unmarshalled; 3 its modules run (the launcher's
``install()`` whole); 4 the CLI and ``run``'s module imported, just before the engine; 5 the C
module loaded as well (the run's spawn loads it; a launcher that maps its bundle through it has
already), so that trees which load it at different steps compare at this one. The run itself is
not stopped (the native spawn's shared-memory clone is one no
instruction counter follows); time it with ``bench/side_by_side.py``. Each step is the
launcher's own code (``processkit/cli/processkit-cli``), so the differences between steps are
what each costs a run.
"""

import gc
import os
import sys

STOP = int(sys.argv[1]) if len(sys.argv) > 1 else 5
if STOP == 0:
    os._exit(0)
gc.set_threshold(16_000)  # as the launcher does (cli/main.py's COLLECT_AFTER_ALLOCATIONS)
del sys.path[0]
sys.argv = ["processkit-cli", "run", "--jsonl", os.path.join(os.getcwd(), "phases.jsonl"), "--", "true"]
from processkit.cli import quickimport  # noqa: E402

if STOP == 1:
    os._exit(0)
if STOP == 2:
    quickimport._preload = lambda: None  # the bundle read, its modules not run
quickimport.install()
if STOP <= 3:
    os._exit(0)
from processkit.cli import main, run  # noqa: E402, F401

if STOP <= 4:
    os._exit(0)
from processkit import native  # noqa: E402

native.module()
os._exit(0)

"""The subcommands: each one's module and summary (``COMMANDS``), and what a command may return
to ``main`` beyond an exit code.

A table of names, not of imports: ``main`` imports only the module of the command being run, and
``parsers`` every module when the whole CLI is described. ``tests/test_import_graph.py`` reads the
table, so each module named here is an import of ``main`` in the graph the layering is checked on.
"""

from __future__ import annotations

from .. import signum

# subcommand -> (module, one-line summary)
COMMANDS = {
    "run": ("processkit.cli.run", "run one command inside a containment boundary"),
    "list": ("processkit.cli.registry", "list the registered runs and their health"),
    "inspect": ("processkit.cli.control", "show a live run's members and metadata"),
    "cancel": ("processkit.cli.control", "stop a live run gracefully (it exits 108)"),
    "kill": (
        "processkit.cli.control",
        "hard-kill a live run (it exits 109; one already stopping keeps that stop's code)",
    ),
    "attest": ("processkit.cli.control", "ask a run whether the calling process is inside it"),
    "wait": ("processkit.cli.registry", "wait until runs are no longer live"),
    "prune": ("processkit.cli.registry", "remove entries left by runners that died"),
    "events": ("processkit.cli.events", "read a run's JSONL events back: rendered, raw, followed or validated"),
    "bench": (
        "processkit.cli.bench",
        "benchmark commands: contained runs, whole-tree CPU and memory, hyperfine's exports",
    ),
    "report": ("processkit.cli.report", "render event streams as an HTML page: one run, or an index of many"),
    "probe": ("processkit.cli.probe", "report this binary's compatibility surface (no side effects)"),
    "batch": ("processkit.cli.batch", "run a JSONL manifest of jobs from one process, each a full run"),
    "doctor": ("processkit.cli.doctor", "qualify this host with a real scratch run"),
    "completion": ("processkit.cli.completion", "print a shell completion script (bash, zsh or fish)"),
}

# The commands that run something: only these are refused under an open-file limit too low for a
# run (``fdlimit.start_with_room``); the others answer with what the limit allows.
RUNNING_COMMANDS = ("run", "batch", "bench")

# What a subcommand returns to end by SIGINT once it has released everything (``batch`` stopped
# by Ctrl-C): a shell running it in a loop then sees the signal, 130, and stops its loop, as it
# does for hyperfine, instead of taking an exit code as the signal handled.
DIE_BY_SIGINT = -signum.SIGINT

"""The classes a plain ``run`` makes at start-up and never uses: what its launcher builds for
nothing (each class ~3-9 us: ``type_new``'s slot fix-ups, a record's ``__init_subclass__``), read
the same on a busy machine (issue 49).

The launcher's steps as ``processkit-cli`` takes them (``bench/startup_phases.py``'s), then the
run under ``sys.setprofile``: a class counts as used when a Python call of the run has an
instance or the class itself as its ``self`` or ``cls`` (its MRO counts with it). Classes used
only as namespaces of constants, or whose instances are made and read without a Python call of
theirs, read as unused too: read the list, do not take it whole. Run it with the interpreter of
a regular install whose run bundle is written, from a directory of its own:

    cd "$(mktemp -d)"
    X/bin/python /path/to/bench/startup_classes.py

Prints the count of the package's module-level classes after the launcher's ``install()``, then
one line an unused class: its module, its name, and ``exception`` for an exception class.
"""

import gc
import os
import sys

gc.set_threshold(16_000)  # as the launcher does
del sys.path[0]
sys.argv = ["processkit-cli", "run", "--jsonl", os.path.join(os.getcwd(), "classes.jsonl"), "--", "true"]
from processkit.cli import quickimport  # noqa: E402

quickimport.install()
quickimport.save = lambda: None  # the bundle as it was: every process of a series reads the same
made = {
    value: name
    for name, module in list(sys.modules.items())
    if name.startswith("processkit")
    for value in vars(module).values()
    if isinstance(value, type) and value.__module__ == name
}
seen: set = set()


def _call(frame, event, arg) -> None:
    if event == "call":
        bound = frame.f_locals.get("self", frame.f_locals.get("cls"))
        if bound is not None:
            seen.add(bound if isinstance(bound, type) else type(bound))


def _exit(code: int) -> None:
    sys.setprofile(None)
    used = {base for cls in seen for base in getattr(cls, "__mro__", ())}
    lines = [f"classes {len(made)}"]
    for cls, name in sorted(made.items(), key=lambda item: (item[1], item[0].__qualname__)):
        if cls not in used:
            lines.append(f"{name} {cls.__qualname__}{' exception' if issubclass(cls, BaseException) else ''}")
    os.write(1, ("\n".join(lines) + "\n").encode())
    exit_now(code)


exit_now = os._exit
os._exit = _exit
from processkit.cli import main  # noqa: E402

sys.setprofile(_call)
main.entry()

"""The byte-code instructions a plain ``run`` executes, per function: a Python-level profile that,
unlike a timer's, reads the same on a busy machine (issue 49).

The launcher's steps as ``processkit-cli`` takes them (``bench/startup_phases.py``'s), under a
``sys.settrace`` that counts each function's ``opcode`` events: ``install`` counts the launcher's
finder and its bundle's modules run; ``run`` counts ``entry()``, the run itself, parse to exit
(the sweep's share grows with the other runners' groups the host holds). Run it with the
interpreter of a regular install whose run bundle is written, from a directory of its own:

    cd "$(mktemp -d)"
    X/bin/python /path/to/bench/startup_opcodes.py install > install.txt
    X/bin/python /path/to/bench/startup_opcodes.py run > run.txt

Each output starts with the total, then one line a function: its count, file, first line, name.
"""

import gc
import os
import sys

PHASE = sys.argv[1] if len(sys.argv) > 1 else "run"
gc.set_threshold(16_000)  # as the launcher does
del sys.path[0]
sys.argv = ["processkit-cli", "run", "--jsonl", os.path.join(os.getcwd(), "opcodes.jsonl"), "--", "true"]
counts: dict = {}


def _opcode(frame, event, arg):
    if event == "opcode":
        counts[frame.f_code] = counts.get(frame.f_code, 0) + 1
    return _opcode


def _call(frame, event, arg):
    frame.f_trace_opcodes = True
    return _opcode


def _report() -> None:
    sys.settrace(None)
    lines = [f"total {sum(counts.values())}"]
    for code, count in sorted(counts.items(), key=lambda item: -item[1]):
        where = code.co_filename.rpartition("site-packages/")[2]
        lines.append(f"{count:7d} {where}:{code.co_firstlineno} {getattr(code, 'co_qualname', code.co_name)}")
    os.write(1, ("\n".join(lines) + "\n").encode())


if PHASE == "install":
    sys.settrace(_call)
from processkit.cli import quickimport  # noqa: E402

quickimport.install()
from processkit.cli import main  # noqa: E402

if PHASE == "install":
    _report()
    os._exit(0)
quickimport.save = lambda: None  # the bundle as it was: every process of a series reads the same
exit_now = os._exit


def _exit(code: int) -> None:
    _report()
    exit_now(code)


os._exit = _exit
sys.settrace(_call)
main.entry()

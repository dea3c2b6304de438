"""Writes the man pages in man/man1 from the CLI's own parsers (argparse-manpage), or checks
that the committed pages equal a fresh generation (``--check``; the test suite does this), so
they cannot drift from what the CLI accepts.

    python man/generate.py           # rewrite man/man1/*.1 after changing a parser
    python man/generate.py --check   # exit 1, naming the stale pages, if any differ

The pages are installed with the package into <prefix>/share/man/man1 (setup.py data_files).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from argparse_manpage.manpage import Manpage

from processkit.version import __version__
from processkit.cli.main import COMMANDS
from processkit.cli.parsers import PROG, parser_for, root_parser
from processkit.errors import RESERVED_BAND, STDOUT_CLOSED, exit_codes
from processkit.registry.location import ENV_DIR

PAGES = Path(__file__).resolve().parent / "man1"
BACKSLASH = "\\"
WIDTH = 78  # fixed, so a page does not depend on the terminal it was generated in


RUN_LEAD = [
    "The child's own exit code when the run ended with it (128+N when it died of signal N);",
    "the last JSONL line, runner_exit, says which through its source.",
]
# A command whose exit is never one child's says what it is instead (docs/batch.md, "Exit").
LEADS = {
    "batch": [
        "0 when every job exited 0 (or there was none to run); 117, batch_failed, when a job did",
        "not exit 0 or was not started, whatever the jobs' own codes (not GNU parallel's count of",
        "failed jobs, make's 2 or nextest's 100); 107 when stopped by SIGTERM or SIGHUP, and death",
        "by SIGINT when stopped by Ctrl\\-C; 100 for a bad manifest or flag; 111 when",
        "the manifest cannot be read, \\-\\-out cannot be used, the \\-\\-junit report cannot be",
        "written (no job failed) or a job's line cannot be written into OUT/summary.jsonl.",
        "Each job's own exit is in OUT/summary.jsonl.",
    ],
    # docs/bench.md, "Exit codes".
    "bench": [
        "0 when every command has statistics; 118, bench_failed, when a run exits non\\-zero",
        "without \\-\\-ignore\\-failure, a command cannot be started, a setup, prepare, conclude",
        "or cleanup command fails, the shell's start\\-up cannot be measured, or too few of a",
        "command's runs finished (the child's own code is never relayed: there are many",
        "children); 119, bench_regressed, with \\-\\-fail\\-if\\-slower PCT when a command is",
        "significantly slower than its \\-\\-baseline by more than PCT %; 107 when stopped by",
        "SIGTERM or SIGHUP, and death by SIGINT when stopped by Ctrl\\-C; 100 for usage errors;",
        "111 when a \\-\\-baseline cannot be read, an export or stdout cannot be written, or two",
        "exports name one file; 114 for a \\-\\-baseline that is not an export's shape.",
    ],
}


def _exit_status(command: str | None) -> str:
    lines = [
        *LEADS.get(command or "", RUN_LEAD),
        f"A client whose stdout reader went away ends with {STDOUT_CLOSED}.",
        "The runner's own endings use the reserved band",
        f"{RESERVED_BAND.start}\\(en{RESERVED_BAND.stop - 1}:",
    ]
    for code, labels in exit_codes().items():
        lines += [".TP", f".B {code}", ", ".join(labels)]
    return "\n".join(lines)


def _files() -> str:
    return "\n".join(
        [
            ".TP",
            f".I ${ENV_DIR}",
            "The per\\-user registry of live runs, when set; else",
            ".IR $XDG_RUNTIME_DIR/processkit\\-cli/runs ,",
            "else",
            ".IR ~/.local/state/processkit\\-cli/runs .",
            ".TP",
            ".I the \\-\\-jsonl FILE",
            "The run's versioned lifecycle events, one JSON object a line, ending with runner_exit;",
            ".B processkit\\-cli events",
            "reads it back and",
            ".B processkit\\-cli probe \\-\\-json \\-\\-print\\-schema",
            "prints its JSON Schema.",
            ".TP",
            ".I the \\-\\-capture\\-dir DIR",
            "stdout.log and stderr.log, each capped by \\-\\-capture\\-max\\-bytes, with their SHA\\-256 in the JSONL.",
        ]
    )


def _see_also(exclude: str) -> str:
    names = [PROG] + [f"{PROG}-{command}" for command in COMMANDS]
    return ",\n".join(f".BR {name} (1)" for name in names if name != exclude)


def _form(form: str) -> str:
    """One usage form as argparse-manpage writes a lone one: the program in bold, then its words."""
    program, _, rest = form.strip().partition(" ")
    return f".B {program.replace('-', BACKSLASH + '-')}\n{rest}"


def _page(
    parser: argparse.ArgumentParser, name: str, summary: str, extra: list[tuple[str, str]], command: str | None = None
) -> str:
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
    page = Manpage(
        parser, _data={"project_name": "processkit", "version": __version__, "manual_title": "processkit manual"}
    )
    page.prog, page.description, page.date = name, summary, ""
    forms = parser.format_usage().split(":", 1)[-1].strip().split("\n")
    if len(forms) > 1:  # batch's MANIFEST form and template form: a line each, as its --help has them
        page.add_section("synopsis", ">", "\n.br\n".join(_form(form) for form in forms))
    for heading, content in extra + [
        ("exit status", _exit_status(command)),
        ("files", _files()),
        ("see also", _see_also(name)),
    ]:
        page.add_section(heading, ">", content)
    return str(page)


def pages() -> dict[str, str]:
    """File name -> roff text, for processkit-cli.1 and one page per subcommand."""
    commands = "\n".join(f".TP\n.BR {PROG}\\-{command} (1)\n{summary}" for command, (_, summary) in COMMANDS.items())
    found = {
        f"{PROG}.1": _page(root_parser(), PROG, "a contained, bounded, exact process runner", [("commands", commands)])
    }
    for command, (_, summary) in COMMANDS.items():
        found[f"{PROG}-{command}.1"] = _page(parser_for(command), f"{PROG}-{command}", summary, [], command)
    return found


def stale() -> list[str]:
    """The committed pages that differ from a fresh generation, or are missing or extra."""
    fresh = pages()
    committed = {path.name for path in PAGES.glob("*.1")}
    differing = [
        name for name, text in fresh.items() if not (PAGES / name).is_file() or (PAGES / name).read_text() != text
    ]
    return sorted(differing + sorted(committed - set(fresh)))


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        names = stale()
        for name in names:
            print(f"stale man page: man/man1/{name} (run: python man/generate.py)", file=sys.stderr)
        return 1 if names else 0
    PAGES.mkdir(exist_ok=True)
    for path in PAGES.glob("*.1"):
        path.unlink()
    for name, text in pages().items():
        (PAGES / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

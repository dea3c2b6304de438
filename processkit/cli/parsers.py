"""Every subcommand's argparse parser, gathered in one place for what describes the CLI as a
whole (shell completion, the man pages), so none of it keeps its own list of flags.

A module serving one subcommand exposes ``build_parser()``; one serving several exposes
``PARSERS``, a map from subcommand to builder. Nothing here is on the path of a normal command:
each module is imported only when its parser is asked for.
"""

from __future__ import annotations

import importlib

from ..version import __version__
from .commands import COMMANDS
from .parsing import Parser

PROG = "processkit-cli"


def parser_for(command: str) -> Parser:
    """A fresh parser for ``command``, exactly the one the subcommand parses its argv with."""
    module = importlib.import_module(COMMANDS[command][0])
    builders = getattr(module, "PARSERS", None)
    parser = builders[command]() if builders is not None else module.build_parser()
    if parser.description is None:
        parser.description = COMMANDS[command][1]
    return parser


def all_parsers() -> dict[str, Parser]:
    """Every subcommand's parser, in ``COMMANDS`` order."""
    return {command: parser_for(command) for command in COMMANDS}


def root_parser() -> Parser:
    """``processkit-cli`` itself: the global options, no subcommands."""
    root = Parser(
        prog=PROG,
        usage=f"{PROG} [--error-format human|json] <command> [options]",
        description="Run one command, shell-free, inside a containment boundary; inspect and control live runs.",
    )
    root.add_argument("-V", "--version", action="version", version=f"{PROG} {__version__}")
    return root


def command_tree(parsers: dict[str, Parser] | None = None) -> Parser:
    """One argparse tree, ``processkit-cli`` with every subcommand's real parser beneath it
    (``parsers``, as ``all_parsers()`` gives them, when the caller has annotated them).

    Only for describing the CLI (completion, man pages); ``main`` dispatches by hand.
    """
    root = root_parser()
    commands = root.add_subparsers(dest="command", metavar="<command>", title="commands")
    for command, parser in (parsers or all_parsers()).items():
        commands.add_parser(command, help=COMMANDS[command][1])
        commands.choices[command] = parser
    return root

"""argparse, adapted to the reference's CLI contract.

Usage errors raise a usage Failure (exit 100) instead of argparse's exit 2; abbreviations are
off; a flag that is not declared repeatable may be given only once (clap's default).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import usage
from ..grammar import REPEAT, SWITCH, Option, path
from .options import ERROR_FORMAT_HELP, ERROR_FORMATS

TYPE_CHECKING = False
if TYPE_CHECKING:  # ``typing`` costs a subcommand's start-up 2.5 ms for one annotation
    from typing import NoReturn


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter asks ``shutil`` for the width, an import every run would pay for
    although only ``--help`` needs it."""

    def __init__(self, prog: str):
        try:
            width = os.get_terminal_size(sys.stdout.fileno()).columns - 2
        except (OSError, ValueError):
            width = 78
        super().__init__(prog, width=width)


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        self.valued: set[str] = set()  # the flags declared to take a value (``takes_value``)
        kwargs.setdefault("formatter_class", _HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("exit_on_error", False)
        super().__init__(*args, **kwargs)
        # main takes the global --error-format out of argv before any subcommand parses it, so
        # this entry only documents it in every subcommand's --help, as the reference's does.
        self.add_argument_group("global options").add_argument(
            "--error-format",
            metavar="<human|json>",
            choices=ERROR_FORMATS,
            default=argparse.SUPPRESS,
            help=ERROR_FORMAT_HELP,
        )

    def add_argument(self, *args, **kwargs):
        """argparse's, each flag that takes a value kept by its names: argparse's own table of
        them is private."""
        return self._noted(super().add_argument(*args, **kwargs))

    def add_argument_group(self, *args, **kwargs):
        """argparse's, its flags kept as the parser's own are (``_noting``)."""
        return self._noting(super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, *args, **kwargs):
        """argparse's, its flags kept as the parser's own are (``_noting``)."""
        return self._noting(super().add_mutually_exclusive_group(*args, **kwargs))

    def _noting(self, group):
        """``group`` with its ``add_argument`` (a group's own, not the parser's) noting each flag."""
        add = group.add_argument
        group.add_argument = lambda *given, **named: self._noted(add(*given, **named))
        return group

    def _noted(self, action: argparse.Action) -> argparse.Action:
        if action.nargs != 0:
            self.valued.update(action.option_strings)
        return action

    def takes_value(self, word: str) -> bool:
        """Whether ``word`` is a flag of this parser's that takes the next word as its value."""
        return word in self.valued

    def error(self, message: str) -> NoReturn:
        raise usage(message, hint=self.format_usage().rstrip())

    def _get_values(self, action, arg_strings):
        """A flag's value "--" (``--cwd=--``) is that text, as clap has it: argparse would drop
        it as the separator and hand the action an empty list."""
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)

    def add_options(self, table: tuple[Option, ...]) -> None:
        """Declare each option of ``table`` (``grammar.Option``), in order."""
        for option in table:
            if option.kind == SWITCH:
                self.add_argument(option.flag, action=OnceFlag, help=option.help)
            elif option.kind == REPEAT:
                self.add_argument(option.flag, action="append", default=[], metavar=option.metavar, help=option.help)
            else:
                self.add_argument(
                    option.flag, action=Once, metavar=option.metavar, help=option.help, choices=option.choices
                )

    def parse(self, argv: list[str]) -> argparse.Namespace:
        try:
            return self.parse_args(argv)
        except argparse.ArgumentError as exc:
            self.error(str(exc))


class Once(argparse.Action):
    """Store a value; a second occurrence is a usage error."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, f"_seen_{self.dest}", False):
            parser.error(f"the argument '{option_string}' cannot be used multiple times")
        setattr(namespace, f"_seen_{self.dest}", True)
        setattr(namespace, self.dest, values)


class OncePath(Once):
    """``Once``, its value a path (each of a positional's, with ``nargs``): an empty one names
    none, a usage error naming the flag (a positional by ``<METAVAR>``), as ``run``'s paths."""

    def __call__(self, parser, namespace, values, option_string=None):
        name = option_string or f"<{self.metavar}>"
        for value in values if isinstance(values, list) else [values]:
            path(value, name)
        super().__call__(parser, namespace, values, option_string)


class OnceFlag(Once):
    def __init__(self, option_strings, dest, default=False, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, True, option_string)

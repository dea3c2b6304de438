"""How a run is described, wherever it is described: below the CLI, the API, the batch manifest
and the benchmark, stdlib-only and on the run path (docs/architecture.md's import rule).

- this package: an option table's parts, the ``Option`` (one long flag and the keyword it is in
  the API), its kinds, and ``Naming``, how a describer names an option in its messages;
- ``values``: the value grammars (a count, a duration, a size, ... and the text rule);
- ``run``: ``run``'s option table and the one construction of a ``RunSpec`` from what a describer
  was given;
- ``keywords``: a run described by Python values (the API's keywords, a manifest line's keys).

One table describes a subcommand's options to every reader: argparse and the CLI's direct parser
read the flags, the API and a manifest the keywords, and each option's ``read`` is the value
grammar its values go through, whoever gives them.
"""

from __future__ import annotations

from ..errors import usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# An option's kind: how often it may be given and whether it takes a value.
VALUE = "value"  # one value, given at most once
SWITCH = "switch"  # no value, given at most once
REPEAT = "repeat"  # one value per occurrence, collected in order


class Option:
    """One long flag: ``--name`` of ``kind``, documented by ``metavar``, ``help`` and ``choices``;
    ``keyword``: its name in the API and a manifest (by default its ``dest``); ``read``: the
    grammar of one value, ``read(value, name)``, None for a path (taken as it is, unless empty)."""

    __slots__ = ("flag", "dest", "kind", "metavar", "help", "choices", "keyword", "read")

    def __init__(
        self,
        flag: str,
        kind: str,
        *,
        metavar: str | None = None,
        help: str | None = None,
        choices: tuple[str, ...] | None = None,
        keyword: str | None = None,
        read: Callable[[Any, str], Any] | None = None,
    ):
        self.flag = flag
        self.dest = flag[2:].replace("-", "_")  # argparse's name for its value
        self.kind = kind
        self.metavar = metavar
        self.help = help
        self.choices = choices
        self.keyword = keyword or self.dest
        self.read = read

    def default(self) -> object:
        """Its value when it is not given, as argparse's namespace has it."""
        return None if self.kind == VALUE else [] if self.kind == REPEAT else False


class Naming:
    """How a describer names an option in a message, in its own vocabulary: the CLI by the flag
    (``--capture-keep``), the API by the keyword (``capture_keep=``), a manifest line by its key
    (``capture_keep``). ``given`` names it with a value, as the caller would have written it."""

    __slots__ = ("_flags", "_suffix")

    def __init__(self, *, flags: bool, suffix: str = ""):
        self._flags = flags
        self._suffix = suffix

    def __call__(self, option: Option) -> str:
        return option.flag if self._flags else option.keyword + self._suffix

    def given(self, option: Option, value: str) -> str:
        return f"{option.flag} {value}" if self._flags else f"{option.keyword}={value}"


FLAGS = Naming(flags=True)
KEYWORDS = Naming(flags=False, suffix="=")
KEYS = Naming(flags=False)


def path(value, name: str):
    """A path (an option or argument with no grammar of its own) as given; an empty one names
    none, refused as the reference's parser refuses an empty ``PathBuf`` (here, not in ``values``:
    every run reads its ``--jsonl``, and a plain run loads no ``values``)."""
    if value == "":
        raise usage(f"invalid value '' for '{name}': expected a path (an empty one names none)")
    return value

"""A manifest line's scheduling keys, which are no ``run`` keyword: what a job waits for
(``needs``), how much of the batch it takes (``slots``, ``group``), what its result depends on
(``inputs``), and where its slot number goes (``slot_args``). Read here, off the line, before the
rest of it goes through the run grammar, so the manifest reader gains one call and the keys one
record (``Plan``) that the scheduler (``schedule``) and ``--resume`` (``inputs``) read. And the
line's keys as a whole: the run keywords a line may not give (``REFUSED``), and every key it may
(``line_keys``).
"""

from __future__ import annotations

from ..errors import usage
from ..plain import Plain
from ..rundir import BATCH_LABEL
from ..text import cut

MAX_SLOTS = 4096  # as --jobs: a job that asks for more than the batch has gets them all
MAX_LISTED = 10_000  # needs, inputs or slot_args on one line
KEYS = ("needs", "slots", "group", "inputs", "slot_args")
# The run keywords a line may not give, each with why: the batch decides where each job's
# stream and capture go, and its children never share the batch's stdin or terminal.
REFUSED = {
    "jsonl": "each job's stream is <out>/<id>/events.jsonl",
    "capture_dir": "each job's capture is <out>/<id>/capture/",
    "inherit_stdin": "a job never reads the batch's stdin",
    "inherit_stdio": "a job never shares the batch's terminal",
    "pty": "a job never gets a terminal",
    "echo": "a job's output goes to its capture (see --show-output)",
}


def refuse_own_label(labels, flag: bool) -> None:
    """A job's ``batch`` label refused (100), on one short line wherever it is given: every job
    carries ``batch=<the batch's id>``, which ``list --label``, ``wait --label`` and a Dask client's
    read-back go by, and a user's label of that key replaced it on every job. ``labels``: (key,
    value) pairs; ``flag``: given by ``--label`` (named so, before any job; a value None: no
    ``=``), else a line's ``labels`` key (its line named by the caller). A value is cut once: the
    way out repeats it only when it was shown whole and printable (a line's control characters
    are shown escaped, which a shell would not read back), else says ``group=...``; repeated, it is
    shell-quoted where a shell would misread it (``group='night ly'``), so it can be pasted."""
    for key, value in labels:
        if key != BATCH_LABEL:
            continue
        if not flag:
            given, other = "labels key batch", '"group"'
        else:
            typed = key if value is None else f"{key}={value}"
            given = f"--label {cut(typed)}"
            if value and value.isprintable() and cut(typed) == typed:  # as shown, pasteable
                import shlex  # a refusal's only

                other = f"group={shlex.quote(value)}"
            else:
                other = "group=..."
        raise usage(f"{given}: batch=<batch id> is the batch's own label on every job; use another key, e.g. {other}")


def line_keys() -> list[str]:
    """Every key a manifest line may give: its own (``args``, ``id``, ``secret``), the scheduling
    keys and the run keywords not ``REFUSED``: what a "did you mean" may suggest (asked only
    for a key that is none of them)."""
    from ..grammar.keywords import BY_KEYWORD

    return ["args", "id", "secret", *KEYS, *(key for key in BY_KEYWORD if key not in REFUSED)]


class Plan(Plain):
    """A job's scheduling keys; the defaults are a plain job's (no need, one slot, no group)."""

    needs: tuple[str, ...] = ()
    slots: int = 1
    group: str | None = None
    inputs: tuple[str, ...] = ()
    slot_args: tuple[int, ...] = ()


PLAIN = Plan()


def take(options: dict, arg_count: int, job_id_rule) -> Plan:
    """The scheduling keys popped off ``options`` (a line's keys), each checked; a ValueError
    names the first bad one. ``job_id_rule``: the id grammar (a compiled pattern) a need and a
    group name follow."""
    if options.keys().isdisjoint(KEYS):  # most lines: one C call, not a generator's step per key
        return PLAIN
    needs = _strings(options.pop("needs", []), "needs", "an id")
    for need in needs:
        if not job_id_rule.fullmatch(need):
            raise ValueError(f"'needs' names {need[:40]!r}, which is no job id")
    if len(set(needs)) != len(needs):
        raise ValueError("'needs' names a job twice")
    slots = options.pop("slots", 1)
    if type(slots) is not int or not 1 <= slots <= MAX_SLOTS:
        raise ValueError(f"'slots' is a whole number from 1 to {MAX_SLOTS}")
    group = options.pop("group", None)
    if group is not None and (not isinstance(group, str) or not job_id_rule.fullmatch(group)):
        raise ValueError(
            "'group' is a name of 1 to 128 characters from [A-Za-z0-9._-], starting with a letter or digit"
        )
    inputs = _strings(options.pop("inputs", []), "inputs", "a path or a glob")
    if any(not path or "\0" in path for path in inputs):
        raise ValueError("'inputs' holds an empty path or a NUL")
    slot_args = options.pop("slot_args", [])
    if not isinstance(slot_args, list) or any(type(i) is not int or not 0 <= i < arg_count for i in slot_args):
        raise ValueError(f"'slot_args' is a list of indexes into args (0 to {arg_count - 1})")
    return Plan(tuple(needs), slots, group, tuple(inputs), tuple(slot_args))


def _strings(value, key: str, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"'{key}' is a list of strings, each {what}")
    if len(value) > MAX_LISTED:
        raise ValueError(f"'{key}' lists more than {MAX_LISTED} items")
    return value


def with_slot(args: list[str], plan: Plan, slot: int) -> list[str]:
    """``args`` with ``{%}`` in each element ``slot_args`` names replaced by the job's slot."""
    if not plan.slot_args:
        return args
    filled = list(args)
    for index in plan.slot_args:
        filled[index] = filled[index].replace("{%}", str(slot))
    return filled

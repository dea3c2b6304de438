"""A ``RunSpec`` from the options a describer gave, checked in one place.

Every describer of a run (the ``run`` command line, the API's keywords, a manifest line) hands
``build`` the options it was given, by ``dest``: the text or typed value of each option given,
a list for a repeatable one, True for a switch; an option not given is absent. ``build`` checks
which options were given against each other (what conflicts, what needs what), reads each value
through its grammar (``Option.read``), checks the run id variable against ``env`` and assembles
the frozen spec.
Each failure is a usage ``Failure`` naming the options as the describer's ``Naming`` does.
"""

from __future__ import annotations

from ..errors import usage
from ..spec import DEFAULT_CAPTURE_MAX_BYTES, EnvPlan, Limits, OverflowPolicy, RunSpec, StdinMode, new_run_id
from .run_options import BY_DEST, CONFLICTS, REQUIRES
from .table import REPEAT, SWITCH

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Any

    from .table import Naming


def check_given(given: Collection[str], name: Naming) -> None:
    """Which options were given, checked against each other: the declared conflicts first, then
    what an option needs, then the stream every run writes (``--jsonl``), all before any value
    is read (so every describer reports the same first error). The CLI calls it before it reads
    a command from stdin, ``build`` again on whatever it is given."""
    for dest, others in CONFLICTS:
        if dest in given:
            for other in others:
                if other in given:
                    raise usage(f"the argument '{name(BY_DEST[dest])}' cannot be used with '{name(BY_DEST[other])}'")
    for dest, needed in REQUIRES:
        if dest in given and needed not in given:
            raise usage(f"the argument '{name(BY_DEST[dest])}' requires '{name(BY_DEST[needed])}'")
    if "jsonl" not in given:
        jsonl = BY_DEST["jsonl"]
        raise usage(f"the required argument '{name.given(jsonl, f'<{jsonl.metavar}>')}' was not provided")


def read(given: dict[str, object], name: Naming) -> dict[str, Any]:
    """Each given option's value through its grammar, in the table's order."""
    typed: dict[str, Any] = {}
    for dest, option in BY_DEST.items():
        if dest not in given:
            continue
        value: Any = given[dest]
        grammar = option.read
        if grammar is None or option.kind == SWITCH:
            typed[dest] = value
        elif option.kind == REPEAT:
            shown = name(option)
            typed[dest] = [grammar(item, shown) for item in value]
        else:
            typed[dest] = grammar(value, name(option))
    return typed


def build(argv: tuple[str, ...], given: dict[str, object], name: Naming, *, ready_fd: int | None = None) -> RunSpec:
    """The RunSpec of ``argv`` under the ``given`` options (see the module's docstring)."""
    unknown = given.keys() - BY_DEST.keys()
    if unknown:
        raise ValueError(f"not a run option: {sorted(unknown)[0]}")  # a describer's own bug
    check_given(given, name)
    values = read(given, name)
    assignments = tuple(values.get("env", ()))
    run_id_key = values.get("run_id_env")
    if run_id_key is not None and any(key == run_id_key for key, _ in assignments):
        rid, env = BY_DEST["run_id_env"], BY_DEST["env"]
        raise usage(
            f"'{name.given(rid, run_id_key)}' conflicts with '{name.given(env, f'{run_id_key}=...')}': "
            "the run id variable is set by the runner"
        )
    inherit_stdio = "inherit_stdio" in values
    stdin = StdinMode.NULL
    if inherit_stdio or "inherit_stdin" in values:
        stdin = StdinMode.INHERIT
    elif "stdin_file" in values:
        stdin = StdinMode.FILE
    run_id = values.get("run_id")
    return RunSpec(
        argv=argv,
        jsonl=values["jsonl"],
        run_id=new_run_id() if run_id is None else run_id,
        run_id_given=run_id is not None,
        labels=tuple(sorted(dict(values.get("label", ())).items())),  # the last of a key wins
        cwd=values.get("cwd"),
        timeout_ms=values.get("timeout"),
        idle_timeout_ms=values.get("idle_timeout"),
        grace_ms=values.get("grace"),
        snapshot_interval_ms=values.get("snapshot_interval"),
        env=EnvPlan(
            clear="env_clear" in values,
            remove=tuple(values.get("env_remove", ())),
            files=tuple(values.get("env_file", ())),
            assignments=assignments,
            run_id_key=run_id_key,
        ),
        limits=Limits(
            max_memory=values.get("max_memory"),
            max_processes=values.get("max_processes"),
            cpu_quota=values.get("cpu_quota"),
        ),
        capture_dir=values.get("capture_dir"),
        capture_max_bytes=values.get("capture_max_bytes", DEFAULT_CAPTURE_MAX_BYTES),
        capture_overflow=OverflowPolicy.CANCEL
        if values.get("capture_overflow") == "cancel"
        else OverflowPolicy.TRUNCATE,
        capture_keep=values.get("capture_keep", "head"),
        stdin=stdin,
        stdin_file=values.get("stdin_file"),
        inherit_stdio=inherit_stdio,
        pty="pty" in values,
        pty_size=values.get("pty_size"),
        echo="no_echo" not in values,
        argv_raw="argv_raw" in values,
        detach="detach" in values,
        ready_fd=ready_fd,
        usage_file=values.get("usage_file"),
    )

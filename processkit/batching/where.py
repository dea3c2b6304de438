"""Where a bad job came from, as its refusal names it: a manifest's by its line (``manifest line
3``), a template's by its number (``job 3``, having no line), an API caller's list item by its
index (``jobs[2]``: a Python list, neither a manifest nor JSON). ``number`` counts from 1 in
each, as the default id ``job-N`` does."""

from __future__ import annotations

LINE, JOB, ITEM = "manifest line", "job", "jobs"


def at(what: str, number: int) -> str:
    """The job's name in a refusal: ``manifest line 3``, ``job 3``, ``jobs[2]``."""
    return f"{what}[{number - 1}]" if what == ITEM else f"{what} {number}"


def first_at(what: str, number: int) -> str:
    """Where a duplicate's first was: ``on line 1``, ``as job 1``, ``as jobs[0]``."""
    return f"on line {number}" if what == LINE else f"as {at(what, number)}"


def not_a_job(what: str, value: object) -> str:
    """A value that is no job's shape: a line is JSON, an API caller's item a Python object."""
    if what == ITEM:
        return f'a job is a mapping (dict) with "args", not {type(value).__name__}'
    return "a job is a JSON object"


def more_than(what: str, number: int, most: int) -> str:
    """A job past the most a batch runs: a manifest's line, or an item of the API caller's list."""
    return f"{at(what, number)}: the {'list' if what == ITEM else 'manifest'} has more than {most} jobs"

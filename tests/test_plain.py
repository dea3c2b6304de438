"""processkit.plain: the two value idioms every module uses (docs/architecture.md, "The run
path's import rule"): Plain and Frozen records, and Constants."""

from __future__ import annotations

import pickle

import pytest

from processkit.liveness import Health
from processkit.plain import Frozen, Plain
from processkit.spec import StdinMode


class Step(Plain):
    name: str
    tries: int = 1
    notes: list = []


class Tiny(Plain):
    """A hand-written record: its own ``__slots__`` and ``__init__``, as the engine's hot-path ones."""

    __slots__ = ("name", "parts")
    made = 0  # how many times the constructor ran

    def __init__(self, name: str, parts: list | None = None):
        type(self).made += 1
        self.name = name
        self.parts = [] if parts is None else parts


class Point(Frozen):
    x: int
    y: int = 0


class Point3(Point):
    z: int = 0


def test_a_record_takes_its_fields_in_order_or_by_name_with_defaults():
    assert Step("build") == Step(name="build", tries=1, notes=[])
    assert Step("build", 2)._asdict() == {"name": "build", "tries": 2, "notes": []}
    assert repr(Point3(1, z=3)) == "Point3(x=1, y=0, z=3)"
    assert Point3(1, 2, 3).replace(y=5) == Point3(1, 5, 3)
    for wrong in (lambda: Step(), lambda: Step("a", nam="b"), lambda: Step("a", 1, [], 4), lambda: Step("a", name="b")):
        with pytest.raises(TypeError):
            wrong()


def test_a_copy_is_shallow_and_skips_the_constructor_for_every_kind():
    """``copied`` (the service's spec changes are applied to one): an equal record of the same
    type, not the same object, its fields shared, whatever the kind: declared fields, Frozen (its own
    ``__setattr__`` does not refuse it), a hand-written ``__slots__`` record (no ``__dict__``)."""
    step = Step("build", 2)
    copy = step.copied()
    assert copy == step and copy is not step and copy.notes is step.notes
    copy.tries = 3
    assert step.tries == 2
    point = Point3(1, 2, 3)
    assert point.copied() == point and hash(point.copied()) == hash(point)
    tiny = Tiny("t", ["a"])
    made = Tiny.made
    copy_of_tiny = tiny.copied()
    assert Tiny.made == made, "the hand-written constructor ran"
    assert copy_of_tiny == tiny and copy_of_tiny is not tiny and copy_of_tiny.parts is tiny.parts
    assert not hasattr(copy_of_tiny, "__dict__")


def test_a_mutable_default_is_never_shared():
    first, second = Step("a"), Step("b")
    first.notes.append("x")
    assert second.notes == [] and Step.__dict__["notes"] == []


def test_a_mutable_record_is_not_hashable_and_a_frozen_one_is():
    with pytest.raises(TypeError):
        hash(Step("a"))
    with pytest.raises(TypeError):
        {Step("a")}  # noqa: B018
    assert len({Point(1), Point(1), Point(2)}) == 2
    assert Point(1) != Point3(1)  # the type is part of the value
    with pytest.raises(AttributeError):
        Point(1).x = 2  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(Point3(1, 2, 3))) == Point3(1, 2, 3)


def test_constants_are_listed_in_order_and_pickle_as_themselves():
    assert [health.value for health in Health.members()] == ["live", "stale", "unprobed"]
    assert StdinMode.members() == (StdinMode.NULL, StdinMode.INHERIT, StdinMode.FILE)
    assert pickle.loads(pickle.dumps(Health.STALE)) is Health.STALE

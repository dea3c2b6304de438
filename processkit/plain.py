"""Plain value classes: what ``typing.NamedTuple`` gave them (fields read by name, equality, a
repr, ``_asdict()``) without building one; and ``Constant``, what an ``enum`` member gave.

A NamedTuple needs ``typing`` (which imports ``re``) and costs its class a fifth of a millisecond
to build; the values a run makes on its way to the spawn are many, so they are plain classes
with ``__slots__`` (their fields, in order) and an ``__init__`` of their own, which is what
type checkers read.
"""

from __future__ import annotations


class Plain:
    """A value whose fields are its ``__slots__``; two values are equal when their type and fields are."""

    __slots__: tuple[str, ...] = ()

    def _asdict(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in self.__slots__))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"


class Constant:
    """One of a fixed set of named values, compared by identity (``spec.stdin is StdinMode.FILE``)
    and pickled as the same instance."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value: str):
        self.name = name
        self.value = value

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {self.value!r}>"

    def __reduce__(self):
        return (getattr, (type(self), self.name))

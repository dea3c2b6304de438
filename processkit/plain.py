"""The project's two value idioms: ``Plain`` for records, ``Constant`` for fixed named values
(and ``counter``, the one way to number things: ids, slots, tokens).

What ``dataclasses``, ``typing.NamedTuple`` and ``enum`` give (fields read by name, a
constructor, equality, a repr, pickling; identity-compared named members one can list) without
importing them: their imports (inspect, ast, re) and the code they generate per class would
cost every ``run`` milliseconds before the child starts, and these classes are on its path.

A record subclasses ``Plain`` and declares its fields as annotations, in order; a value is the
field's default (a list, dict or set default is copied per record, never shared). It gets a
constructor taking the fields in order or by name, which type checkers read through
``dataclass_transform``. A record is mutable and so not hashable; ``Frozen`` is the immutable,
hashable kind. A record that must stay tiny on the hot path may instead list its fields in
``__slots__`` and write its own ``__init__`` (the engine's do); equality, repr and ``_asdict``
are the same.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar

    from typing_extensions import Self, dataclass_transform
else:

    def dataclass_transform(**_):
        return lambda cls: cls


_COPIED = (list, dict, set)


class _Record:
    """What both kinds of record share (a type checker sees each kind as its own dataclass root)."""

    __slots__: ClassVar[tuple[str, ...]] = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}
    _fieldset: ClassVar[frozenset[str]] = frozenset()
    _fixed: ClassVar[dict[str, Any]] = {}  # the defaults shared by every record
    _copied: ClassVar[dict[str, Any]] = {}  # the list, dict and set defaults, copied per record
    _flat: ClassVar[bool] = False
    _getter: ClassVar[Any] = staticmethod(lambda record: ())  # its fields' values, in order (``_getter``)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        space = cls.__dict__
        if "__init__" in space:  # a hand-written record (its own __slots__ and __init__): only its fields
            cls._fields = cls._fields + tuple(key for key in space.get("__slots__", ()) if key not in cls._fields)
            cls._getter = _getter(cls)
            return
        fields = list(cls._fields)
        defaults = dict(cls._defaults)
        for key, note in space.get("__annotations__", {}).items():
            if str(note).startswith("ClassVar"):
                continue
            if key in fields:
                fields.remove(key)  # a field declared again moves to the end, as a dataclass's
            fields.append(key)
            if key in space:
                defaults[key] = space[key]
        cls._fields = tuple(fields)
        cls._defaults = defaults
        cls._fieldset = frozenset(fields)
        cls._fixed = {key: value for key, value in defaults.items() if not isinstance(value, _COPIED)}
        cls._copied = {key: value for key, value in defaults.items() if isinstance(value, _COPIED)}
        cls._flat = cls.__dictoffset__ != 0  # its records keep their fields in a __dict__
        cls._getter = _getter(cls)

    if not TYPE_CHECKING:  # type checkers see the constructor dataclass_transform describes

        def __init__(self, *args: Any, **values: Any) -> None:
            cls = type(self)
            fields = cls._fields
            if cls._flat and not values and len(args) == len(fields):
                self.__dict__.update(zip(fields, args))  # every field, in order: the common call
                return
            if args:
                values = cls._placed(args, values)
            if values.keys() != cls._fieldset:
                values = cls._completed(values)
            if cls._flat:
                self.__dict__.update(values)  # the fast way; setattr would refuse a Frozen
            else:
                for key, value in values.items():
                    object.__setattr__(self, key, value)

    @classmethod
    def _placed(cls, args: tuple, values: dict) -> dict:
        """Positional fields put by name."""
        fields = cls._fields
        if len(args) > len(fields):
            raise TypeError(f"{cls.__name__} takes {len(fields)} fields, {len(args)} were given")
        for key, value in zip(fields, args):
            if key in values:
                raise TypeError(f"{cls.__name__} got its field {key!r} twice")
            values[key] = value
        return values

    @classmethod
    def _completed(cls, values: dict) -> dict:
        """``values`` with the defaults of the fields not given; an unknown or missing field raises."""
        if not values.keys() <= cls._fieldset:
            unknown = sorted(values.keys() - cls._fieldset)
            raise TypeError(f"{cls.__name__} has no field {', '.join(map(repr, unknown))}")
        merged = {**cls._fixed, **values}
        for key, default in cls._copied.items():
            if key not in merged:
                merged[key] = type(default)(default)
        if len(merged) != len(cls._fieldset):
            missing = [key for key in cls._fields if key not in merged]
            raise TypeError(f"{cls.__name__} needs its field {missing[0]!r}")
        return merged

    def _asdict(self) -> dict:
        return dict(zip(self._fields, self._getter(self)))

    def _values(self) -> tuple:
        return self._getter(self)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({fields})"

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return type(self)(**{**self._asdict(), **changes})

    def copied(self) -> Self:
        """A shallow copy, its constructor not run: the fields read in one C call and set on a
        bare instance, cheaper than ``copy.copy`` (``__reduce_ex__`` and a state dict). A
        field unset raises ``AttributeError``, as ``_values`` does."""
        cls = type(self)
        record = cls.__new__(cls)
        put = object.__setattr__  # a Frozen's own refuses
        for key, value in zip(cls._fields, cls._getter(self)):
            put(record, key, value)
        return record


def _getter(cls: type) -> Any:
    """A record's fields' values in order, by a reader made on the class's first read, which then
    takes this function's place: a plain ``run`` reads none, so it never imports ``_operator``
    (~0.3 M instructions of its start-up; bench/README.md, "Start-up (issue 49, start65)")."""

    def first(record: Any) -> tuple:
        read = _reader(cls._fields)  # type: ignore[attr-defined]
        cls._getter = staticmethod(read)  # type: ignore[attr-defined]
        return read(record)

    return staticmethod(first)


def _reader(fields: tuple[str, ...]) -> Any:
    """The fields' values in one C call (``attrgetter``: ``getattr``'s reads, a field's property
    included) rather than a ``getattr`` each from Python: a batch job turns about ten records into
    dicts (its spec's copy, its line's parts). ``operator`` re-exports this C type after defining
    ~1.2 M instructions of Python fallbacks."""
    from _operator import attrgetter

    if len(fields) > 1:
        return attrgetter(*fields)
    read = attrgetter(*fields) if fields else None
    return lambda record: () if read is None else (read(record),)


def counter(start: int = 0) -> Any:
    """``start``, ``start`` + 1, ... by ``next()``, as ``itertools.count(start)`` gives them (one C
    call each, so under the GIL two threads never take the same number), without importing ``itertools`` (~0.5 M instructions of
    a plain run's start-up; bench/README.md, "Start-up (issue 49, start65)")."""
    return iter(range(start, sys.maxsize))


@dataclass_transform()
class Plain(_Record):
    """A record: two are equal when their type and fields are. Mutable, so never hashed."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]


@dataclass_transform(frozen_default=True)
class Frozen(_Record):
    """An immutable record, and so hashable (when its fields are)."""

    __slots__ = ()

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {key!r}")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot delete {key!r}")

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __reduce__(self):
        return _restore, (type(self), self._asdict())


def _restore(cls: type[Frozen], values: dict) -> Frozen:
    return cls(**values)


class Constant:
    """One of a fixed set of named values, compared by identity (``spec.stdin is StdinMode.FILE``)
    and pickled as the same instance. ``Kind.members()`` lists a set, in the order it was made."""

    __slots__ = ("name", "value")
    _members: ClassVar[list]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._members = []

    def __init__(self, name: str, value: str):
        self.name = name
        self.value = value
        type(self)._members.append(self)

    @classmethod
    def members(cls) -> tuple[Self, ...]:
        return tuple(cls._members)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {self.value!r}>"

    def __reduce__(self):
        return (getattr, (type(self), self.name))

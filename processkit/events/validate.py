"""A small JSON Schema validator, and the loader for the shipped schemas.

It implements exactly the keywords the shipped schemas use (``events-v1.schema.json`` here,
``control/replies.schema.json`` for control replies), with draft 2020-12 meaning, so neither
``events --validate`` nor a control client needs a third-party package. A schema that uses any other keyword is
refused when the validator is built (:class:`SchemaError`) instead of being half-checked.
Violations name the JSON Pointer of the offending value (``/stdout/bytes``, ``/members/0``), as
the reference's validator reports them; a violation of the whole event says ``(whole event)``.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any
from ..plain import Frozen
from .json_terms import child_path, ecma_pattern, is_number, json_equal

EVENT_SCHEMA_FILE = "events-v1.schema.json"

# Keywords that only describe; they never affect validity.
_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description"})
_TYPES = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: is_number(v) and (isinstance(v, int) or v.is_integer()),
    "number": lambda v: is_number(v),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}
WHOLE_EVENT = "(whole event)"  # where a violation of the instance itself is reported


class SchemaError(Exception):
    """The schema itself is malformed or uses a keyword this validator does not implement."""


class Violation(Frozen):
    """One reason an instance is invalid: where (a JSON path) and what."""

    path: str
    message: str
    keyword: str
    # What is involved: the property name (required, additionalProperties) or the pair
    # (expected, got) for const; it lets a oneOf report a failure all alternatives share once.
    detail: Any = None

    def __str__(self) -> str:
        return f"{self.path or WHOLE_EVENT}: {self.message}"


def _show(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


class Validator:
    """Validates instances against one schema; build once, call :meth:`errors` per instance."""

    def __init__(self, schema: dict):
        self._root = schema
        self._patterns: dict[str, re.Pattern] = {}
        self._refs: dict[str, object] = {}  # a reference -> its target, resolved once
        # id of a schema node -> (the node, kept alive so its id stays its own; its instance checks)
        self._plans: dict[int, tuple[object, tuple]] = {}
        self._check_schema(schema, "#")

    # -- the schema ----------------------------------------------------------------------------
    def definition(self, name: str):
        """The schema ``#/$defs/<name>`` of this document, to validate an instance against."""
        return self._resolve(f"#/$defs/{name}")

    def _check_schema(self, schema, where: str) -> None:
        """Refuse anything this validator would silently ignore or misread."""
        if isinstance(schema, bool):
            return
        if not isinstance(schema, dict):
            raise SchemaError(f"{where}: a schema must be an object or a boolean")
        for keyword, value in schema.items():
            if keyword in _ANNOTATIONS:
                continue
            checker = _SCHEMA_CHECKS.get(keyword)
            if checker is None:
                raise SchemaError(f"{where}: unsupported keyword {keyword!r}")
            checker(self, value, f"{where}/{keyword}")

    def _check_subschema_map(self, value, where: str) -> None:
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: expected an object of schemas")
        for name, sub in value.items():
            self._check_schema(sub, f"{where}/{name}")

    def _check_subschema_list(self, value, where: str) -> None:
        if not isinstance(value, list) or not value:
            raise SchemaError(f"{where}: expected a non-empty array of schemas")
        for index, sub in enumerate(value):
            self._check_schema(sub, f"{where}/{index}")

    def _check_ref(self, value, where: str) -> None:
        if not isinstance(value, str) or not value.startswith("#"):
            raise SchemaError(f"{where}: only references inside this document ('#/...') are supported")
        self._resolve(value)

    def _check_type(self, value, where: str) -> None:
        names = value if isinstance(value, list) else [value]
        if not names or any(name not in _TYPES for name in names):
            raise SchemaError(f"{where}: unknown type {value!r}")

    def _check_pattern(self, value, where: str) -> None:
        try:
            self._patterns[value] = ecma_pattern(value)
        except (re.error, TypeError) as exc:
            raise SchemaError(f"{where}: bad pattern: {exc}") from None

    def _check_number(self, value, where: str) -> None:
        if not is_number(value):
            raise SchemaError(f"{where}: expected a number")

    def _check_length(self, value, where: str) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SchemaError(f"{where}: expected a non-negative integer")

    def _check_required(self, value, where: str) -> None:
        if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
            raise SchemaError(f"{where}: expected an array of property names")

    def _check_enum(self, value, where: str) -> None:
        if not isinstance(value, list):
            raise SchemaError(f"{where}: expected an array")

    def _check_anything(self, value, where: str) -> None:
        return None

    def _resolve(self, ref: str):
        node = self._root
        for token in ref[1:].split("/")[1:]:
            token = token.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or token not in node:
                raise SchemaError(f"unresolvable reference {ref!r}")
            node = node[token]
        return node

    # -- instances -----------------------------------------------------------------------------
    # Checks are generators: validity stops at the first violation, which is what keeps a
    # oneOf of many event types cheap; the full list is built only when it is reported.
    def errors(self, instance, schema=None, path: str = "") -> list[Violation]:
        """Every violation of ``instance`` against the schema (the root one by default)."""
        return list(self._iter(instance, self._root if schema is None else schema, path))

    def is_valid(self, instance, schema=None) -> bool:
        return next(self._iter(instance, self._root if schema is None else schema, ""), None) is None

    def _iter(self, instance, schema, path: str):
        if schema is True:
            return
        if schema is False:
            yield Violation(path, "no value is allowed here", "false")
            return
        planned = self._plans.get(id(schema))
        if planned is None:
            planned = self._plans[id(schema)] = (schema, self._plan(schema))
        for check, value in planned[1]:
            yield from check(self, value, instance, path, schema)

    @staticmethod
    def _plan(schema: dict) -> tuple:
        """A node's instance checks in its keyword order (annotations such as ``description``
        dropped), worked out once per node: the schema does not change once loaded."""
        return tuple(
            (_INSTANCE_CHECKS[keyword], value) for keyword, value in schema.items() if keyword in _INSTANCE_CHECKS
        )

    def _ref(self, ref, instance, path, schema):
        target = self._refs.get(ref)
        if target is None:
            target = self._refs[ref] = self._resolve(ref)
        yield from self._iter(instance, target, path)

    def _type(self, names, instance, path, schema):
        names = names if isinstance(names, list) else [names]
        if not any(_TYPES[name](instance) for name in names):
            yield Violation(path, f"expected {' or '.join(names)}, got {_show(instance)}", "type")

    def _const(self, expected, instance, path, schema):
        if not json_equal(expected, instance):
            yield Violation(path, f"expected {_show(expected)}, got {_show(instance)}", "const", (expected, instance))

    def _enum(self, choices, instance, path, schema):
        if not any(json_equal(choice, instance) for choice in choices):
            allowed = ", ".join(_show(choice) for choice in choices)
            yield Violation(path, f"{_show(instance)} is not one of {allowed}", "enum")

    def _properties(self, properties, instance, path, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if name in instance:
                    yield from self._iter(instance[name], sub, child_path(path, name))

    def _required(self, names, instance, path, schema):
        if isinstance(instance, dict):
            for name in names:
                if name not in instance:
                    yield Violation(path, f"missing required property {name!r}", "required", name)

    def _additional(self, sub, instance, path, schema):
        if not isinstance(instance, dict):
            return
        declared = schema.get("properties", {})
        for name, value in instance.items():
            if name in declared:
                continue
            if sub is False:
                yield Violation(child_path(path, name), "property is not allowed here", "additionalProperties", name)
            else:
                yield from self._iter(value, sub, child_path(path, name))

    def _property_names(self, sub, instance, path, schema):
        if isinstance(instance, dict):
            for name in instance:
                for violation in self._iter(name, sub, child_path(path, name)):
                    yield violation.replace(message=f"property name {violation.message}")

    def _items(self, sub, instance, path, schema):
        if isinstance(instance, list):
            for index, item in enumerate(instance):
                yield from self._iter(item, sub, child_path(path, index))

    def _pattern(self, pattern, instance, path, schema):
        if isinstance(instance, str) and not self._patterns[pattern].search(instance):
            yield Violation(path, f"{_show(instance)} does not match {pattern}", "pattern")

    def _min_length(self, limit, instance, path, schema):
        if isinstance(instance, str) and len(instance) < limit:
            yield Violation(path, f"expected at least {limit} characters, got {len(instance)}", "minLength")

    def _max_length(self, limit, instance, path, schema):
        if isinstance(instance, str) and len(instance) > limit:
            yield Violation(path, f"expected at most {limit} characters, got {len(instance)}", "maxLength")

    def _minimum(self, limit, instance, path, schema):
        if is_number(instance) and instance < limit:
            yield Violation(path, f"{_show(instance)} is less than the minimum {limit}", "minimum")

    def _maximum(self, limit, instance, path, schema):
        if is_number(instance) and instance > limit:
            yield Violation(path, f"{_show(instance)} is greater than the maximum {limit}", "maximum")

    def _one_of(self, alternatives, instance, path, schema):
        matched = sum(1 for sub in alternatives if next(self._iter(instance, sub, path), None) is None)
        if matched > 1:
            yield Violation(path, f"matches {matched} alternatives, expected exactly one", "oneOf")
        elif matched == 0:
            yield from _explain_no_match(path, [self.errors(instance, sub, path) for sub in alternatives])


def _explain_no_match(path: str, outcomes: list[list[Violation]]) -> list[Violation]:
    """Say why no alternative of a oneOf matched, as precisely as the failures allow.

    A failure shared by every alternative (all want a different ``event`` tag, all miss the
    same property) is the real reason: it is reported once. Otherwise the alternative that came
    closest (fewest tag mismatches, then fewest violations) is the one the instance meant.
    """
    shared = [v for v in outcomes[0] if all(any(_same_failure(v, w) for w in other) for other in outcomes[1:])]
    if shared:
        explained = []
        for violation in shared:
            if violation.keyword == "const":
                wanted = [w.detail[0] for other in outcomes for w in other if _same_failure(violation, w)]
                allowed = list(dict.fromkeys(json.dumps(value, ensure_ascii=False) for value in wanted))
                if len(allowed) > 1:
                    got = _show(violation.detail[1])
                    violation = violation.replace(message=f"{got} is not one of {', '.join(allowed)}")
            explained.append(violation)
        return explained
    closest = min(outcomes, key=lambda found: (sum(v.keyword == "const" for v in found), len(found)))
    return closest


def _same_failure(a: Violation, b: Violation) -> bool:
    if a.path != b.path or a.keyword != b.keyword:
        return False
    return a.keyword == "const" or a.detail == b.detail


_SCHEMA_CHECKS = {
    "$defs": Validator._check_subschema_map,
    "$ref": Validator._check_ref,
    "oneOf": Validator._check_subschema_list,
    "type": Validator._check_type,
    "const": Validator._check_anything,
    "enum": Validator._check_enum,
    "properties": Validator._check_subschema_map,
    "required": Validator._check_required,
    "additionalProperties": Validator._check_schema,
    "propertyNames": Validator._check_schema,
    "items": Validator._check_schema,
    "pattern": Validator._check_pattern,
    "minLength": Validator._check_length,
    "maxLength": Validator._check_length,
    "minimum": Validator._check_number,
    "maximum": Validator._check_number,
}
_INSTANCE_CHECKS = {
    "$ref": Validator._ref,
    "oneOf": Validator._one_of,
    "type": Validator._type,
    "const": Validator._const,
    "enum": Validator._enum,
    "properties": Validator._properties,
    "required": Validator._required,
    "additionalProperties": Validator._additional,
    "propertyNames": Validator._property_names,
    "items": Validator._items,
    "pattern": Validator._pattern,
    "minLength": Validator._min_length,
    "maxLength": Validator._max_length,
    "minimum": Validator._minimum,
    "maximum": Validator._maximum,
}


def load_schema(package: str, name: str) -> dict:
    """A schema shipped as package data beside ``package``'s modules."""
    return json.loads(resources.files(package).joinpath(name).read_text(encoding="utf-8"))


@functools.cache
def packaged_validator(package: str, name: str) -> Validator:
    """The validator for a shipped schema, built once per process."""
    return Validator(load_schema(package, name))


def load_event_schema() -> dict:
    """The shipped JSONL event schema (v1)."""
    return load_schema(__package__, EVENT_SCHEMA_FILE)


def event_validator() -> Validator:
    """The validator for one JSONL event line."""
    return packaged_validator(__package__, EVENT_SCHEMA_FILE)


def validate_event(event) -> list[Violation]:
    """Every violation of one decoded JSONL line against the shipped event schema."""
    return event_validator().errors(event)

"""Typed job outputs: what a job of each kind reports, as a frozen dataclass that checks itself when read back.

Each job kind has one in its capability's package (``core/<capability>/result.py``), named by the kind's
descriptor (``core.job_kind``). ``to_dict`` gives the JSON shape that goes to XCom (a field left
``None`` is left out, unless the class keeps it: where ``None`` itself says something); ``from_dict`` reads it back,
refusing unknown fields, missing ones and values of the wrong type with one line naming the field.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from typing import Any, ClassVar, Self, Union

from spark_tables.core.errors import SpecError


class JobOutput:
    """Base of the typed outputs (and of the typed parts inside them): subclasses are frozen dataclasses."""

    #: The job kind this is the output of; empty for a part inside an output.
    kind: ClassVar[str] = ""
    #: Fields written to the dict even when ``None``.
    KEPT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        return {
            field.name: _plain(value)
            for field in dataclasses.fields(self)  # type: ignore[arg-type]
            if (value := getattr(self, field.name)) is not None or field.name in self.KEPT_WHEN_NONE
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "") -> Self:
        """Read a dict written by ``to_dict``; ``where`` names it in an error (``"sql job result"``)."""
        where = where or f"{cls.kind or cls.__name__} result"
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise SpecError(f"{where} must be an object, not {type(data).__name__}")
        fields = {field.name: field for field in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise SpecError(f"{where}: unknown field(s) {unknown}: the provider that wrote it is newer; upgrade")
        missing = sorted(
            name
            for name, field in fields.items()
            if name not in data
            and field.default is dataclasses.MISSING
            and field.default_factory is dataclasses.MISSING
        )
        if missing:
            raise SpecError(f"{where}: missing field(s) {missing}")
        hints = _hints(cls)
        return cls(**{name: _read(value, hints[name], f"{where}: {name}") for name, value in data.items()})


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _plain(value: Any) -> Any:
    """A field's value as JSON: nested outputs as dicts, tuples as lists."""
    if isinstance(value, JobOutput):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _read(value: Any, hint: Any, where: str) -> Any:
    """``value`` checked against the type ``hint``, nested outputs read into their classes."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        others = [arg for arg in args if arg is not type(None)]
        if len(others) == 1:  # an optional field: what is wrong inside its value says more
            return _read(value, others[0], where)
        for arg in others:
            try:
                return _read(value, arg, where)
            except SpecError:
                continue
        raise SpecError(f"{where} must be {_name(hint)}, not {value!r:.60}")
    if isinstance(hint, type) and issubclass(hint, JobOutput):
        return hint.from_dict(value, where)
    if origin is list:
        _expect(value, list, hint, where)
        return [_read(item, args[0], where) for item in value] if args else value
    if origin is dict:
        _expect(value, dict, hint, where)
        return {key: _read(item, args[1], where) for key, item in value.items()} if args else value
    if hint is float:
        _expect(value, int | float, hint, where)
    elif hint is int:
        _expect(value, int, hint, where)
    elif isinstance(hint, type):
        _expect(value, hint, hint, where)
    return value


def _expect(value: Any, kind: Any, hint: Any, where: str) -> None:
    if not isinstance(value, kind) or (isinstance(value, bool) and hint is not bool):
        raise SpecError(f"{where} must be {_name(hint)}, not {value!r:.60}")


def _name(hint: Any) -> str:
    """A type as people write it: ``list[str]``, ``int | None``."""
    if isinstance(hint, type) and typing.get_origin(hint) is None:
        return hint.__name__
    return re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", str(hint))

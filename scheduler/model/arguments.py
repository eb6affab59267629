"""A task's arguments checked against its handler's signature: with pydantic when a
message is built (bad arguments fail in the producer, nothing is written) and again in the
worker to rebuild typed values (a ``datetime`` argument arrives as a ``datetime``).

Plain values skip pydantic both ways: when every value of a call is an ``int``, ``str``,
``bool``, a finite ``float`` or None, and its parameter is annotated with exactly that
type (or ``Any``, no annotation, ``X | None``), validating would return it unchanged and
dumping it to JSON too, so it is taken as is.
Anything else (an ``int`` for a ``float`` parameter, an ``Annotated`` constraint, a
missing required argument, a nested value) goes through pydantic as before.
"""

from __future__ import annotations

import inspect
import json
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, create_model
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticSerializationError

from tickwork.scheduler.errors import InvalidMessage

_SKIPPED_KINDS = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)

#: the types whose values pass unchanged through validation and a JSON dump
_SCALARS: tuple[type, ...] = (int, str, bool, float, type(None))


def plain_types(hint: Any) -> frozenset[type]:
    """The exact types of the values that a parameter annotated ``hint`` takes unchanged
    (empty when pydantic must look at every value: a constraint, a model, a container)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return frozenset(_SCALARS)
    if hint is None or hint is type(None):
        return frozenset({type(None)})
    if hint in _SCALARS:
        return frozenset({hint})
    if get_origin(hint) in (Union, types.UnionType):
        members = [plain_types(member) for member in get_args(hint)]
        if all(members):
            return frozenset().union(*members)
    return frozenset()


class Arguments:
    """Validates call arguments against a callable's signature."""

    def __init__(self, fn: Callable[..., Any], task_name: str, *, skip_self: bool = False) -> None:
        signature = inspect.signature(fn)
        parameters = list(signature.parameters.values())
        if skip_self:
            parameters = parameters[1:]
            signature = signature.replace(parameters=parameters)
        self.signature = signature
        self.task_name = task_name
        try:
            hints = get_type_hints(fn)
            exact = get_type_hints(fn, include_extras=True)
        except (NameError, TypeError):
            hints, exact = {}, {}
        fields: dict[str, Any] = {}
        for p in parameters:
            if p.kind in _SKIPPED_KINDS:
                continue
            default = ... if p.default is inspect.Parameter.empty else p.default
            fields[p.name] = (hints.get(p.name, Any), default)
        self.model: type[BaseModel] = create_model(
            f"{task_name}:arguments", __config__=ConfigDict(arbitrary_types_allowed=True), **fields
        )
        self._skipped = {p.name for p in parameters if p.kind in _SKIPPED_KINDS}
        self._positional = [
            p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        self._validator = self.model.__pydantic_validator__
        self._serializer = self.model.__pydantic_serializer__
        self._names = set(fields)
        # no *args, **kwargs or positional-only parameters: calls map onto names directly
        self._simple = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in parameters)
        self._plain = {name: plain_types(exact.get(name, Any)) for name in fields}
        self._required = frozenset(
            p.name for p in parameters if p.name in fields and p.default is inspect.Parameter.empty
        )

    def _mismatch(self, detail: object) -> InvalidMessage:
        return InvalidMessage(
            f"arguments for task {self.task_name!r} do not match its signature: {detail}"
        )

    def _named(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Map a call onto parameter names as ``Signature.bind`` does (without its cost for
        simple signatures); missing required arguments are left for pydantic to report."""
        if type(args) is not tuple and type(args) is not list and not _a_sequence(args):
            raise InvalidMessage(
                f"args of task {self.task_name!r} must be a list or tuple of its positional "
                f"arguments, not {type(args).__name__} {args!r}"
            )
        if type(kwargs) is not dict and not isinstance(kwargs, Mapping):
            raise InvalidMessage(
                f"kwargs of task {self.task_name!r} must map its parameters' names to "
                f"values, not {type(kwargs).__name__} {kwargs!r}"
            )
        if not self._simple:
            try:
                bound = self.signature.bind(*args, **kwargs)
            except TypeError as err:
                raise self._mismatch(err) from err
            return {k: v for k, v in bound.arguments.items() if k not in self._skipped}
        if len(args) > len(self._positional):
            raise self._mismatch(
                f"takes {len(self._positional)} positional arguments but {len(args)} were given"
            )
        named = dict(zip(self._positional, args, strict=False))
        for name, value in kwargs.items():
            if name in named:
                raise self._mismatch(f"multiple values for argument {name!r}")
            if name not in self._names:
                raise self._mismatch(f"an unexpected keyword argument {name!r}")
            named[name] = value
        return named

    def _is_plain(self, named: Mapping[str, Any]) -> bool:
        """Whether pydantic would return every value of ``named`` unchanged (see the
        module's docstring) and finds no required argument missing."""
        plain = self._plain
        for name, value in named.items():
            kind = type(value)
            if kind not in plain[name] or (kind is float and value - value != 0):
                return False  # (value - value is nan for inf and nan)
        return len(named) == len(plain) or self._required.issubset(named)

    def _validate(self, named: dict[str, Any]) -> BaseModel:
        try:  # pydantic-core directly: the same validation without the wrapper's overhead
            model: BaseModel = self._validator.validate_python(named)
            return model
        except PydanticValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in e['loc']) or 'arguments'}: {e['msg']}"
                for e in err.errors()
            )
            raise InvalidMessage(
                f"invalid arguments for task {self.task_name!r}: {problems}"
            ) from err

    def to_json(
        self, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """Validate and return (args, kwargs) as JSON-ready values; raise ``InvalidMessage``."""
        named = self._named(args, kwargs)
        if self._simple and self._is_plain(named):
            return list(args), dict(kwargs)
        for name, value in named.items():
            if _not_finite(value):
                raise InvalidMessage(
                    f"invalid arguments for task {self.task_name!r}: {name}: NaN and "
                    "infinity cannot be stored (JSON has no such number)"
                )
        try:
            dumped = self._serializer.to_python(
                self._validate(named), mode="json", exclude_unset=True
            )
        except PydanticSerializationError as err:
            raise InvalidMessage(
                f"arguments for task {self.task_name!r} are not JSON-serialisable: {err}"
            ) from err
        count = min(len(args), len(self._positional))
        json_args = [dumped[name] for name in self._positional[:count]] + list(args[count:])
        json_kwargs = {k: dumped.get(k, v) for k, v in kwargs.items()}
        if not self._simple:  # values taken by *args / **kwargs were not validated
            try:
                json.dumps(json_args)
                json.dumps(json_kwargs)
            except (TypeError, ValueError) as err:
                raise InvalidMessage(
                    f"arguments for task {self.task_name!r} are not JSON-serialisable: {err}"
                ) from err
        return json_args, json_kwargs

    def rebuild(
        self, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Validate stored JSON arguments and return typed (args, kwargs) to call with."""
        if not args and not kwargs and not self._required:  # a call without arguments
            return (), {}
        if self._simple:  # every parameter can be passed by name
            named = self._named(args, kwargs)
            if self._is_plain(named):
                return (), named
            model = self._validate(named)
            return (), {name: getattr(model, name) for name in named}
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as err:
            raise self._mismatch(err) from err
        model = self._validate({k: v for k, v in bound.arguments.items() if k not in self._skipped})
        for name in type(model).model_fields:
            if name in bound.arguments:
                bound.arguments[name] = getattr(model, name)
        return bound.args, bound.kwargs


def _a_sequence(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _not_finite(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is or holds (in lists, tuples, sets and dicts, 20 levels deep) a
    float NaN or infinity, which JSON cannot hold (pydantic would store null)."""
    if isinstance(value, float):
        return value - value != 0  # nan for inf and nan
    if depth > 20:
        return False
    if isinstance(value, dict):
        return any(_not_finite(item, depth + 1) for item in value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return any(_not_finite(item, depth + 1) for item in value)
    return False

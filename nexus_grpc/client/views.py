"""Results as Python reads them: messages whose enum fields are enum members.

A generated protobuf message returns an enum field as a bare int
(``memory.kind`` is ``2``, ``hit.sources`` is ``[2]``), and its class cannot
be subclassed to change that. ``MessageView`` wraps a response message:

- an enum field reads as its ``ProtoEnum`` member (``MemoryKind.USER``, an
  int whose ``str`` is ``USER``), a repeated one as a list of them;
- a message field reads as a view too (``hit.memory.kind``), a repeated one
  as a list of views; well-known types (Timestamp, Struct...) stay as they are;
- everything else is the message's own: scalars, ``HasField``,
  ``WhichOneof``, ``SerializeToString``, ``str()`` (protobuf's text format),
  assignment to a field; ``isinstance(view, memory_pb2.Memory)`` holds, and a
  view equals its message.

Protobuf's own constructors and ``CopyFrom`` take real messages only: pass
``view.to_message()`` there. The client's methods take views as they are.

A view of a call's answer also carries the call's trailing metadata
(``trailers``), and ``empty_reason``: why an empty list is empty, when the
server said (x-nexus-empty-reason, README).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from nexus_grpc.client.enums import enum_for, enum_value

__all__ = ["MessageView", "plain", "plain_fields", "view"]

EMPTY_REASON_KEY = "x-nexus-empty-reason"
DEGRADED_KEY = "x-nexus-degraded"
SELECTION_METHOD_KEY = "x-nexus-selection-method"
EXISTING_KEY = "x-nexus-existing"

# Descriptors are typed Any below: protobuf's stubs make a field's enum_type and
# message_type optional (and upb's classes are other types again).
_ENUM = FieldDescriptor.TYPE_ENUM
_MESSAGE = FieldDescriptor.TYPE_MESSAGE


def _repeated(field: Any) -> bool:
    return bool(field.is_repeated)


def _map_entry(field: Any) -> Any:
    if field.type == _MESSAGE and field.message_type.GetOptions().map_entry:
        return field.message_type
    return None


@functools.cache
def _wants_view(descriptor: Any) -> bool:
    """Whether a message of this type (or one inside it) has an enum field the
    client knows: those are read through a view, others stay as they are."""
    return _scan(descriptor, set())


def _scan(descriptor: Any, seen: set[str]) -> bool:
    if descriptor.full_name in seen or descriptor.full_name.startswith("google.protobuf."):
        return False
    seen.add(descriptor.full_name)
    for field in descriptor.fields:
        if field.type == _ENUM and enum_for(field.enum_type) is not None:
            return True
        if field.type == _MESSAGE and _scan(field.message_type, seen):
            return True
    return False


def _member(field: Any, number: int) -> Any:
    cls = enum_for(field.enum_type)
    if cls is None:
        return number
    try:
        return cls(number)
    except ValueError:
        return number  # a value newer than this client: the number itself


def _shown(field: Any, value: Any) -> Any:
    """A field's value as a view shows it."""
    entry = _map_entry(field)
    if entry is not None:
        inner = entry.fields_by_name["value"]
        if inner.type == _ENUM or (inner.type == _MESSAGE and _wants_view(inner.message_type)):
            return {k: _shown(inner, v) for k, v in value.items()}
        return value
    if field.type == _ENUM:
        if _repeated(field):
            return [_member(field, v) for v in value]
        return _member(field, value)
    if field.type == _MESSAGE and _wants_view(field.message_type):
        if _repeated(field):
            return [MessageView(v) for v in value]
        return MessageView(value)
    return value


class MessageView:
    """A response message, read with enum members (see the module docstring)."""

    __slots__ = ("_message", "_trailers")

    def __init__(self, message: Message, trailers: Mapping[str, str] | None = None) -> None:
        object.__setattr__(self, "_message", message)
        object.__setattr__(self, "_trailers", dict(trailers or {}))

    # What the wrapped message is, for isinstance() and type checks.
    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D105
        return type(object.__getattribute__(self, "_message"))

    def __getattr__(self, name: str) -> Any:
        message = object.__getattribute__(self, "_message")
        value = getattr(message, name)
        field = message.DESCRIPTOR.fields_by_name.get(name)
        return value if field is None else _shown(field, value)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_message"), name, plain(value))

    def __eq__(self, other: object) -> bool:
        return bool(object.__getattribute__(self, "_message") == plain(other))

    __hash__ = None  # type: ignore[assignment]  # as a message: mutable, not hashable

    def __repr__(self) -> str:
        return repr(object.__getattribute__(self, "_message"))

    def __str__(self) -> str:
        return str(object.__getattribute__(self, "_message"))

    def __dir__(self) -> list[str]:
        return sorted({*dir(object.__getattribute__(self, "_message")), *_OWN})

    def __reduce__(self) -> tuple[Any, ...]:
        # By the message's proto name: its class's module is the proto
        # package's, which does not import under that name.
        message = object.__getattribute__(self, "_message")
        return (_restore, (message.DESCRIPTOR.full_name, message.SerializeToString()))

    def __copy__(self) -> MessageView:
        message = object.__getattribute__(self, "_message")
        copied = type(message)()
        copied.CopyFrom(message)
        return MessageView(copied, object.__getattribute__(self, "_trailers"))

    def __deepcopy__(self, memo: dict[int, Any]) -> MessageView:
        return self.__copy__()

    def to_message(self) -> Message:
        """The message itself, for protobuf's constructors and ``CopyFrom``."""
        return object.__getattribute__(self, "_message")  # type: ignore[no-any-return]

    @property
    def trailers(self) -> dict[str, str]:
        """The call's trailing metadata (the x-nexus-* trailers, x-request-id);
        empty for a view that is not a call's answer."""
        return dict(object.__getattribute__(self, "_trailers"))

    @property
    def empty_reason(self) -> str | None:
        """Why this (empty) answer is empty, as the server said (``CODE: sentence``)."""
        return object.__getattribute__(self, "_trailers").get(EMPTY_REASON_KEY)


_OWN = ("to_message", "trailers", "empty_reason")


def _restore(full_name: str, data: bytes) -> MessageView:
    descriptor = descriptor_pool.Default().FindMessageTypeByName(full_name)
    return MessageView(message_factory.GetMessageClass(descriptor).FromString(data))


def view(message: Message, trailers: Mapping[str, str] | None = None) -> Any:
    """A call's answer (``trailers`` given) always as a view; a streamed item
    as one where it has enums to show."""
    if trailers is not None or _wants_view(message.DESCRIPTOR):
        return MessageView(message, trailers)
    return message


def plain(value: Any) -> Any:
    """A view's message; anything else as it is."""
    if type(value) is MessageView:
        return value.to_message()
    return value


def plain_fields(descriptor: Any, fields: Mapping[str, Any], path: str = "") -> dict:
    """Keyword fields for ``descriptor``'s constructor: enum labels and members
    become numbers (nested mappings and lists included), views become their
    messages. An unknown enum label raises ``ValueError`` naming the field."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        field = descriptor.fields_by_name.get(name)
        out[name] = value if field is None else _plain_field(field, value, f"{path}{name}")
    return out


def _plain_field(field: Any, value: Any, path: str) -> Any:
    entry = _map_entry(field)
    if entry is not None:
        if isinstance(value, Mapping):
            inner = entry.fields_by_name["value"]
            return {k: _plain_one(inner, v, f"{path}[{k!r}]") for k, v in value.items()}
        return plain(value)
    if _repeated(field) and not isinstance(value, str | bytes | Mapping | Message | MessageView):
        try:
            items = list(value)
        except TypeError:
            return value  # not a sequence: protobuf's to refuse
        return [_plain_one(field, v, f"{path}[{i}]") for i, v in enumerate(items)]
    return _plain_one(field, value, path)


def _plain_one(field: Any, value: Any, path: str) -> Any:
    if field.type == _ENUM:
        return enum_value(field.enum_type, value, path)
    if field.type == _MESSAGE:
        # A well-known type given as a mapping (a Struct's dict) is protobuf's own.
        if isinstance(value, Mapping) and not field.message_type.full_name.startswith(
            "google.protobuf."
        ):
            return plain_fields(field.message_type, value, f"{path}.")
        return plain(value)
    return value

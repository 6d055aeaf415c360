"""Proto enums as Python enums: what the typed client takes and gives back.

``proto/gen_client.py`` writes one ``ProtoEnum`` subclass per proto enum into
``nexus_grpc/client/__init__.py`` (``MemoryKind``, ``Tier``, ``SearchMode``...),
its members named without the enum's prefix (``Tier.LONGTERM`` is
``TIER_LONGTERM``) and registered here by the enum's full proto name.

- In: an enum field takes a member, a number, or a label, short or full and
  in any case (``kind="USER"``, ``"MEMORY_KIND_USER"``, ``"user"``); an unknown
  label is a ``ValueError`` that lists the valid ones.
- Out: results give members, which are ints (``==``, ``<``, hashing, JSON and
  the protobuf constructors treat them as the numbers they are) whose
  ``str`` is their name (``USER``) where an int would print ``2``.
"""

from __future__ import annotations

import enum
from typing import Any

from google.protobuf.descriptor import EnumDescriptor

__all__ = ["ProtoEnum", "enum_for", "enum_value", "register"]


class ProtoEnum(enum.IntEnum):
    """A proto enum: an ``int`` whose ``str`` (and f-string) is its name."""

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        # As it is written in code, so a printed list reads [SearchSource.KEYWORD].
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)

    @property
    def proto_name(self) -> str:
        """The value's name in the proto (``MEMORY_KIND_USER``), as JSON and grpcurl write it."""
        return _PROTO_NAMES[type(self)][self.value]


_BY_PROTO: dict[str, type[ProtoEnum]] = {}
_PROTO_NAMES: dict[type[ProtoEnum], dict[int, str]] = {}


def register(descriptor: EnumDescriptor, cls: type[ProtoEnum]) -> None:
    """Makes ``cls`` the Python enum of the proto enum ``descriptor``."""
    _BY_PROTO[descriptor.full_name] = cls
    _PROTO_NAMES[cls] = {v.number: v.name for v in descriptor.values}


def enum_for(descriptor: EnumDescriptor) -> type[ProtoEnum] | None:
    """The registered Python enum of a proto enum; None for one the client does
    not know (a well-known type's, say), whose values stay plain ints."""
    return _BY_PROTO.get(descriptor.full_name)


def _labels(descriptor: EnumDescriptor) -> dict[str, int]:
    """Every label a value may be given by, upper case: the proto name and,
    where the Python enum has one, the member's (the name less its prefix)."""
    labels = {v.name.upper(): v.number for v in descriptor.values}
    cls = enum_for(descriptor)
    if cls is not None:
        labels.update({m.name.upper(): m.value for m in cls})
    return labels


def enum_value(descriptor: EnumDescriptor, value: Any, path: str) -> Any:
    """``value`` for the enum field at ``path``, as the number protobuf takes:
    a label is looked up (short or full, any case), a member or an int passes
    through; anything else is protobuf's to refuse."""
    if isinstance(value, str):
        labels = _labels(descriptor)
        number = labels.get(value.strip().upper())
        if number is None:
            cls = enum_for(descriptor)
            short = [m.name for m in cls] if cls is not None else []
            full = [v.name for v in descriptor.values]
            raise ValueError(
                f"{path}: unknown {descriptor.name} label {value!r}; valid labels:"
                f" {', '.join(short or full)}"
                + (f" (or in full: {', '.join(full)})" if short else "")
            )
        return number
    if isinstance(value, enum.Enum):
        return int(value.value)
    return value

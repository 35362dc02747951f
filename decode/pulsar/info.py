"""The `info` column: a short human summary of the fields no other column holds.

Credentials are never summarised (see :func:`is_secret`); bytes show as their
length; nested messages are summarised the same way, one level at a time.
"""

from __future__ import annotations

from typing import Any

import cython
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from ._pb.pulsar_api_pb2 import AuthData

MAX_INFO = 200
_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_ENUM = FieldDescriptor.TYPE_ENUM
_BYTES = FieldDescriptor.TYPE_BYTES
_FLOAT_TYPES = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)
# Never copied anywhere, not even into `info`: credentials and proxied credentials.
SECRET_FIELDS = frozenset({"auth_data", "original_auth_data"})


def is_secret(fd: FieldDescriptor) -> bool:
    """Credential fields: by name, or any AuthData (AUTH_CHALLENGE / AUTH_RESPONSE)."""
    return fd.name in SECRET_FIELDS or fd.message_type is AuthData.DESCRIPTOR


@cython.cclass
class Field:
    """What a summary needs of one field, read from its descriptor once: each read of a
    descriptor's attribute costs a lookup, and summaries run per frame."""

    name = cython.declare(str, visibility="readonly")
    number = cython.declare(cython.int, visibility="readonly")
    repeated = cython.declare(cython.bint, visibility="readonly")
    kind = cython.declare(cython.int, visibility="readonly")  # its FieldDescriptor.type
    enum_names = cython.declare(dict, visibility="readonly")  # number -> name (an enum)
    message = cython.declare(object, visibility="readonly")  # its Descriptor (a message)

    def __init__(self, fd: FieldDescriptor) -> None:
        self.name = fd.name
        self.number = fd.number
        self.repeated = fd.is_repeated
        self.kind = fd.type
        self.enum_names = None
        if fd.type == _ENUM:
            self.enum_names = {n: v.name for n, v in fd.enum_type.values_by_number.items()}
        self.message = fd.message_type


def fields(fds: Any) -> tuple[Field, ...]:
    """The summaries' view of ``fds``, in their order (credentials left out)."""
    return tuple(Field(fd) for fd in fds if not is_secret(fd))


# A nested message type's fields, by its descriptor: described on first use.
_NESTED: dict[Descriptor, tuple[Field, ...]] = {}


@cython.locals(fd=Field)
def summarize(sub: Any, described: tuple[Field, ...]) -> str | None:
    """``name=value`` for each of ``described`` (see :func:`fields`) that is set in
    ``sub``, or None."""
    parts = []
    for fd in described:
        if fd.repeated:
            values = getattr(sub, fd.name)
            if values:
                parts.append(f"{fd.name}={_repeated(fd, values)}")
        elif sub.HasField(fd.name):
            parts.append(f"{fd.name}={_value(fd, getattr(sub, fd.name))}")
    if not parts:
        return None
    text = " ".join(parts)
    return text if len(text) <= MAX_INFO else text[: MAX_INFO - 3] + "..."


@cython.locals(fd=Field)
def _repeated(fd: Field, values: Any) -> str:
    if fd.kind == _MESSAGE or len(values) > 3:
        return f"[{len(values)}]"
    return "[" + ",".join([_value(fd, v) for v in values]) + "]"


@cython.locals(fd=Field)
def _value(fd: Field, value: Any) -> str:
    if fd.kind == _ENUM:
        name = fd.enum_names.get(value)
        return name if name else str(value)
    if fd.kind == _BYTES:
        return f"<{len(value)} bytes>"
    if fd.kind == _MESSAGE:
        nested = _NESTED.get(fd.message)
        if nested is None:
            nested = _NESTED[fd.message] = fields(fd.message.fields)
        return "{" + (summarize(value, nested) or "") + "}"
    if fd.kind in _FLOAT_TYPES:
        return f"{value:g}"
    return str(value)

"""The `info` column: a short human summary of the fields no other column holds.

Credentials are never summarised (see :func:`is_secret`); bytes show as their
length; nested messages are summarised the same way, one level at a time.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from pwcap.decode.pulsar._pb.pulsar_api_pb2 import AuthData

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


def summarize(sub: Any, fields: tuple[FieldDescriptor, ...]) -> str | None:
    """``name=value`` for each of ``fields`` that is set in ``sub``, or None."""
    parts = []
    for fd in fields:
        if fd.is_repeated:
            values = getattr(sub, fd.name)
            if values:
                parts.append(f"{fd.name}={_repeated(fd, values)}")
        elif sub.HasField(fd.name):
            parts.append(f"{fd.name}={_value(fd, getattr(sub, fd.name))}")
    if not parts:
        return None
    text = " ".join(parts)
    return text if len(text) <= MAX_INFO else text[: MAX_INFO - 3] + "..."


def _repeated(fd: FieldDescriptor, values: Any) -> str:
    if fd.type == _MESSAGE or len(values) > 3:
        return f"[{len(values)}]"
    return "[" + ",".join(_value(fd, v) for v in values) + "]"


def _value(fd: FieldDescriptor, value: Any) -> str:
    if fd.type == _ENUM:
        enum_value = fd.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value else str(value)
    if fd.type == _BYTES:
        return f"<{len(value)} bytes>"
    if fd.type == _MESSAGE:
        fields = tuple(f for f in fd.message_type.fields if not is_secret(f))
        return "{" + (summarize(value, fields) or "") + "}"
    if fd.type in _FLOAT_TYPES:
        return f"{value:g}"
    return str(value)

"""What a run gives back, as the JSON it is kept as (a return value, a durable step's
value), or one clear error saying why it cannot be kept."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_json


def encode_value(value: Any, max_bytes: int, what: str = "the task's return value") -> bytes:
    """A return value as JSON; ``TypeError`` or ``ValueError`` (naming ``what``) when it
    cannot be kept."""
    try:
        encoded = to_json(value)
    except Exception as err:  # pydantic_core raises its own serialisation errors
        raise TypeError(f"{what} cannot be kept: it is not JSON-encodable ({err})") from err
    if len(encoded) > max_bytes:
        raise ValueError(
            f"{what} cannot be kept: {len(encoded)} bytes encoded, "
            f"over the {max_bytes}-byte limit (max_payload_bytes)"
        )
    return encoded

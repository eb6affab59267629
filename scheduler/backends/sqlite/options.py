"""The query options a SQLite URL may carry (``sqlite:///path.db?synchronous=normal``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from tickwork.scheduler.backends.options import UrlOptions


class SQLiteOptions(UrlOptions):
    """The query options a SQLite URL may carry."""

    synchronous: Literal["full", "normal", "extra"] = Field(
        default="full", description="PRAGMA synchronous: full survives a power cut"
    )
    busy_timeout_ms: int = Field(
        default=30_000, ge=0, description="how long a writer waits for another's transaction"
    )

    @field_validator("synchronous", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

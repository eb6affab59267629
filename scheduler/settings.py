"""Settings: a typed object built from arguments, environment variables and a TOML file.

Precedence, highest first: arguments to ``App``/``Settings``, ``TICKWORK_*`` environment
variables, the ``[tickwork]`` table of the file named by ``TICKWORK_CONFIG`` (or
``tickwork.toml`` in the working directory), then the defaults below.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError

from tickwork.scheduler.backends import DEFAULT_URL
from tickwork.scheduler.errors import ConfigurationError


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: str = DEFAULT_URL
    default_queue: str = "default"
    max_payload_bytes: int = Field(default=256 * 1024, gt=0)
    default_timeout_s: float = Field(default=300.0, gt=0)
    #: keep what every task returns (a task's own ``keep_result`` wins)
    keep_results: bool = False
    #: how long a result is kept when the task does not say
    result_retention_s: float = Field(default=86_400.0, gt=0)
    #: how long a durable run's journal entries are kept after each is written, and after
    #: the run's wake-up from a sleep or wait (its workers all down longer than that, the
    #: run's steps would run again)
    durable_retention_s: float = Field(default=7 * 86_400.0, gt=0)
    #: how long a batch's records (member outcomes, counts) are kept after its last due time
    batch_retention_s: float = Field(default=7 * 86_400.0, gt=0)
    #: records kept in each schedule's ledger, the newest (0: no ledger is written)
    history_keep: int = Field(default=100, ge=0)
    #: how long a ledger record is kept at most
    history_max_age_s: float = Field(default=30 * 86_400.0, gt=0)
    #: how long ``delay``/``schedule``/``enqueue_many`` wait for room in a full queue
    enqueue_block_s: float = Field(default=60.0, ge=0)
    #: encryption at rest (``scheduler.encryption``): keys, comma-separated, newest first
    #: ("": off)
    encryption_keys: str = Field(default="", repr=False)
    #: how a run's span (OpenTelemetry) refers to the span that enqueued its message:
    #: "link" (the run starts a trace of its own, linked to it) or "child" (one trace
    #: from the enqueue through every run it leads to)
    trace_runs: Literal["link", "child"] = "link"

    @classmethod
    def load(cls, **overrides: Any) -> Settings:
        """Defaults, then the config file, then the environment, then ``overrides``."""
        values: dict[str, Any] = {}
        path = Path(os.environ.get("TICKWORK_CONFIG", "tickwork.toml"))
        if path.is_file():
            try:
                values.update(tomllib.loads(path.read_text()).get("tickwork", {}))
            except tomllib.TOMLDecodeError as err:
                raise ConfigurationError(f"{path}: {err}") from err
        for name in cls.model_fields:
            env = os.environ.get(f"TICKWORK_{name.upper()}")
            if env:
                values[name] = env
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(values)
        except PydanticValidationError as err:
            raise ConfigurationError(f"invalid settings: {err}") from err

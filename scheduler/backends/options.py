"""Backend URL options: each backend declares a typed pydantic model of the query-string
options it accepts, and ``parse_options`` turns a URL's query into one, so an unknown or
malformed option is one clear ``ConfigurationError`` on every backend."""

from __future__ import annotations

from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from tickwork.scheduler.errors import ConfigurationError

M = TypeVar("M", bound=BaseModel)


class UrlOptions(BaseModel):
    """Base of the options models: frozen, and unknown names are refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def parse_options(model: type[M], url: str, backend: str) -> M:
    """The query options of ``url`` as ``model`` (the last value of a repeated option wins).

    Raises ``ConfigurationError`` naming every unknown or invalid option and the options
    the backend knows."""
    query = {k: v[-1] for k, v in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}
    try:
        return model.model_validate(query)
    except PydanticValidationError as err:
        problems = []
        for error in err.errors():
            name = ".".join(str(part) for part in error["loc"]) or "options"
            if error["type"] == "extra_forbidden":
                problems.append(f"unknown option {name!r}")
            else:
                problems.append(f"{name}: {error['msg']}")
        known = ", ".join(sorted(f.alias or name for name, f in model.model_fields.items()))
        raise ConfigurationError(
            f"invalid {backend} URL {redacted(url)!r}: {'; '.join(problems)} "
            f"(known options: {known})"
        ) from None


def redacted(url: str) -> str:
    """``url`` without its password (fit for an error message or a log line)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def sqlite_file(url: str) -> str | None:
    """The file a ``sqlite://`` URL names (``sqlite:///rel.db`` -> ``rel.db``,
    ``sqlite:////abs.db`` -> ``/abs.db``); ``""`` if it names none; None for a server URL."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "sqlite":
        return None
    if parts.netloc:
        return parts.netloc + parts.path
    return parts.path[1:]  # sqlite:///rel.db has the path /rel.db; sqlite:////abs.db //abs.db

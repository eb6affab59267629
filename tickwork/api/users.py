"""``Users``: a guard for a standalone dashboard and API with users and tokens, each with
a role (``tickwork.api.roles``), read from a TOML file::

    [users.ann]
    password = "scrypt$16384$8$1$..."      # tickwork users hash
    role = "admin"

    [tokens.deploy-bot]
    sha256 = "9f86d0..."                    # tickwork users token deploy-bot
    role = "operator"

A person signs in with HTTP basic (the browser asks once); a program sends its token as
a bearer token. Passwords are kept as scrypt hashes (the standard library's), tokens as
SHA-256 digests (they are random: nothing to guess). Every action is recorded with the
user's name (``ann``) or the token's (``token:deploy-bot``). Failed sign-ins are counted
per client address: past ``FAILURES_MOST`` in ``FAILURES_WINDOW_S``, that address is
answered 429 until the window has passed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
import time
import tomllib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from starlette.requests import Request

from tickwork.api.roles import Role
from tickwork.api.security import CSRF_COOKIE, Refused

#: failed sign-ins an address may make in the window before it is turned away
FAILURES_MOST = 5
FAILURES_WINDOW_S = 300.0

_SCRYPT = (2**14, 8, 1)  # n, r, p: about 50 ms a check on this machine


def hash_password(password: str) -> str:
    """A password as the users file keeps it (``scrypt$n$r$p$salt$digest``)."""
    n, r, p = _SCRYPT
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=32)
    encoded = (base64.b64encode(part).decode() for part in (salt, digest))
    return "$".join(["scrypt", str(n), str(r), str(p), *encoded])


def check_password(password: str, stored: str) -> bool:
    """Whether ``password`` is the one ``stored`` was made from."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        wanted = base64.b64decode(digest, validate=True)
        given = hashlib.scrypt(
            password.encode(),
            salt=base64.b64decode(salt, validate=True),
            n=int(n),
            r=int(r),
            p=int(p),
            dklen=len(wanted),
        )
    except (ValueError, binascii.Error):
        return False
    return hmac.compare_digest(given, wanted)


def token_digest(token: str) -> str:
    """What the users file keeps of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Account:
    name: str
    role: Role
    password: str = ""  # a scrypt hash (users)
    sha256: str = ""  # a token's digest (tokens)


@dataclass
class Users:
    """The guard of users and tokens with roles (see the module's docstring)."""

    accounts: dict[str, Account]
    tokens: dict[str, Account]  # by digest
    csrf_field: str = "csrf"
    _checked: dict[str, Account] = field(default_factory=dict)  # basic credentials seen good
    _failures: dict[str, deque[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, path: str | Path) -> Users:
        """The users and tokens of a TOML file; ``ValueError`` saying what is wrong."""
        try:
            data = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as err:
            raise ValueError(f"cannot read the users file {path}: {err}") from err
        accounts, tokens = {}, {}
        for name, entry in dict(data.get("users", {})).items():
            if not str(entry.get("password", "")).startswith("scrypt$"):
                raise ValueError(f"user {name!r}: give password as a hash (tickwork users hash)")
            accounts[name] = Account(
                name, Role.named(str(entry.get("role", ""))), entry["password"]
            )
        for name, entry in dict(data.get("tokens", {})).items():
            digest = str(entry.get("sha256", ""))
            if len(digest) != 64:
                raise ValueError(f"token {name!r}: give its sha256 (tickwork users token)")
            tokens[digest] = Account(f"token:{name}", Role.named(str(entry.get("role", ""))))
        if not accounts and not tokens:
            raise ValueError(f"the users file {path} names no user and no token")
        return cls(accounts, tokens)

    # -- the Guard -------------------------------------------------------------------------

    def authenticate(self, request: Request) -> None:
        self._account(request)

    def may_act(self, request: Request) -> bool:
        return self.role(request) >= Role.OPERATOR

    def role(self, request: Request) -> Role:
        return self._account(request).role

    def csrf_token(self, request: Request) -> tuple[str, bool]:
        return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32), True

    def allow_action(self, request: Request, form_token: str | None) -> None:
        if not self.may_act(request):
            raise Refused(403, "viewers may not act")
        cookie = request.cookies.get(CSRF_COOKIE)
        if not cookie or not form_token or not hmac.compare_digest(cookie, form_token):
            raise Refused(403, "missing or wrong CSRF token: reload the page and try again")

    def actor(self, request: Request) -> str:
        return self._account(request).name

    # -- who is asking ---------------------------------------------------------------------

    def _account(self, request: Request) -> Account:
        found = getattr(request.state, "tickwork_account", None)
        if isinstance(found, Account):
            return found
        address = request.client.host if request.client else ""
        self._refuse_if_locked_out(address)
        account = self._presented(request.headers.get("authorization", ""))
        if account is None:
            self._failed(address, request.headers.get("authorization") is not None)
            raise Refused(401, "sign in: a user's name and password, or a token")
        request.state.tickwork_account = account
        return account

    def _presented(self, header: str) -> Account | None:
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer":
            return self.tokens.get(token_digest(value.strip()))
        if scheme.lower() != "basic":
            return None
        key = hashlib.sha256(value.strip().encode()).hexdigest()
        with self._lock:
            known = self._checked.get(key)
        if known is not None:
            return known
        try:
            name, _, password = (
                base64.b64decode(value.strip(), validate=True).decode().partition(":")
            )
        except (binascii.Error, UnicodeDecodeError):
            return None
        account = self.accounts.get(name)
        if account is None:
            return self.tokens.get(token_digest(password))  # a token as basic's password
        if not check_password(password, account.password):
            return None
        with self._lock:
            self._checked[key] = account
        return account

    def _refuse_if_locked_out(self, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            failures = self._failures.get(address)
            while failures and now - failures[0] > FAILURES_WINDOW_S:
                failures.popleft()
            locked = failures is not None and len(failures) >= FAILURES_MOST
        if locked:
            raise Refused(429, "too many failed sign-ins from this address: try again later")

    def _failed(self, address: str, tried: bool) -> None:
        if not tried:  # no credentials at all: the browser has not asked yet
            return
        with self._lock:
            self._failures.setdefault(address, deque()).append(time.monotonic())

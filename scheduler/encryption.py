"""Encryption at rest: ``Encryption(keys)``, a hook that encrypts every message body, every
result record (what a run returned, its progress note, its error), every ledger record
(histories, action logs) and the error texts of failed runs before a backend stores
them, with AES-SIV (``cryptography``'s ``AESSIV``, ``pip install 'tickwork[encryption]'``).

    app = App(hooks=[Encryption([new_key, old_key])])   # or TICKWORK_ENCRYPTION_KEYS=new,old

- The envelope (queue, key, priority, due time, lease) stays clear, so keyed lookup,
  scheduling, limits and every backend feature work unchanged; what a message carries
  (its task's arguments, its chain, its trigger) is not readable in the store.
- AES-SIV is deterministic (the same bytes under the same key give the same stored
  bytes), which a keyed message that is sent again needs (``Hook.encode_body``); it
  shows which stored messages are equal, nothing more.
- Several keys: the first encrypts, every one decrypts (each stored value names its key
  by the first 4 bytes of the key's SHA-256), so a key is rotated without downtime: add
  the new key first everywhere, and drop the old one once nothing written with it is
  kept. A value written before encryption was turned on is read as it is.
- A process without the key (a dashboard or a command line started without it) shows
  ``(encrypted: this app has no key for it)`` for error texts, no result and no history,
  and one clear error for a message; a worker
  without it sends a message to the poison queue as undecodable, its bytes kept as
  stored (replay it once the key is there).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence

from tickwork.scheduler.errors import ConfigurationError
from tickwork.scheduler.hooks import Hook

#: the first bytes of every value this hook stores (JSON never starts with a NUL)
MAGIC = b"\x00tw-siv1"

_KEY_BYTES = 64  # AES-SIV with two 256-bit keys


class Encryption(Hook):
    """Encrypts bodies and the data kept beside them with ``keys`` (base64, newest first:
    the first encrypts, every one decrypts)."""

    def __init__(self, keys: Sequence[str | bytes]) -> None:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESSIV
        except ImportError as err:
            raise ConfigurationError(
                "encryption needs the cryptography package: pip install 'tickwork[encryption]'"
            ) from err
        if not keys:
            raise ConfigurationError("encryption needs at least one key (Encryption.new_key())")
        self._ciphers: dict[bytes, AESSIV] = {}
        self._order: list[bytes] = []
        for key in keys:
            raw = _raw_key(key)
            key_id = hashlib.sha256(raw).digest()[:4]
            self._ciphers[key_id] = AESSIV(raw)
            self._order.append(key_id)

    @staticmethod
    def new_key() -> str:
        """A fresh random key, as ``Encryption`` and ``TICKWORK_ENCRYPTION_KEYS`` take it."""
        from cryptography.hazmat.primitives.ciphers.aead import AESSIV

        return base64.urlsafe_b64encode(AESSIV.generate_key(_KEY_BYTES * 8)).decode()

    def encode_body(self, body: bytes) -> bytes:
        return self._seal(body)

    def decode_body(self, body: bytes) -> bytes:
        return self._open(body)

    def encode_data(self, data: bytes) -> bytes:
        return self._seal(data)

    def decode_data(self, data: bytes) -> bytes:
        return self._open(data)

    def _seal(self, plain: bytes) -> bytes:
        key_id = self._order[0]
        return MAGIC + key_id + self._ciphers[key_id].encrypt(plain, None)

    def _open(self, stored: bytes) -> bytes:
        if not stored.startswith(MAGIC):
            return stored  # written before encryption was turned on
        key_id = stored[len(MAGIC) : len(MAGIC) + 4]
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise ValueError(f"encrypted with a key this app does not have (id {key_id.hex()})")
        return cipher.decrypt(stored[len(MAGIC) + 4 :], None)


def _raw_key(key: str | bytes) -> bytes:
    if isinstance(key, bytes) and len(key) == _KEY_BYTES:
        return key
    try:
        raw = base64.urlsafe_b64decode(key if isinstance(key, bytes) else key.strip().encode())
    except (binascii.Error, ValueError) as err:
        raise ConfigurationError(f"an encryption key is base64: {err}") from None
    if len(raw) != _KEY_BYTES:
        raise ConfigurationError(
            f"an encryption key is {_KEY_BYTES} bytes (base64), not {len(raw)}: "
            "make one with Encryption.new_key() or tickwork encryption-key"
        )
    return raw


def keys_of(setting: str) -> list[str]:
    """The keys of the ``encryption_keys`` setting (comma-separated, newest first)."""
    return [key.strip() for key in setting.split(",") if key.strip()]

"""Encryption at rest: ``App(hooks=[Encryption(key)])`` (or ``TICKWORK_ENCRYPTION_KEYS``)
encrypts every body and value the app stores (extra ``encryption``)."""

from tickwork.scheduler.encryption import Encryption

__all__ = ["Encryption"]

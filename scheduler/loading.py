"""Finding the ``App`` a command names: ``tickwork worker -A module``, ``$TICKWORK_APP``,
a process pool's child and Django's settings all name it the same way."""

from __future__ import annotations

import importlib

from tickwork.scheduler.app import App


def load_app(reference: str) -> App:
    """Import ``module`` or ``module:attribute`` and return its ``App``."""
    module_name, _, attribute = reference.partition(":")
    module = importlib.import_module(module_name)
    if attribute:
        found = getattr(module, attribute, None)
        if not isinstance(found, App):
            raise TypeError(f"{reference!r} is not a tickwork App")
        return found
    # ``type()``, not ``isinstance``: a lazy proxy (Django's ``settings``) answers
    # ``isinstance`` by loading what it stands for, which may fail at import time
    apps: list[App] = [v for v in vars(module).values() if issubclass(type(v), App)]
    if len(apps) != 1:
        raise TypeError(
            f"module {module_name!r} defines {len(apps)} App objects; "
            f"name one as {module_name}:NAME"
        )
    return apps[0]

"""``load_app``: the App of a module given to ``tickwork worker -A``."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from tickwork.scheduler import App
from tickwork.scheduler.loading import load_app


class LazyProxy:
    """Like Django's ``settings``: asking its class loads what it stands for, which
    fails until the program configures it."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("settings are not configured")


@pytest.fixture
def module() -> Iterator[types.ModuleType]:
    made = types.ModuleType("tw_load_app_probe")
    sys.modules[made.__name__] = made
    yield made
    del sys.modules[made.__name__]


def test_a_lazy_proxy_beside_the_app_is_left_alone(module: types.ModuleType) -> None:
    app = App("sqlite:////nonexistent/never-opened.db")
    module.settings = LazyProxy()  # type: ignore[attr-defined]
    module.app = app  # type: ignore[attr-defined]
    assert load_app(module.__name__) is app


def test_no_app_or_two_apps_is_one_clear_error(module: types.ModuleType) -> None:
    with pytest.raises(TypeError, match="defines 0 App objects"):
        load_app(module.__name__)
    module.a = App("sqlite:////nonexistent/a.db")  # type: ignore[attr-defined]
    module.b = App("sqlite:////nonexistent/b.db")  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="defines 2 App objects"):
        load_app(module.__name__)
    assert load_app(f"{module.__name__}:b") is module.b

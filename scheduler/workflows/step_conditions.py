"""A graph step's condition (``after(..., condition=fn)``): a module-level function of
what the step would take from its parents, stored by its import path, which the worker
imports and asks when the step is about to start (``workers/workflows/graph_fanin.py``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.registry import module_name

#: a step's condition: a function of what the step would take from its parents
Condition = Callable[[Any], bool]


def condition_path(task: str, condition: Condition) -> str:
    """Where the worker finds ``condition``: ``module:qualname`` (the module by the name
    a worker imports it by, also for a script run as ``python module.py``). Raises
    ``InvalidMessage`` if it cannot be found again by that path (a lambda, a function
    inside a function, a callable object)."""
    module = getattr(condition, "__module__", None)
    qualname = getattr(condition, "__qualname__", None)
    if not callable(condition) or not module or not qualname or "<" in qualname:
        raise InvalidMessage(
            f"step {task}: a condition must be a function defined at module level "
            f"(the worker imports it by name), not {condition!r}"
        )
    if _attribute(sys.modules.get(module), qualname) is not condition:
        raise InvalidMessage(
            f"step {task}: condition {module}:{qualname} is not found again by that name "
            "(define it at module level, under its own name)"
        )
    return f"{module_name(module)}:{qualname}"


def resolve_condition(path: str) -> Any:
    """The function ``module:qualname`` names (None if there is none): from the module
    already loaded (the script run as ``__main__`` too), else imported."""
    name, _, qualname = path.partition(":")
    module = sys.modules.get(name)
    main = sys.modules.get("__main__")
    if module is None and main is not None and module_name("__main__") == name:
        module = main
    if module is None:
        try:
            module = importlib.import_module(name)
        except ImportError:
            return None
    return _attribute(module, qualname)


def _attribute(owner: Any, qualname: str) -> Any:
    for part in qualname.split("."):
        owner = getattr(owner, part, None)
    return owner

"""An ordered list of plug-ins: the run outcomes and riders of settling
(``workers/settling/``) and the boot steps (``workers/boot.py``). A component reads the
list when it is made; ``add`` returns what takes the addition back (a test's plug-in)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registered(Generic[T]):
    """An ordered list of plug-ins; ``add`` returns what takes the addition back."""

    def __init__(self, *items: T) -> None:
        self._items = list(items)

    def add(self, item: T, *, before: type | None = None) -> Callable[[], None]:
        """Add ``item`` last, or before the first item of class ``before``."""
        index = len(self._items)
        if before is not None:
            index = next(
                (i for i, found in enumerate(self._items) if isinstance(found, before)), index
            )
        self._items.insert(index, item)
        return lambda: self._items.remove(item)

    def __iter__(self) -> Iterator[T]:
        return iter(tuple(self._items))

"""Graphs the tests build: a mesh of ``width`` steps per level over ``depth`` levels,
each step after the step in the same place and the next place of the level before (two
parents each, a fan-in and a fan-out of two), so every level joins."""

from __future__ import annotations

from collections.abc import Callable

from tickwork.scheduler import After, Call, after


def mesh_name(level: int, place: int) -> str:
    return f"s{level}_{place}"


def mesh(width: int, depth: int, call: Callable[[int, int], Call]) -> dict[str, Call | After]:
    """The steps of a ``width`` x ``depth`` mesh, ``call(level, place)`` each."""
    steps: dict[str, Call | After] = {}
    for level in range(depth):
        for place in range(width):
            made = call(level, place)
            if level == 0:
                steps[mesh_name(level, place)] = made
            else:
                parents = {mesh_name(level - 1, place), mesh_name(level - 1, (place + 1) % width)}
                steps[mesh_name(level, place)] = after(sorted(parents), made)
    return steps

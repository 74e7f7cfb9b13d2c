"""Turning a ``param_space`` into concrete trial configs.

A param space is a nested structure of dicts and lists whose leaves are plain values,
:class:`~actorrt.tune.Domain`\\ s, or grid markers ``{"grid_search": [...]}``. One *sample*
expands every grid marker (the cartesian product, the last grid in the space varying fastest)
and, for each grid point, draws every domain once. ``sample_from`` functions run last, in
rounds, so one may read values that others produce.
"""

from __future__ import annotations

import inspect
import itertools
import random
from collections.abc import Callable, Iterator
from typing import Any

from .sample import Domain, Function

Path = tuple[Any, ...]

__all__ = ["count_grid_points", "resolve_variants"]

_SAMPLE_FROM_ROUNDS = 10


def _is_grid(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and "grid_search" in value


def _walk(space: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every leaf (path, value); a grid marker counts as a leaf."""
    if _is_grid(space):
        yield path, space
    elif isinstance(space, dict):
        for key, value in space.items():
            yield from _walk(value, (*path, key))
    elif isinstance(space, list):
        for i, value in enumerate(space):
            yield from _walk(value, (*path, i))
    else:
        yield path, space


def _copy_structure(value: Any, keep: frozenset[int] = frozenset()) -> Any:
    """Copy the dicts and lists, share the leaves (refs and other objects need not copy).
    The objects whose ids are in ``keep`` are shared, not copied (grid markers about to be
    replaced: copying a long grid's list for every one of its points would cost the
    square of its length)."""
    if id(value) in keep:
        return value
    if isinstance(value, dict):
        return {k: _copy_structure(v, keep) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_structure(v, keep) for v in value]
    return value


def _get(config: Any, path: Path) -> Any:
    for key in path:
        config = config[key]
    return config


def _set(config: Any, path: Path, value: Any) -> None:
    for key in path[:-1]:
        config = config[key]
    config[path[-1]] = value


def _grid_axes(space: Any) -> list[tuple[Path, list[Any]]]:
    axes = []
    for path, value in _walk(space):
        if _is_grid(value):
            values = value["grid_search"]
            if not isinstance(values, list | tuple) or not values:
                raise ValueError(
                    f"grid_search at {'/'.join(map(str, path))} needs a non-empty list, "
                    f"got {values!r}"
                )
            axes.append((path, list(values)))
    return axes


def count_grid_points(space: dict[str, Any]) -> int:
    """How many configs one sample of ``space`` expands to (the grid's size)."""
    total = 1
    for _, values in _grid_axes(space):
        total *= len(values)
    return total


class _AttrDict(dict[str, Any]):
    """A dict that also reads its keys as attributes (``config.lr``), as in Ray."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        return _AttrDict(value) if isinstance(value, dict) else value


class _SampleConfig(_AttrDict):
    """What a ``sample_from`` function receives: the config being built, as in Ray 2.60
    (``lambda config: config["lr"] * 10`` or ``config.lr``). The older spelling
    ``lambda spec: spec.config.lr`` works too: ``.config`` is the config itself, unless
    the config has a key ``"config"`` of its own (then that key's value)."""

    def __getattr__(self, name: str) -> Any:
        if name == "config" and "config" not in self:
            return self
        return super().__getattr__(name)


def _call(func: Callable[..., Any], config: dict[str, Any]) -> Any:
    """``func(config)``, or ``func()`` for a function of no arguments (as Ray allows)."""
    try:
        inspect.signature(func).bind(None)
    except TypeError:
        try:
            inspect.signature(func).bind()
        except TypeError:
            raise ValueError(
                f"sample_from({func!r}): the function must take the config as its one "
                "argument (or no argument)"
            ) from None
        return func()
    except ValueError:  # no signature to read (a builtin): pass the config
        pass
    return func(_SampleConfig(config))


def _resolve_functions(config: dict[str, Any], functions: list[tuple[Path, Function]]) -> None:
    left = functions
    for _ in range(_SAMPLE_FROM_ROUNDS):
        if not left:
            return
        retry: list[tuple[Path, Function]] = []
        errors: list[BaseException] = []
        for path, fn in left:
            try:
                value = _call(fn.func, config)
            except (AttributeError, KeyError, TypeError) as exc:
                # It may read a value another sample_from has not produced yet.
                retry.append((path, fn))
                errors.append(exc)
                continue
            _set(config, path, value)
        if len(retry) == len(left):
            where = "/".join(map(str, retry[0][0]))
            raise ValueError(f"sample_from at {where} failed: {errors[0]!r}") from errors[0]
        left = retry
    if left:
        raise ValueError("sample_from functions depend on each other in a cycle")


def in_space_order(config: dict[str, Any], space: dict[str, Any]) -> dict[str, Any]:
    """``config`` with its keys (at every level) in the order of the param space's, then
    any others in their own order: tables show a config's columns in the order the user
    wrote them, whatever order a search algorithm built it in."""
    ordered: dict[str, Any] = {}
    for key, sub in space.items():
        if key in config:
            value = config[key]
            if isinstance(value, dict) and isinstance(sub, dict):
                value = in_space_order(value, sub)
            ordered[key] = value
    for key, value in config.items():
        ordered.setdefault(key, value)
    return ordered


def resolve_one(space: dict[str, Any], grid_point: dict[Path, Any], rng: random.Random) -> Any:
    """One config: the grid values given, every domain drawn with ``rng``."""
    replaced = frozenset(id(_get(space, path)) for path in grid_point)
    config = _copy_structure(space, replaced)
    for path, value in grid_point.items():
        _set(config, path, _copy_structure(value))
    functions: list[tuple[Path, Function]] = []
    for path, value in list(_walk(config)):
        if isinstance(value, Function):
            functions.append((path, value))
            _set(config, path, None)
        elif isinstance(value, Domain):
            _set(config, path, value._draw(rng))
    _resolve_functions(config, functions)
    return config


def resolve_variants(space: dict[str, Any], rng: random.Random) -> Iterator[dict[str, Any]]:
    """The configs of one sample of ``space``: one per grid point, domains drawn fresh."""
    axes = _grid_axes(space)
    paths = [path for path, _ in axes]
    for combo in itertools.product(*(values for _, values in axes)):
        config = resolve_one(space, dict(zip(paths, combo, strict=True)), rng)
        if not isinstance(config, dict):
            raise TypeError(f"param_space must be a dict, got {type(space).__name__}")
        yield config

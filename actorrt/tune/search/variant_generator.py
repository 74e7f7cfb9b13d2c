"""Turning a ``param_space`` into concrete trial configs.

A param space is a nested structure of dicts and lists whose leaves are plain values,
:class:`~actorrt.tune.Domain`\\ s, or grids (``{"grid_search": [...]}`` markers, or
``Categorical(...).grid()``). One *sample* expands every grid (the cartesian product in
Ray's order: the grids sorted by their path, the first varying fastest) and, for each grid
point, draws every domain once.
``sample_from`` functions run last, in rounds, so one may read values that others produce.
:func:`generate_variants` is Ray's generator of ``(resolved_vars, spec)`` pairs over the same.
"""

from __future__ import annotations

import itertools
import logging
import random
import re
from collections.abc import Iterator
from typing import Any

from ._samplers import as_rng
from .sample import Categorical, Domain, Function, SampleConfig, grid_search

Path = tuple[Any, ...]

__all__ = [
    "count_grid_points", "flatten_resolved_vars", "format_vars", "generate_variants",
    "grid_search", "resolve_variants",
]

logger = logging.getLogger("actorrt.tune.search")

_SAMPLE_FROM_ROUNDS = 10


def _is_grid(value: Any) -> bool:
    if isinstance(value, Domain):
        return value.is_grid()
    return isinstance(value, dict) and len(value) == 1 and "grid_search" in value


def is_search_value(value: Any) -> bool:
    """Whether ``value`` is searched: a domain or a grid."""
    return isinstance(value, Domain) or _is_grid(value)


def _grid_values(value: Any) -> Any:
    if isinstance(value, Categorical):
        return value.categories
    if isinstance(value, Domain):
        raise ValueError(f"only a Categorical domain can be a grid, got {value!r} with Grid()")
    return value["grid_search"]


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
            values = _grid_values(value)
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


def _call(fn: Function, config: dict[str, Any]) -> Any:
    """``fn.func(config)``, or ``fn.func()`` for a function of no arguments (as Ray allows)."""
    return fn.func(SampleConfig(config)) if fn.pass_config else fn.func()


def _resolve_functions(config: dict[str, Any], functions: list[tuple[Path, Function]]) -> None:
    left = functions
    for _ in range(_SAMPLE_FROM_ROUNDS):
        if not left:
            return
        retry: list[tuple[Path, Function]] = []
        errors: list[BaseException] = []
        for path, fn in left:
            try:
                value = _call(fn, config)
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


def _grid_points(space: Any) -> Iterator[dict[Path, Any]]:
    """Every grid point of ``space`` in Ray's order: the grids sorted by path, the first
    varying fastest."""
    axes = sorted(_grid_axes(space), key=lambda axis: tuple(map(str, axis[0])))
    paths = [path for path, _ in reversed(axes)]
    for combo in itertools.product(*(values for _, values in reversed(axes))):
        yield dict(zip(paths, combo, strict=True))


def _searched_paths(space: Any) -> list[Path]:
    return [path for path, value in _walk(space) if is_search_value(value)]


def resolve_variants_with_vars(
    space: dict[str, Any], rng: random.Random, constant_grid_search: bool = False
) -> Iterator[tuple[dict[Path, Any], dict[str, Any]]]:
    """The configs of one sample of ``space``, each with its resolved variables (the path
    of every grid and domain, mapped to the value it took): one config per grid point,
    domains drawn fresh for each; with ``constant_grid_search``, drawn once for the sample
    and kept for every grid point (those that depend on a grid value still differ)."""
    searched = _searched_paths(space)
    seed = rng.random() if constant_grid_search else None
    for point in _grid_points(space):
        draw = rng if seed is None else random.Random(seed)
        config = resolve_one(space, point, draw)
        if not isinstance(config, dict):
            raise TypeError(f"param_space must be a dict, got {type(space).__name__}")
        yield {path: _get(config, path) for path in searched}, config


def resolve_variants(
    space: dict[str, Any], rng: random.Random, constant_grid_search: bool = False
) -> Iterator[dict[str, Any]]:
    """The configs of :func:`resolve_variants_with_vars`, without their variables."""
    for _, config in resolve_variants_with_vars(space, rng, constant_grid_search):
        yield config


def _clean_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return re.sub(r"[^a-zA-Z0-9_-]+", "_", str(value)).strip("_")


def format_vars(resolved_vars: dict[Path, Any]) -> str:
    """Resolved variables as an experiment tag, as Ray's ``format_vars``: ``key=value``
    pairs (the last key of each path) in path order, joined by commas; floats with four
    decimals, characters a folder name cannot hold replaced by ``_``."""
    return ",".join(
        f"{_clean_value(path[-1])}={_clean_value(value)}"
        for path, value in sorted(resolved_vars.items(), key=lambda kv: tuple(map(str, kv[0])))
    )


def flatten_resolved_vars(resolved_vars: dict[Path, Any]) -> dict[str, Any]:
    """Resolved variables keyed by ``"a/b"`` paths (a leading ``"config"`` dropped), as
    a trial's ``evaluated_params``."""
    flat = {}
    for path, value in resolved_vars.items():
        keys = path[1:] if path and path[0] == "config" else path
        flat["/".join(map(str, keys))] = value
    return flat


def generate_variants(
    unresolved_spec: dict[str, Any],
    constant_grid_search: bool = False,
    random_state: Any = None,
) -> Iterator[tuple[dict[Path, Any], dict[str, Any]]]:
    """Every variant of ``unresolved_spec``, as Ray's ``generate_variants``: pairs of
    ``(resolved_vars, spec)``, where ``spec`` is a resolved copy (one per grid point, the
    first grid in sorted path order varying fastest) and ``resolved_vars`` maps the path of
    each grid and domain, a tuple of keys, to the value it took.

    A ``sample_from`` function gets the whole spec being resolved, so one in
    ``{"config": {...}}`` reads ``spec.config.x``.

    Args:
        unresolved_spec: a dict of plain values, domains and grids.
        constant_grid_search: draw the random domains once and keep them for every grid
            point (those that depend on a grid value are drawn per point).
        random_state: an int seed, a ``random.Random``, a numpy generator, or None.

    Raises:
        ValueError: ``unresolved_spec`` is not a dict, or a domain cannot be resolved.
    """
    if not isinstance(unresolved_spec, dict):
        raise ValueError(
            f"generate_variants() takes a dict spec, got {type(unresolved_spec).__name__}"
        )
    rng = as_rng(random_state)
    axes = sorted(_grid_axes(unresolved_spec), key=lambda axis: tuple(map(str, axis[0])))
    searched = [path for path, value in _walk(unresolved_spec) if isinstance(value, Domain)]
    paths = [path for path, _ in axes]
    seed = rng.random()
    # Ray's order: the first grid (sorted by path) varies fastest.
    for combo in itertools.product(*(values for _, values in reversed(axes))):
        point = dict(zip(reversed(paths), combo, strict=True))
        draw = random.Random(seed) if constant_grid_search else rng
        spec = resolve_one(unresolved_spec, point, draw)
        resolved = {path: _get(spec, path) for path in paths}
        resolved.update((path, _get(spec, path)) for path in searched if path not in point)
        yield resolved, spec

"""Ray's ``SearchAlgorithm`` interface driven by hand: experiments in, ``Trial`` objects out.

Tune's controller asks a searcher ``suggest(trial_id)`` for configs. Ray's older interface,
which Ray's own tests and some programs drive directly, is ``add_configurations(experiments)``
then ``next_trial()`` until ``is_finished()``. :class:`TrialMaker` turns one experiment's
configs into the trials ``next_trial`` returns, named and tagged as Ray names them.
"""

from __future__ import annotations

import uuid
from typing import Any

from ..experiment.experiment import Experiment, convert_to_experiment_list
from ..experiment.trial import Trial
from .variant_generator import flatten_resolved_vars, format_vars, is_search_value

__all__ = ["TrialMaker", "convert_to_experiment_list", "merge_constants", "resolved_vars_of"]


class TrialMaker:
    """Makes one experiment's trials: ids ``<prefix>_<index>``, experiment tags
    ``<index>_<resolved vars>``, the experiment's trainable name, stop and failure limit."""

    def __init__(self, experiment: Experiment, start: int = 0, prefix: str | None = None) -> None:
        self.experiment = experiment
        self.counter = start
        self.prefix = prefix if prefix is not None else uuid.uuid4().hex[:5]

    def make(
        self, config: dict[str, Any], resolved_vars: dict[tuple[Any, ...], Any],
        trial_id: str | None = None,
    ) -> Trial:
        spec = self.experiment.spec
        tag = str(self.counter)
        if resolved_vars:
            tag += f"_{format_vars(resolved_vars)}"
        trial_id = trial_id or f"{self.prefix}_{self.counter:05d}"
        self.counter += 1
        stop = spec.get("stop")
        return Trial(
            self.experiment.run_identifier,
            config=config,
            trial_id=trial_id,
            experiment_tag=tag,
            evaluated_params=flatten_resolved_vars(resolved_vars),
            stopping_criterion=dict(stop) if isinstance(stop, dict) else None,
            max_failures=int(spec.get("max_failures") or 0),
        )


def resolved_vars_of(config: Any, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    """Every leaf of a suggested config by its path (a searcher's suggestion is all
    resolved variables)."""
    if isinstance(config, dict) and config:
        out: dict[tuple[Any, ...], Any] = {}
        for key, value in config.items():
            out.update(resolved_vars_of(value, (*path, key)))
        return out
    return {path: config} if path else {}


def merge_constants(space: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """``config`` over the plain values of ``space`` (as Ray merges a searcher's suggestion
    into the experiment's config): a key the searcher did not suggest keeps the space's
    constant; search domains the searcher left out stay out."""
    out: dict[str, Any] = {}
    for key, value in space.items():
        if key in config:
            continue
        if isinstance(value, dict) and not is_search_value(value):
            nested = merge_constants(value, {})
            if nested or not value:
                out[key] = nested
        elif not is_search_value(value) and not _holds_search_values(value):
            out[key] = value
    for key, value in config.items():
        sub = space.get(key)
        if isinstance(value, dict) and isinstance(sub, dict) and not is_search_value(sub):
            out[key] = merge_constants(sub, value)
        else:
            out[key] = value
    return out


def _holds_search_values(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return any(is_search_value(v) or _holds_search_values(v) for v in value)
    if isinstance(value, dict):
        return any(is_search_value(v) or _holds_search_values(v) for v in value.values())
    return False

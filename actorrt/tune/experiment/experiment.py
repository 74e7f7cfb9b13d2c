"""Ray's ``Experiment``: a trainable with its run settings, as ``tune.run`` and
``tune.run_experiments`` take it."""

from __future__ import annotations

import datetime
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..registry import resolve

__all__ = ["Experiment", "convert_to_experiment_list"]


class Experiment:
    """One experiment's trainable and settings (Ray's ``tune.Experiment``).

    ``run`` is a function trainable, a ``Trainable`` subclass or the name given to
    ``tune.register_trainable``. The other arguments mean what ``tune.run``'s of the same
    names mean; ``tune.run(experiment)`` runs it with them. ``spec`` holds them as Ray's
    does (``spec["run"]``, ``spec["stop"]``, ``spec["config"]``, ...).
    """

    def __init__(
        self,
        name: str | None,
        run: Any,
        *,
        stop: Any = None,
        time_budget_s: float | datetime.timedelta | None = None,
        config: dict[str, Any] | None = None,
        resources_per_trial: Any = None,
        num_samples: int = 1,
        storage_path: str | None = None,
        storage_filesystem: Any = None,
        sync_config: Any = None,
        checkpoint_config: Any = None,
        trial_name_creator: Callable[[Any], str] | None = None,
        trial_dirname_creator: Callable[[Any], str] | None = None,
        log_to_file: bool | str | tuple[str, str] = False,
        export_formats: Sequence[str] | None = None,
        max_failures: int = 0,
        restore: str | None = None,
        callbacks: Sequence[Any] | None = None,
        local_dir: str | None = None,
    ) -> None:
        trainable = resolve(run)
        if not callable(trainable):
            raise ValueError(
                f"Experiment(run=...) takes a function trainable, a Trainable subclass or a "
                f"registered name, got {type(run).__name__}: {run!r}"
            )
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"Experiment(config=...) must be a dict, got {config!r}")
        if not isinstance(num_samples, int) or num_samples == 0 or num_samples < -1:
            raise ValueError(f"Experiment(num_samples=...) must be a positive int or -1, "
                             f"got {num_samples!r}")
        self.name = name
        self.run_identifier = run if isinstance(run, str) else getattr(
            trainable, "__name__", type(trainable).__name__
        )
        self.spec: dict[str, Any] = {
            "run": trainable,
            "stop": stop,
            "time_budget_s": time_budget_s,
            "config": dict(config or {}),
            "resources_per_trial": resources_per_trial,
            "num_samples": num_samples,
            "storage_path": storage_path if local_dir is None else local_dir,
            "storage_filesystem": storage_filesystem,
            "sync_config": sync_config,
            "checkpoint_config": checkpoint_config,
            "trial_name_creator": trial_name_creator,
            "trial_dirname_creator": trial_dirname_creator,
            "log_to_file": log_to_file,
            "export_formats": export_formats,
            "max_failures": max_failures,
            "restore": restore,
            "callbacks": list(callbacks) if callbacks is not None else None,
        }

    @classmethod
    def from_json(cls, name: str, spec: dict[str, Any]) -> Experiment:
        """An experiment from a spec dict (Ray's ``Experiment.from_json``): ``run`` is
        required; the other keys are the constructor's arguments."""
        if "run" not in spec:
            raise ValueError(f"experiment {name!r}: its spec has no 'run' (the trainable)")
        known = set(inspect.signature(cls).parameters) - {"name", "run"}
        unknown = sorted(set(spec) - known - {"run"})
        if unknown:
            raise ValueError(
                f"experiment {name!r}: unknown spec key(s) {unknown}; allowed: "
                f"run, {', '.join(sorted(known))}"
            )
        rest = {k: v for k, v in spec.items() if k != "run"}
        return cls(name, spec["run"], **rest)

    def __repr__(self) -> str:
        return f"Experiment({self.name!r}, {self.run_identifier!r})"


def convert_to_experiment_list(experiments: Any) -> list[Experiment]:
    """``experiments`` as a list: an ``Experiment``, a list of them, or a dict of specs by
    name (each as :meth:`Experiment.from_json` takes it)."""
    if isinstance(experiments, dict):
        return [Experiment.from_json(name, spec) for name, spec in experiments.items()]
    if isinstance(experiments, Experiment):
        return [experiments]
    if isinstance(experiments, list) and all(isinstance(e, Experiment) for e in experiments):
        return list(experiments)
    raise TypeError(
        "experiments must be an Experiment, a list of them or a dict of specs by name, "
        f"got {type(experiments).__name__}: {experiments!r}"
    )

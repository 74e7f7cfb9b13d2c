"""``with_resources`` and ``PlacementGroupFactory``: normalised as Ray Tune does (no processes)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from actorrt import tune
from actorrt.tune.trainable._resources import resolve_resources


def train(config: dict[str, Any]) -> None:
    tune.report({"x": 1})


class MyTrainable(tune.Trainable):
    def step(self) -> dict[str, Any]:
        return {"done": True}


def bundles(trainable: Any, config: dict[str, Any] | None = None) -> list[dict[str, float]]:
    return resolve_resources(trainable, config or {}).bundles


def test_missing_or_empty_is_one_cpu_otherwise_only_what_is_given() -> None:
    assert bundles(train) == [{"CPU": 1.0}]
    assert bundles(tune.with_resources(train, {})) == [{"CPU": 1.0}]
    assert bundles(tune.with_resources(train, {"gpu": 1})) == [{"GPU": 1.0}]
    assert bundles(tune.with_resources(train, {"cpu": 0.5})) == [{"CPU": 0.5}]
    both = {"CPU": 2, "cpu": 2, "GPU": 1, "memory": 2**30, "TRAIN_DRIVER_RESOURCE": 1}
    assert bundles(tune.with_resources(train, both)) == [
        {"CPU": 2.0, "GPU": 1.0, "memory": float(2**30), "TRAIN_DRIVER_RESOURCE": 1.0}
    ]
    zero = resolve_resources(tune.with_resources(train, {"gpu": 0}), {})
    assert zero.head_bundle_is_empty and zero.bundles == [] and zero.group_bundles == [{}]


def test_the_wrapped_function_still_runs_as_before() -> None:
    wrapped = tune.with_resources(train, {"cpu": 2})
    assert wrapped.__name__ == "train" and wrapped.__wrapped__ is train
    assert not hasattr(train, "__actorrt_tune_resources__")  # the original is untouched
    partial = tune.with_resources(functools.partial(train), {"cpu": 1})
    assert bundles(partial) == [{"CPU": 1.0}]


def test_a_callable_is_decided_per_config() -> None:
    def per(config: dict[str, Any]) -> Any:
        if config["kind"] == "gpu":
            return {"gpu": 1}
        if config["kind"] == "gang":
            return tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": 2}], strategy="SPREAD")
        return {"cpu": 1}

    wrapped = tune.with_resources(train, per)
    assert bundles(wrapped, {"kind": "gpu"}) == [{"GPU": 1.0}]
    gang = resolve_resources(wrapped, {"kind": "gang"})
    assert gang.bundles == [{"CPU": 1.0}, {"CPU": 2.0}] and gang.strategy == "SPREAD"
    bad = tune.with_resources(train, lambda config: 3)
    with pytest.raises(ValueError, match="callable's result"):
        resolve_resources(bad, {})


def test_a_class_gets_a_subclass_with_default_resource_request() -> None:
    wrapped = tune.with_resources(MyTrainable, {"cpu": 2, "gpu": 1})
    assert issubclass(wrapped, MyTrainable) and wrapped is not MyTrainable
    factory = wrapped.default_resource_request({})
    assert factory == tune.PlacementGroupFactory([{"CPU": 2, "GPU": 1}])
    assert MyTrainable.default_resource_request({}) is None
    assert bundles(MyTrainable) == [{"CPU": 1.0}]


def test_objects_with_as_placement_group_factory_are_accepted() -> None:
    class ScalingConfig:
        def as_placement_group_factory(self) -> tune.PlacementGroupFactory:
            return tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": 1}, {"CPU": 1}])

    assert len(bundles(tune.with_resources(train, ScalingConfig()))) == 3
    assert len(bundles(tune.with_resources(train, lambda c: ScalingConfig()))) == 3


@pytest.mark.parametrize(
    ("trainable", "resources", "error", "match"),
    [
        ("train", {"cpu": 1}, ValueError, "function trainable or a tune.Trainable"),
        (object(), {"cpu": 1}, ValueError, "function trainable or a tune.Trainable"),
        (dict, {"cpu": 1}, ValueError, "function trainable or a tune.Trainable"),
        (train, {"cpu": 1, "CPU": 2}, ValueError, "'cpu'=1 and 'CPU'=2"),
        (train, {"gpu": -1}, ValueError, "gpu"),
        (train, {"gpu": 1.5}, ValueError, "GPU"),
        (train, {"cpu": "two"}, TypeError, "two"),
        (train, 4, ValueError, "must be a dict"),
    ],
)
def test_bad_input_is_refused_with_the_value(
    trainable: Any, resources: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        tune.with_resources(trainable, resources)


def test_placement_group_factory() -> None:
    factory = tune.PlacementGroupFactory(
        [{"CPU": 1, "GPU": 0}, {"cpu": 2, "gpu": 1}, {"CPU": 2, "GPU": 1}]
    )
    assert factory.bundles == [{"CPU": 1.0}, {"CPU": 2.0, "GPU": 1.0}, {"CPU": 2.0, "GPU": 1.0}]
    assert factory.required_resources == {"CPU": 5.0, "GPU": 2.0}
    assert factory.strategy == "PACK" and not factory.head_bundle_is_empty
    assert tune.PlacementGroupFactory([{}, {"CPU": 1}]).head_bundle_is_empty
    with pytest.raises(ValueError, match="bundle 1"):
        tune.PlacementGroupFactory([{"CPU": 1}, {}])
    with pytest.raises(ValueError, match="with zero bundles"):
        tune.PlacementGroupFactory([])
    with pytest.raises(TypeError, match="wrap it in a list"):
        tune.PlacementGroupFactory({"CPU": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="strategy"):
        tune.PlacementGroupFactory([{"CPU": 1}], strategy="TIGHT")


def test_tuner_refuses_what_is_not_a_trainable() -> None:
    with pytest.raises(ValueError, match="no trainable is registered as .my_trainable."):
        tune.Tuner("my_trainable")
    with pytest.raises(ValueError, match="param_space"):
        tune.Tuner(train, param_space=[1, 2])  # type: ignore[arg-type]

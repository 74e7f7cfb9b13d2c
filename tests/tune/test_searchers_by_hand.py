"""Ray's search algorithms driven by hand (``add_configurations`` / ``next_trial`` /
``is_finished``), points_to_evaluate checked as Ray checks them, the library searchers'
search-space conversions, and numpy's global seed deciding an unseeded sweep."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
from conftest import run_config

from actorrt import tune
from actorrt.train import ScalingConfig
from actorrt.tune import Experiment
from actorrt.tune.search import BasicVariantGenerator, Searcher
from actorrt.tune.search.repeater import Repeater
from actorrt.tune.search.sample import Categorical, Float, Integer
from actorrt.tune.search.search_generator import SearchGenerator


def report_config(config: dict[str, Any]) -> None:
    tune.report(dict(config))


def drain(search_alg: Any) -> list[Any]:
    trials = []
    while not search_alg.is_finished():
        trial = search_alg.next_trial()
        if trial is None:
            break
        trials.append(trial)
    return trials


def test_a_basic_variant_generator_hands_out_tagged_trials() -> None:
    searcher = BasicVariantGenerator()
    space = {"lr": tune.grid_search([0.1, 0.2]), "act": tune.grid_search(["relu", "tanh"]),
             "nested": {"depth": tune.sample_from(lambda spec: spec.config.lr * 10)},
             "fixed": "yes"}
    searcher.add_configurations(
        Experiment("exp", report_config, config=space, num_samples=2, max_failures=3,
                   stop={"training_iteration": 4})
    )
    assert searcher.total_samples == 8
    trials = drain(searcher)
    assert searcher.is_finished() and searcher.next_trial() is None
    assert len(trials) == 8
    # Ray's grid order: sorted by path ("act" before "lr"), the first varying fastest.
    assert [(t.config["act"], t.config["lr"]) for t in trials[:4]] == [
        ("relu", 0.1), ("tanh", 0.1), ("relu", 0.2), ("tanh", 0.2),
    ]
    first = trials[0]
    assert first.experiment_tag == "0_act=relu,lr=0.1000,depth=1.0000"  # in path order
    assert first.evaluated_params == {"act": "relu", "lr": 0.1, "nested/depth": 1.0}
    assert first.config["fixed"] == "yes" and first.config["nested"]["depth"] == 1.0
    assert first.trainable_name == "report_config"
    assert first.max_failures == 3 and first.stopping_criterion == {"training_iteration": 4}
    assert [t.experiment_tag.split("_")[0] for t in trials] == [str(i) for i in range(8)]
    assert len({t.trial_id for t in trials}) == 8


def test_max_concurrent_holds_next_trial_back_until_a_trial_completes() -> None:
    tune.register_trainable("by_hand_trainable", report_config)
    searcher = BasicVariantGenerator(max_concurrent=2)
    searcher.add_configurations({"exp": {"run": "by_hand_trainable", "num_samples": 3}})
    one, two = searcher.next_trial(), searcher.next_trial()
    assert one is not None and two is not None and searcher.next_trial() is None
    assert not searcher.is_finished()
    searcher.on_trial_complete(one.trial_id, None, False)
    three = searcher.next_trial()
    assert three is not None and three.trainable_name == "by_hand_trainable"
    searcher.on_trial_complete(two.trial_id)
    assert searcher.next_trial() is None and searcher.is_finished()


def test_points_that_set_a_grid_value_expand_fewer_trials_as_ray_counts_them() -> None:
    space = {"g1": tune.grid_search(["a", "b", "c", "d"]), "g2": tune.grid_search([1, 2, 3]),
             "x": tune.uniform(2.0, 10.0)}
    points = [{"g1": "b"}, {"g1": "a", "g2": 2}, {"x": 8.0}]
    searcher = BasicVariantGenerator(points_to_evaluate=points)
    searcher.add_configurations(Experiment("exp", report_config, config=space, num_samples=5))
    assert searcher.total_samples == 3 + 1 + 12 + 2 * 12
    configs = [t.config for t in drain(searcher)]
    assert len(configs) == searcher.total_samples
    assert [c["g1"] for c in configs[:3]] == ["b", "b", "b"]
    assert (configs[3]["g1"], configs[3]["g2"]) == ("a", 2)
    assert all(c["x"] == 8.0 for c in configs[4:16])


def test_constant_grid_search_keeps_a_samples_draws_for_each_grid_point() -> None:
    space = {"g": tune.grid_search([1, 2, 3]), "r": tune.uniform(0, 1000)}
    for constant in (False, True):
        searcher = BasicVariantGenerator(constant_grid_search=constant, random_state=3)
        searcher.add_configurations(Experiment("exp", report_config, config=space,
                                               num_samples=2))
        draws = [t.config["r"] for t in drain(searcher)]
        assert (len(set(draws[:3])) == 1) is constant and draws[0] != draws[3]


def test_a_point_key_the_space_lacks_is_rays_error_and_odd_values_are_logged(
    caplog: pytest.LogCaptureFixture, tmp_path: Any
) -> None:
    space = {"a": 1, "b": tune.randint(0, 3), "nested": {"c": tune.uniform(0, 1)}}
    searcher = BasicVariantGenerator(points_to_evaluate=[{"nested": {"d": 1}}])
    with pytest.raises(ValueError, match=r"Pre-set config key `nested/d` does not correspond "
                       r"to a valid key in the search space definition"):
        searcher.add_configurations(Experiment("exp", report_config, config=space))
    with pytest.raises(ValueError, match="Pre-set config key `zz`"):
        tune.Tuner(report_config, param_space=space, run_config=run_config(tmp_path),
                   tune_config=tune.TuneConfig(
                       search_alg=BasicVariantGenerator(points_to_evaluate=[{"zz": 1}]))
                   ).fit()
    with pytest.raises(TypeError, match="points_to_evaluate must be a list of dicts"):
        BasicVariantGenerator(points_to_evaluate=[("a", 1)])  # type: ignore[list-item]
    searcher = BasicVariantGenerator(points_to_evaluate=[{"a": 2, "b": 7}])
    searcher.add_configurations(Experiment("exp", report_config, config=space))
    with caplog.at_level(logging.WARNING, logger="actorrt.tune.search"):
        trial = searcher.next_trial()
    assert trial is not None and (trial.config["a"], trial.config["b"]) == (2, 7)
    messages = [r.getMessage() for r in caplog.records]
    assert "Pre-set value `2` is not equal to the value of parameter `a`: 1" in messages
    assert any(m.startswith("Pre-set value `7` is not within valid values of parameter `b`")
               for m in messages)


class Nested(Searcher):
    def __init__(self) -> None:
        super().__init__(metric="score", mode="max")
        self.index = 0
        self.completed: list[tuple[str, Any, bool]] = []

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        self.index += 1
        if self.index > 4:
            return Searcher.FINISHED
        return {"a": {"b": {"d": self.index, "e": 5}}}

    def on_trial_complete(self, trial_id: str, **kwargs: Any) -> None:  # type: ignore[override]
        self.completed.append((trial_id, kwargs["result"], kwargs["error"]))


def test_a_search_generator_makes_trials_from_its_searchers_suggestions() -> None:
    searcher = Nested()
    alg = SearchGenerator(searcher)
    assert alg.total_samples == 0 and alg.next_trial() is None
    alg.add_configurations({"exp": {"run": report_config, "num_samples": 3,
                                    "config": {"fixed": 7, "a": {"keep": True}}}})
    assert alg.total_samples == 3
    trials = drain(alg)
    assert len(trials) == 3 and alg.is_finished()
    assert trials[0].experiment_tag == "1_d=1,e=5"
    assert trials[0].config == {"fixed": 7, "a": {"keep": True, "b": {"d": 1, "e": 5}}}
    assert trials[0].evaluated_params == {"a/b/d": 1, "a/b/e": 5}
    alg.on_trial_complete(trials[0].trial_id, result={"score": 1})
    assert searcher.completed == [(trials[0].trial_id, {"score": 1}, False)]
    with pytest.raises(ValueError, match="makes the trials of one"):
        alg.add_configurations({"again": {"run": report_config}})
    more = SearchGenerator(Nested())
    more.add_configurations({"exp": {"run": report_config, "num_samples": 10}})
    assert len(drain(more)) == 4 and more.is_finished()  # the searcher said FINISHED


def test_a_repeater_through_a_search_generator_repeats_each_config() -> None:
    class Counting(Searcher):
        index = 0

        def suggest(self, trial_id: str) -> dict[str, Any]:
            self.index += 1
            return {"v": self.index}

    alg = SearchGenerator(Repeater(Counting(metric="m", mode="max"), repeat=4, set_index=False))
    alg.add_configurations({"exp": {"run": report_config, "num_samples": 10}})
    values = [t.evaluated_params["v"] for t in drain(alg)]
    assert values == [1, 1, 1, 1, 2, 2, 2, 2, 3, 3]


def test_a_searchers_suggestion_goes_over_the_param_spaces_constants(tmp_path: Any) -> None:
    class Empty(Searcher):
        def suggest(self, trial_id: str) -> dict[str, Any]:
            return {"x": 2}

    grid = tune.Tuner(
        report_config, param_space={"a": 1, "nested": {"b": "c"}, "x": tune.uniform(0, 1)},
        tune_config=tune.TuneConfig(search_alg=Empty(), num_samples=1, metric="a",
                                    mode="max"),
        run_config=run_config(tmp_path),
    ).fit()
    assert grid[0].config == {"a": 1, "nested": {"b": "c"}, "x": 2}
    assert grid[0].metrics["a"] == 1


def test_numpys_global_seed_decides_an_unseeded_sweep(tmp_path: Any) -> None:
    space = {"i": tune.randint(0, 100_000), "c": tune.choice(list(range(1000)))}

    def sweep(name: str) -> list[tuple[int, int]]:
        np.random.seed(1000)
        grid = tune.Tuner(report_config, param_space=space,
                          tune_config=tune.TuneConfig(num_samples=4),
                          run_config=run_config(tmp_path, name=name)).fit()
        return sorted((r.config["i"], r.config["c"]) for r in grid)

    assert sweep("one") == sweep("two")
    np.random.seed(1)
    searcher = BasicVariantGenerator()
    searcher.add_configurations(Experiment("exp", report_config, config=space, num_samples=4))
    assert sorted((t.config["i"], t.config["c"]) for t in drain(searcher)) != sweep("three")


def test_hyperopt_keeps_constants_and_searches_domains_inside_choices() -> None:
    from actorrt.tune.search.hyperopt import HyperOptSearch

    space = {"y": 4, "lst": [Integer(0, 10), Integer(0, 10)],
             "pick": Categorical([{"k": Categorical(["M", "N"])}, [Categorical(["Q", "R"]), 1]])}
    converted = HyperOptSearch.convert_search_space(space)
    assert converted["y"] == 4 and isinstance(converted["lst"], list)
    listed = HyperOptSearch(space={"y": 4, "lst": space["lst"]}, metric="m", mode="max",
                            points_to_evaluate=[{"y": 4, "lst": [2, 4]}])
    first = listed.suggest("0")
    assert isinstance(first, dict) and list(first["lst"]) == [2, 4] and first["y"] == 4
    searcher = HyperOptSearch(space=space, metric="m", mode="max", random_state_seed=0)
    for i in range(20):
        config = searcher.suggest(str(i))
        assert isinstance(config, dict)
        pick = config["pick"]
        assert pick in ({"k": "M"}, {"k": "N"}) or (pick[0] in ("Q", "R") and pick[1] == 1)
    with pytest.raises(RuntimeError, match="only contains constant variables"):
        HyperOptSearch().set_search_properties("a", "max", {"a": 4})


def test_nevergrad_drops_quantization_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    import nevergrad as ng

    from actorrt.tune.search.nevergrad import NevergradSearch

    with caplog.at_level(logging.WARNING, logger="actorrt.tune.search"):
        space = NevergradSearch.convert_search_space({"x": Integer(0, 5).quantized(2)})
    assert "Nevergrad does not support quantization" in caplog.text
    searcher = NevergradSearch(optimizer=ng.optimizers.RandomSearchMaker(
        sampler="parametrization"), space=space, metric="m", mode="max")
    assert all(searcher.suggest(str(i))["x"] in range(5) for i in range(30))  # type: ignore[index]


def test_bohb_drops_quantization_keeping_rays_bounds(caplog: pytest.LogCaptureFixture) -> None:
    from actorrt.tune.search.bohb import TuneBOHB

    with caplog.at_level(logging.WARNING, logger="actorrt.tune"):
        space = TuneBOHB.convert_search_space({"x": Integer(0, 5).quantized(2),
                                               "f": tune.quniform(0.2, 1.0, 0.2)})
    assert (space["x"].lower, space["x"].upper) == (0, 4)
    assert space["f"].lower == pytest.approx(0.2) and space["f"].upper == pytest.approx(1.0)
    assert "TuneBOHB does not support quantization" in caplog.text


def test_zoopt_and_bayesopt_spaces_as_ray_converts_them() -> None:
    from zoopt import ValueType

    from actorrt.tune.search.bayesopt import BayesOptSearch
    from actorrt.tune.search.zoopt import ZOOptSearch

    assert ZOOptSearch.convert_search_space({"z": Float(-3, 7).uniform().quantized(1e-4)}) == {
        "z": (ValueType.CONTINUOUS, [-3, 7], 1e-4)
    }
    mixed = ZOOptSearch(dim_dict={"a": tune.uniform(5, 6),
                                  "b": (ValueType.CONTINUOUS, [8, 9], 1e-4)},
                        budget=5, metric="m", mode="max", parallel_num=2)
    config = mixed.suggest("0")
    assert isinstance(config, dict) and 5 <= config["a"] <= 6 and 8 <= config["b"] <= 9
    both = BayesOptSearch(space={"a": tune.uniform(5, 6), "b": (8.0, 9.0)}, metric="m",
                          mode="max")
    config = both.suggest("0")
    assert isinstance(config, dict) and 5 <= config["a"] <= 6 and 8 <= config["b"] <= 9
    for bad in ({"a/b": tune.uniform(4.0, 8.0)}, {"a": {"b/c": tune.uniform(4.0, 8.0)}}):
        with pytest.raises(ValueError, match="may not hold '/'"):
            BayesOptSearch().set_search_properties("m", "max", bad)


def test_a_searcher_reads_a_nested_metric_by_its_slash_name(tmp_path: Any) -> None:
    from actorrt.tune.search.bayesopt import BayesOptSearch

    grid = tune.Tuner(
        report_config, param_space={"b": {"z": tune.uniform(1e-4, 1e-2)}},
        tune_config=tune.TuneConfig(search_alg=BayesOptSearch(metric="b/z", mode="max"),
                                    num_samples=2),
        run_config=run_config(tmp_path),
    ).fit()
    assert grid.num_errors == 0 and len(grid) == 2
    assert all(r.config["b"]["z"] < 1e-2 for r in grid)


def test_a_tpu_scaling_config_is_refused_naming_what_workers_can_have() -> None:
    with pytest.raises(ValueError, match=r"use_tpu=True\) is not supported.*CPUs.*use_gpu"):
        ScalingConfig(num_workers=2, use_tpu=True)
    with pytest.raises(ValueError, match="Cannot specify both"):
        ScalingConfig(num_workers=2, use_gpu=True, use_tpu=True)
    with pytest.raises(TypeError, match="topology='2x2x2' is not supported"):
        ScalingConfig(num_workers=2, topology="2x2x2")
    assert ScalingConfig(num_workers=2, use_tpu=False).num_workers == 2


def test_an_ax_search_on_a_client_with_its_experiment_suggests_at_once() -> None:
    from ax.service.ax_client import AxClient, ObjectiveProperties

    from actorrt.tune.search.ax import AxSearch

    client = AxClient(random_seed=1, verbose_logging=False)
    client.create_experiment(parameters=[{"name": "a", "type": "range", "bounds": [0.0, 1.0],
                                          "value_type": "float"}],
                             objectives={"m": ObjectiveProperties(minimize=False)})
    searcher = AxSearch(ax_client=client)
    assert (searcher.metric, searcher.mode) == ("m", "max")
    config = searcher.suggest("0")
    assert isinstance(config, dict) and 0.0 <= config["a"] <= 1.0

"""Search spaces, variant generation, the limiter and config validation (no processes)."""

from __future__ import annotations

import random
import warnings
from typing import Any

import pytest

from actorrt import tune
from actorrt.tune.search import BasicVariantGenerator, ConcurrencyLimiter, Searcher


def configs(
    space: dict[str, Any], num_samples: int = 1, seed: int | None = 0, **options: Any
) -> list[Any]:
    """Every config a BasicVariantGenerator(random_state=seed, **options) suggests."""
    searcher = BasicVariantGenerator(random_state=seed, **options)
    searcher.set_search_properties(None, None, space, num_samples=num_samples)
    out = []
    while True:
        config = searcher.suggest(f"t{len(out)}")
        if config == Searcher.FINISHED:
            return out
        out.append(config)


def test_every_domain_samples_within_its_bounds() -> None:
    rng = random.Random(1)
    for _ in range(500):
        assert 1 <= tune.uniform(1, 2).sample(rng) < 2
        q = tune.quniform(0, 1, 0.25).sample(rng)
        assert q in (0, 0.25, 0.5, 0.75, 1.0)
        assert 1e-4 <= tune.loguniform(1e-4, 1e-1).sample(rng) < 1e-1
        assert 0 <= tune.randint(0, 3).sample(rng) < 3
        assert tune.qrandint(2, 10, 4).sample(rng) in (4, 8)
        assert tune.qrandint(0, 10, 5).sample(rng) in (0, 5, 10)
        assert 1 <= tune.lograndint(1, 100).sample(rng) < 100
        assert tune.choice(["a", "b"]).sample(rng) in ("a", "b")
        assert isinstance(tune.randn(0, 1).sample(rng), float)
    picks = {tune.qrandint(0, 10, 5).sample(rng) for _ in range(200)}
    assert picks == {0, 5, 10}  # qrandint includes upper


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: tune.uniform(2, 1), "lower must be below upper"),
        (lambda: tune.loguniform(0, 1), "lower > 0"),
        (lambda: tune.quniform(0, 1, 0), "q"),
        (lambda: tune.randint(0, 1.5), "upper must be an int"),
        (lambda: tune.choice([]), "at least one"),
        (lambda: tune.choice("abc"), "list of values"),
        (lambda: tune.grid_search([]), "at least one"),
        (lambda: tune.randn(0, -1), "sd must be positive"),
        (lambda: tune.sample_from(3), "callable"),
    ],
)
def test_bad_domains_fail_where_they_are_written(make: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_grids_expand_and_repeat_per_sample_as_in_ray() -> None:
    space = {
        "a": tune.grid_search([1, 2, 3]),
        "nested": {"b": tune.grid_search(["x", "y"]), "c": tune.uniform(0, 1)},
        "fixed": 7,
    }
    found = configs(space, num_samples=2)
    assert len(found) == 3 * 2 * 2
    first = found[:6]
    # Ray's order: the grids sorted by path ("a" before "nested/b"), the first fastest.
    assert [(c["a"], c["nested"]["b"]) for c in first] == [
        (1, "x"), (2, "x"), (3, "x"), (1, "y"), (2, "y"), (3, "y"),
    ]
    assert [(c["a"], c["nested"]["b"]) for c in found[6:]] == [
        (c["a"], c["nested"]["b"]) for c in first
    ]
    assert len({c["nested"]["c"] for c in found}) == 12  # each drawn afresh
    assert all(c["fixed"] == 7 for c in found)
    assert "grid_search" not in str(found)


def test_sample_from_sees_the_resolved_config() -> None:
    space = {
        "lr": tune.choice([0.1, 0.2]),
        "double": tune.sample_from(lambda spec: spec.config.lr * 2),
        "chain": tune.sample_from(lambda spec: spec.config["double"] + 1),
    }
    for config in configs(space, num_samples=5):
        assert config["double"] == config["lr"] * 2
        assert config["chain"] == config["double"] + 1


def test_a_seed_reproduces_and_refs_are_not_copied() -> None:
    marker = object()
    space = {"x": tune.uniform(0, 1), "obj": marker, "g": tune.grid_search([1, 2])}
    one, two = configs(space, 3, seed=5), configs(space, 3, seed=5)
    assert one == two and one != configs(space, 3, seed=6)
    assert all(c["obj"] is marker for c in one)


def test_points_to_evaluate_come_first() -> None:
    searcher = BasicVariantGenerator(points_to_evaluate=[{"x": 0.5}], random_state=0)
    searcher.set_search_properties(None, None, {"x": tune.uniform(0, 0.1), "y": 1}, num_samples=2)
    first, second = searcher.suggest("a"), searcher.suggest("b")
    assert first == {"x": 0.5, "y": 1}
    assert isinstance(second, dict) and second["x"] < 0.1
    assert searcher.suggest("c") == Searcher.FINISHED


def test_concurrency_limiter_holds_back_until_trials_complete() -> None:
    limiter = ConcurrencyLimiter(BasicVariantGenerator(), max_concurrent=2)
    limiter.set_search_properties(None, None, {"a": tune.grid_search([1, 2, 3])})
    assert limiter.suggest("t0") == {"a": 1} and limiter.suggest("t1") == {"a": 2}
    assert limiter.suggest("t2") is None
    limiter.on_trial_complete("t0")
    assert limiter.suggest("t2") == {"a": 3}
    assert limiter.suggest("t3") is None  # full again, though the grid is exhausted
    limiter.on_trial_complete("t1")
    assert limiter.suggest("t3") == Searcher.FINISHED
    with pytest.raises(ValueError, match="at least 1"):
        ConcurrencyLimiter(BasicVariantGenerator(), 0)


def test_max_concurrent_trials_rules() -> None:
    assert tune.TuneConfig(max_concurrent_trials=None).max_concurrent_trials is None
    assert tune.TuneConfig(max_concurrent_trials=0).max_concurrent_trials == 0
    with pytest.raises(ValueError, match="-1"):
        tune.TuneConfig(max_concurrent_trials=-1)
    limited = ConcurrencyLimiter(BasicVariantGenerator(), 2)
    with pytest.raises(ValueError, match=r"max_concurrent_trials=3 .*max_concurrent=2"):
        tune.TuneConfig(search_alg=limited, max_concurrent_trials=3)
    tune.TuneConfig(search_alg=limited, max_concurrent_trials=2)  # same limit: accepted


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "best"}, "mode"),
        ({"num_samples": 0}, "num_samples"),
        ({"time_budget_s": -1}, "time_budget_s"),
        ({"search_alg": "optuna"}, "search_alg"),
        ({"scheduler": object()}, "scheduler"),
    ],
)
def test_bad_tune_config_values_fail_where_they_are_given(
    kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        tune.TuneConfig(**kwargs)


def test_bad_run_config_values_fail_where_they_are_given() -> None:
    with pytest.raises(ValueError, match="verbose"):
        tune.RunConfig(verbose=5)
    with pytest.raises(ValueError, match="stop"):
        tune.RunConfig(stop=3)
    with pytest.raises(ValueError, match="max_failures"):
        tune.FailureConfig(max_failures=-2)
    with pytest.raises(ValueError, match="num_to_keep"):
        tune.CheckpointConfig(num_to_keep=0)


def test_a_repeated_limit_warns_once_at_fit_time() -> None:
    from actorrt.tune.tune_config import limited_search_alg

    limited = ConcurrencyLimiter(BasicVariantGenerator(), 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert limited_search_alg(limited, 2) is limited
    assert len(caught) == 1 and "repeats" in str(caught[0].message)
    wrapped = limited_search_alg(BasicVariantGenerator(), 3)
    assert isinstance(wrapped, ConcurrencyLimiter) and wrapped.max_concurrent == 3


def test_constant_grid_search_keeps_a_samples_random_values_over_its_grid() -> None:
    # Ray's BasicVariantGenerator(constant_grid_search=True): a sample's random values are
    # drawn once and shared by its grid points; a value computed from the grid value
    # still follows it. The default draws them again for every grid point.
    space = {
        "grid": tune.grid_search([1, 2, 3]),
        "rand": tune.uniform(0, 1000),
        "by_grid": tune.sample_from(lambda spec: spec.config.grid * 10),
    }
    constant = configs(space, 4, seed=1, constant_grid_search=True)
    assert len(constant) == 12
    for i in range(0, 12, 3):
        sample = constant[i:i + 3]
        assert [c["grid"] for c in sample] == [1, 2, 3]
        assert [c["by_grid"] for c in sample] == [10, 20, 30]
        assert len({c["rand"] for c in sample}) == 1
    assert len({c["rand"] for c in constant}) == 4  # each sample draws its own
    fresh = configs(space, 4, seed=1)
    assert len({c["rand"] for c in fresh}) == 12
    with pytest.raises(TypeError, match="constant_grid_search must be True or False"):
        BasicVariantGenerator(constant_grid_search="yes")  # type: ignore[arg-type]

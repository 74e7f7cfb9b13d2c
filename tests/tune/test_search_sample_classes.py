"""Ray's search-space classes (``ray.tune.search.sample``) and ``generate_variants``, as
Ray documents them: domains hold one sampler, built by chaining ``Float(lo, hi).uniform()
.quantized(q)``; ``generate_variants`` yields ``(resolved_vars, spec)`` pairs."""

from __future__ import annotations

import math
from typing import Any

import pytest

from actorrt import tune
from actorrt.tune.search.sample import (
    Categorical,
    Domain,
    Float,
    Function,
    Grid,
    Integer,
    LogUniform,
    Normal,
    Quantized,
    Uniform,
)
from actorrt.tune.search.variant_generator import generate_variants, grid_search


def test_a_domain_holds_one_sampler_and_chains_return_copies() -> None:
    base = Float(1, 10)
    assert isinstance(base.get_sampler(), Uniform) and base.sampler is None
    log = base.loguniform()
    assert isinstance(log.get_sampler(), LogUniform) and base.sampler is None  # a copy
    quantized = log.quantized(1)
    sampler = quantized.get_sampler()
    assert isinstance(sampler, Quantized) and isinstance(sampler.get_sampler(), LogUniform)
    assert all(v == round(v) and 1 <= v <= 10 for v in quantized.sample(size=30, random_state=0))
    # Ray: a second sampler is refused unless allow_override.
    with pytest.raises(ValueError, match="You can only choose one sampler"):
        tune.uniform(0.5, 1).loguniform()
    domain = Float(0, 1).uniform()
    domain.set_sampler(LogUniform(), allow_override=True)
    assert isinstance(domain.get_sampler(), LogUniform)
    with pytest.raises(ValueError, match="Sampler instance"):
        domain.set_sampler("uniform")  # type: ignore[arg-type]


def test_float_samplers_as_ray_defines_them() -> None:
    assert all(2 <= v <= 4 for v in Float(2, 4).uniform().sample(size=20, random_state=1))
    normal = Float(None, None).normal(5, 0.1)
    assert isinstance(normal.get_sampler(), Normal) and normal.domain_str == "(-inf, inf)"
    draws = normal.sample(size=200, random_state=2)
    assert abs(sum(draws) / len(draws) - 5) < 0.05
    assert isinstance(tune.randn(), Float) and isinstance(tune.qrandn(0, 1, 0.5), Float)
    quantized = Float(0, 1).uniform().quantized(0.25)
    assert set(quantized.sample(size=50, random_state=3)) <= {0, 0.25, 0.5, 0.75, 1}
    with pytest.raises(ValueError, match="Uniform requires a lower bound"):
        Float(None, 1).uniform()
    with pytest.raises(ValueError, match="LogUniform requires a lower bound greater than 0"):
        Float(0, 1).loguniform()
    with pytest.raises(ValueError, match="is not divisible by quantization factor"):
        Float(0.05, 1).quantized(0.1)
    with pytest.raises(ValueError, match="sd must be positive"):
        Float(None, None).normal(0, 0)
    with pytest.warns(DeprecationWarning, match="base"):
        Float(1, 10).loguniform(base=2)


def test_integer_and_categorical_samplers() -> None:
    ints = Integer(1, 100).loguniform().sample(size=30, random_state=0)
    assert all(isinstance(v, int) and 1 <= v < 100 for v in ints)
    # Ray's rule: drawn from [0, 10), rounded to a multiple of 5, so 10 comes out.
    assert set(Integer(0, 10).uniform().quantized(5).sample(size=60, random_state=0)) == {
        0, 5, 10
    }
    assert isinstance(tune.qrandint(0, 10, 5).get_sampler(), Quantized)
    with pytest.raises(ValueError, match="LogUniform requires a lower bound greater than 0"):
        Integer(0, 10).loguniform()
    grid = Categorical(["a", "b"]).grid()
    assert grid.is_grid() and isinstance(grid.get_sampler(), Grid)
    assert not Categorical(["a"]).is_grid()
    with pytest.raises(RuntimeError, match="not sampled"):
        grid.sample()
    assert Categorical([1, 2]).uniform().sample(random_state=0) in (1, 2)
    assert tune.choice([1, 2]).domain_str == "[1, 2]" and tune.choice([1, 2]).is_valid(2)


def test_a_function_domain_takes_the_spec_or_nothing() -> None:
    assert Function(lambda: 7).sample() == 7
    assert Function(lambda spec: spec.config.x * 2).sample(config={"x": 4}) == 8
    assert Function(lambda config: config["x"] + 1).sample(config={"x": 4}) == 5
    assert Function(lambda: 1).is_function() and isinstance(Function(len), Domain)
    with pytest.raises(ValueError, match="0 or 1 parameters"):
        Function(lambda a, b: a)
    with pytest.raises(ValueError, match="callable"):
        Function(3)  # type: ignore[arg-type]


def test_generate_variants_yields_resolved_vars_and_spec() -> None:
    spec: dict[str, Any] = {"config": {
        "a": grid_search([1, 2]),
        "b": Categorical(["x", "y"]).grid(),
        "c": tune.uniform(0, 1),
        "d": tune.sample_from(lambda spec: spec.config.a * 10),
        "fixed": 3,
    }}
    variants = list(generate_variants(spec, random_state=0))
    assert len(variants) == 4
    # Ray's order: the first grid in sorted path order varies fastest.
    assert [(s["config"]["a"], s["config"]["b"]) for _, s in variants] == [
        (1, "x"), (2, "x"), (1, "y"), (2, "y")
    ]
    resolved, first = variants[0]
    assert set(resolved) == {("config", k) for k in "abcd"}  # sample_from is a domain too
    assert resolved[("config", "c")] == first["config"]["c"] and 0 <= first["config"]["c"] < 1
    assert first["config"]["d"] == 10 and first["config"]["fixed"] == 3
    assert isinstance(spec["config"]["c"], Float)  # the input is left as it was
    # constant_grid_search: one draw of the random values for every grid point.
    constant = list(generate_variants(spec, constant_grid_search=True, random_state=1))
    assert len({s["config"]["c"] for _, s in constant}) == 1
    assert len({s["config"]["c"] for _, s in generate_variants(spec, random_state=1)}) == 4
    assert list(generate_variants({"x": 1})) == [({}, {"x": 1})]
    with pytest.raises(ValueError, match="dict spec"):
        list(generate_variants([1]))  # type: ignore[arg-type]


def seen(config: dict[str, Any]) -> None:
    tune.report({"score": config["double"] + config["rate"], "mode": config["mode"]})


def test_a_sweep_expands_grid_domains_and_runs_spec_functions(tmp_path: Any) -> None:
    grid = tune.Tuner(
        seen,
        param_space={
            "mode": Categorical(["fast", "slow"]).grid(),
            "x": tune.randint(1, 5),
            "double": tune.sample_from(lambda spec: spec.config.x * 2),
            "rate": Float(1e-3, 1e-1).loguniform().quantized(1e-3),
        },
        tune_config=tune.TuneConfig(num_samples=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="domains", verbose=0),
    ).fit()
    assert len(grid) == 4 and not grid.errors
    assert sorted(r.config["mode"] for r in grid) == ["fast", "fast", "slow", "slow"]
    for result in grid:
        assert result.config["double"] == 2 * result.config["x"]
        rate = result.config["rate"]
        assert 1e-3 <= rate <= 1e-1 and math.isclose(rate / 1e-3, round(rate / 1e-3))


def test_quantized_ints_keep_rays_bounds_and_draws() -> None:
    """As in Ray: ``qrandint`` keeps ``upper`` as given; a draw with ``q > 1`` comes from
    the multiples' range and is rounded (so ``upper`` comes out); with ``q == 1`` it is
    ``randint``'s draw, ``upper`` excluded; a range without two multiples is refused."""
    domain = tune.qrandint(2, 10, 4)
    assert (domain.lower, domain.upper, domain.q) == (2, 10, 4)
    assert set(domain.sample(size=80, random_state=1)) == {4, 8}
    assert set(tune.qrandint(0, 10, 5).sample(size=80, random_state=2)) == {0, 5, 10}
    assert set(tune.qrandint(1, 4).sample(size=80, random_state=3)) == {1, 2, 3}
    logs = tune.qlograndint(10, 100, 10)
    assert logs.upper == 100
    draws = set(logs.sample(size=200, random_state=4))
    assert 100 in draws and draws <= set(range(10, 101, 10))
    assert domain.is_valid(10) and not domain.is_valid(11)
    with pytest.raises(ValueError, match=r"Integer\(3, 7\).quantized\(5\) has no room"):
        Integer(3, 7).quantized(5)

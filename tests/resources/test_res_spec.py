"""Resource specs: names, values, fixed-point arithmetic, actor options."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from actorrt.resources import Resources, parse_resources, resources_from_options


def test_names_and_aliases() -> None:
    r = parse_resources({"cpu": 2, "gpu": 0.5, "memory": 2**30, "TRAIN_DRIVER_RESOURCE": 1})
    assert r.to_dict() == {"CPU": 2.0, "GPU": 0.5, "memory": 2**30, "TRAIN_DRIVER_RESOURCE": 1.0}
    assert isinstance(r.to_dict()["memory"], int)
    assert parse_resources({"cpu": 1, "CPU": 1}) == parse_resources({"CPU": 1})


def test_both_spellings_with_different_values() -> None:
    with pytest.raises(ValueError, match=r"'CPU'.*given twice.*'cpu'=1.*'CPU'=2"):
        parse_resources({"cpu": 1, "CPU": 2})
    with pytest.raises(ValueError, match="GPU"):
        parse_resources({"GPU": 1, "gpu": 0.5})


def test_zero_keys_dropped() -> None:
    r = parse_resources({"CPU": 0, "GPU": 0.0, "x": 1})
    assert r.to_dict() == {"x": 1.0}
    assert not parse_resources({"CPU": 0})
    assert parse_resources(None) == Resources()


@pytest.mark.parametrize("bad", [True, False, "1", None, [1], 1j])
def test_non_numbers_are_type_errors(bad: object) -> None:
    with pytest.raises(TypeError, match=r"resource 'CPU'=.*finite, non-negative number"):
        parse_resources({"CPU": bad})


@pytest.mark.parametrize("bad", [-1, -0.5, math.nan, math.inf, -math.inf])
def test_negative_nan_inf_are_value_errors(bad: float) -> None:
    with pytest.raises(ValueError, match=r"resource 'CPU'="):
        parse_resources({"CPU": bad})


def test_amounts_go_on_the_ten_thousandth_grid_as_in_ray() -> None:
    assert parse_resources({"CPU": 0.0001}).units("CPU") == 1
    assert parse_resources({"CPU": 1.1}).units("CPU") == 11000
    assert parse_resources({"CPU": 0.29}).units("CPU") == 2900  # four decimals: kept exactly
    assert parse_resources({"CPU": Fraction(1, 4)}).units("CPU") == 2500
    # Off the grid: cut toward zero, as Ray's fixed point does.
    assert parse_resources({"CPU": 0.1 + 0.2}).units("CPU") == 3000
    assert parse_resources({"CPU": 1 / 3}).units("CPU") == 3333
    assert parse_resources({"CPU": 2 / 3}).units("CPU") == 6666
    assert parse_resources({"x": Fraction(1, 3)}).units("x") == 3333
    assert parse_resources({"GPU": 1 / 3}).units("GPU") == 3333
    assert parse_resources({"CPU": 1 + 1e-12}).units("CPU") == 10000
    three = parse_resources({"CPU": 1 / 3})
    assert (three + three + three).units("CPU") == 9999  # exact sums of what was granted
    for tiny in (0.00001, Fraction(1, 30000)):
        with pytest.raises(ValueError, match=r"below 1/10000.*0.0001"):
            parse_resources({"x": tiny})


def test_gpu_above_one_must_be_whole() -> None:
    assert parse_resources({"GPU": 2}).units("GPU") == 20000
    assert parse_resources({"GPU": 0.25}).units("GPU") == 2500
    with pytest.raises(ValueError, match=r"'GPU'=1.5.*above 1 must be whole"):
        parse_resources({"GPU": 1.5})


def test_memory_is_whole_bytes() -> None:
    assert parse_resources({"memory": 1.5 * 2**30}).to_dict() == {"memory": 3 * 2**29}
    with pytest.raises(ValueError, match=r"'memory'=10.5.*whole"):
        parse_resources({"memory": 10.5})


def test_bad_names_and_containers() -> None:
    with pytest.raises(TypeError, match="non-empty strings"):
        parse_resources({1: 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="non-empty strings"):
        parse_resources({"": 1})
    with pytest.raises(TypeError, match="dict"):
        parse_resources([("CPU", 1)])  # type: ignore[arg-type]


def test_ten_tenths_give_back_exactly_one() -> None:
    tenth = parse_resources({"CPU": 0.1})
    total = Resources()
    for _ in range(10):
        total = total + tenth
    assert total == parse_resources({"CPU": 1})
    for _ in range(10):
        total = total - tenth
    assert total == Resources()
    assert not total


def test_value_semantics() -> None:
    a = parse_resources({"CPU": 1, "GPU": 0.5})
    b = parse_resources({"GPU": 0.5, "cpu": 1})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    small = parse_resources({"CPU": 0.5})
    assert small <= a and small < a and a >= small and a > small
    assert not parse_resources({"x": 1}) <= a
    assert not a <= parse_resources({"x": 1})
    assert (a - small).to_dict() == {"CPU": 0.5, "GPU": 0.5}
    with pytest.raises(ValueError, match="negative"):
        small - a
    assert a.get("GPU") == 0.5 and a.get("nope") == 0.0
    assert str(a) == "{CPU: 1, GPU: 0.5}"
    assert repr(a) == "Resources({'CPU': 1.0, 'GPU': 0.5})"
    assert type(a).__module__ == "actorrt.resources"
    with pytest.raises(AttributeError):
        a.x = 1  # type: ignore[attr-defined]


def test_options() -> None:
    r = resources_from_options(num_cpus=0.5, num_gpus=1, memory=1000, resources={"custom": 2})
    assert r.to_dict() == {"CPU": 0.5, "GPU": 1.0, "memory": 1000, "custom": 2.0}
    assert resources_from_options() == Resources()
    with pytest.raises(ValueError, match=r"num_cpus=-1"):
        resources_from_options(num_cpus=-1)
    with pytest.raises(TypeError, match=r"num_gpus=True"):
        resources_from_options(num_gpus=True)
    with pytest.raises(ValueError, match=r"num_gpus=2.5"):
        resources_from_options(num_gpus=2.5)
    with pytest.raises(ValueError, match=r"'CPU' is not allowed in resources=.*num_cpus="):
        resources_from_options(resources={"CPU": 1})
    with pytest.raises(ValueError, match=r"'gpu' is not allowed"):
        resources_from_options(resources={"gpu": 1})

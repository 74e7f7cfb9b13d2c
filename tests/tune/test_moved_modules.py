"""An experiment pickled by an earlier release names Tune's and Train's old module paths:
they still unpickle, to the classes at the new paths."""

from __future__ import annotations

import pickle

import pytest

from actorrt import train, tune
from actorrt._moved import MOVED, SPLIT
from actorrt.tune.schedulers import ASHAScheduler
from actorrt.tune.search import ConcurrencyLimiter


def _global(module: str, name: str) -> bytes:
    """A pickle of the class ``module.name`` (protocol 0's GLOBAL opcode)."""
    return f"c{module}\n{name}\n.".encode()


@pytest.mark.parametrize(
    ("old", "name", "now"),
    [
        ("actorrt.tune._schedulers", "ASHAScheduler", ASHAScheduler),
        ("actorrt.tune._search", "ConcurrencyLimiter", ConcurrencyLimiter),
        ("actorrt.tune._config", "TuneConfig", tune.TuneConfig),
        ("actorrt.tune._tuner", "Tuner", tune.Tuner),
        ("actorrt.train._errors", "TrainingFailedError", train.TrainingFailedError),
    ],
)
def test_a_class_pickled_under_an_old_path_unpickles_to_the_new_class(
    old: str, name: str, now: type
) -> None:
    assert pickle.loads(_global(old, name)) is now


def test_every_old_path_imports_the_module_at_its_new_path() -> None:
    import importlib

    for old, new in MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    for old, modules in SPLIT.items():
        split = importlib.import_module(old)
        for path in modules:
            module = importlib.import_module(path)
            for name in getattr(module, "__all__", ()):
                assert getattr(split, name) is getattr(module, name), (old, name)


def test_an_old_instance_round_trips() -> None:
    scheduler = ASHAScheduler(metric="loss", mode="min", max_t=7)
    blob = pickle.dumps(scheduler, protocol=0).replace(  # text opcodes: no lengths to fix
        ASHAScheduler.__module__.encode(), b"actorrt.tune._schedulers"
    )
    assert b"actorrt.tune._schedulers" in blob
    again = pickle.loads(blob)
    assert type(again) is ASHAScheduler
    assert [type(b) for b in again.brackets] == [type(b) for b in scheduler.brackets]
    assert again.max_t == scheduler.max_t == 7

"""A trial's lifecycle: Ray's state names, the steps the controller may take, and the
typed records of an attempt."""

import pickle

import pytest

from actorrt import tune
from actorrt.tune.experiment import Trial
from actorrt.tune.experiment._lifecycle import TrialState
from actorrt.tune.experiment.trial import CheckpointRecord


def make_trial() -> Trial:
    return Trial("f", config={"x": 1}, trial_id="abc_00000")


def test_states_are_rays_strings():
    trial = make_trial()
    assert trial.status == "PENDING" == Trial.PENDING
    assert [s.value for s in TrialState] == [
        "PENDING", "RUNNING", "PAUSED", "TERMINATED", "ERROR"
    ]
    assert f"{trial.status}" == "PENDING"
    assert repr(trial) == str(trial) == "f_abc_00000"  # Ray's repr is its name


def test_set_status_takes_only_steps_of_the_lifecycle():
    trial = make_trial()
    trial.set_status(Trial.RUNNING)
    trial.set_status(Trial.PAUSED)
    trial.set_status(Trial.PENDING)
    trial.set_status(Trial.RUNNING)
    trial.set_status(Trial.TERMINATED)
    with pytest.raises(AssertionError, match="no lifecycle transition from TERMINATED to RUNNING"):
        trial.set_status(Trial.RUNNING)
    other = make_trial()
    with pytest.raises(AssertionError, match="from PENDING to PAUSED"):
        other.set_status("PAUSED")


def test_status_set_as_an_attribute_takes_any_state_but_only_states():
    trial = make_trial()
    trial.status = "TERMINATED"  # as Ray's tests and schedulers set it
    assert trial.status is TrialState.TERMINATED
    trial.status = Trial.RUNNING
    assert trial.status is TrialState.RUNNING
    allowed = "one of PENDING, RUNNING, PAUSED, TERMINATED, ERROR; got 'DONE'"
    with pytest.raises(ValueError, match=allowed):
        trial.status = "DONE"


def test_checkpoint_records_are_typed_and_ordered_as_before():
    record = CheckpointRecord("/p/checkpoint_000001", 2.0, 3, 4.5)
    assert (record.path, record.score, record.iteration, record.time_total_s) == tuple(record)
    assert pickle.loads(pickle.dumps(record)) == record


def test_callbacks_see_each_trial_step_through_the_lifecycle(tmp_path):
    seen: list[tuple[str, str, str]] = []

    class Steps(tune.Callback):
        def on_trial_start(self, iteration, trials, trial, **info):
            seen.append(("start", trial.trial_id, trial.status))

        def on_trial_result(self, iteration, trials, trial, result, **info):
            seen.append(("result", trial.trial_id, trial.status))

        def on_trial_complete(self, iteration, trials, trial, **info):
            seen.append(("complete", trial.trial_id, trial.status))

    def trainable(config):
        for i in range(2):
            tune.report({"score": config["x"] * i})

    tuner = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2])},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="life", verbose=0, callbacks=[Steps()]
        ),
    )
    grid = tuner.fit()
    assert sorted(r.metrics["score"] for r in grid) == [1, 2]
    for trial_id in {t for _, t, _ in seen}:
        steps = [(what, status) for what, t, status in seen if t == trial_id]
        assert steps == [
            ("start", "RUNNING"), ("result", "RUNNING"), ("result", "RUNNING"),
            ("complete", "TERMINATED"),
        ]
        assert all(isinstance(status, TrialState) for _, status in steps)


def test_a_trial_is_built_with_rays_constructor():
    trial = Trial("__fake", config={"a": 1}, stub=True)
    assert len(trial.trial_id) == 8 and int(trial.trial_id, 16) >= 0
    assert str(trial) == f"__fake_{trial.trial_id}" and trial.trainable_name == "__fake"
    assert trial.config == {"a": 1} and trial.status == Trial.PENDING
    named = Trial("f", trial_id="x1", trial_name_creator=lambda t: f"mine-{t.trial_id}")
    assert str(named) == "mine-x1" and named.trainable_name == "f"
    env = Trial("PPO", config={"env": "CartPole"}, trial_id="x2")
    assert str(env) == "PPO_CartPole_x2"  # Ray puts the config's env in the name
    assert Trial("f", placement_group_factory={"CPU": 2}).placement_group_factory.bundles == [
        {"CPU": 2.0}
    ]
    with pytest.raises(TypeError, match="unexpected keyword argument.*resources_per_trial"):
        Trial("f", resources_per_trial={"cpu": 1})

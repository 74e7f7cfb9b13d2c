"""A trial's lifecycle: Ray's state names, the steps the controller may take, and the
typed records of an attempt."""

import pickle

import pytest

from actorrt import tune
from actorrt.tune.experiment import Trial
from actorrt.tune.experiment._lifecycle import TrialState
from actorrt.tune.experiment.trial import CheckpointRecord


def make_trial() -> Trial:
    return Trial("abc_00000", "f_abc_00000", {"x": 1}, None, "/tmp/nowhere")


def test_states_are_rays_strings():
    trial = make_trial()
    assert trial.status == "PENDING" == Trial.PENDING
    assert [s.value for s in TrialState] == [
        "PENDING", "RUNNING", "PAUSED", "TERMINATED", "ERROR"
    ]
    assert f"{trial.status}" == "PENDING"
    assert repr(trial) == "Trial(f_abc_00000, PENDING)"


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

"""A training loop that raises makes ``fit()`` raise (Ray Train V2), in and out of Tune.

Out of Tune: a script whose loop raises exits non-zero, with a ``WorkerGroupError`` and
each failed rank's traceback printed once, prefixed with its rank. In Tune: a trial whose
trainer fails ends ERROR (not TERMINATED), both for a trainer fitted in a function
trainable and for ``Tuner(trainer)``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import actorrt
from actorrt import train, tune

SCRIPT = textwrap.dedent(
    """
    from actorrt import train

    def fail_on_rank_1():
        if train.get_context().get_world_rank() == 1:
            raise ValueError("bad batch on purpose")
        train.report(dict(ok=1))

    if __name__ == "__main__":
        import actorrt
        actorrt.init(num_cpus=2)
        train.DataParallelTrainer(
            fail_on_rank_1,
            scaling_config=train.ScalingConfig(num_workers=2),
            run_config=train.RunConfig(storage_path={storage!r}),
        ).fit()
        print("NOT REACHED")
    """
)


def test_a_script_whose_loop_raises_exits_with_each_ranks_traceback_once(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train_script.py"
    script.write_text(SCRIPT.replace("{storage!r}", repr(str(tmp_path / "runs"))))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=50,
        cwd=tmp_path,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "NOT REACHED" not in out
    assert "actorrt.train.WorkerGroupError: Training failed due to worker errors:" in out
    assert "[Rank 1] ValueError: bad batch on purpose" in out
    # The worker's traceback, once, every line prefixed with its rank.
    assert out.count('in fail_on_rank_1') == 1, out
    assert "[Rank 1] Traceback (most recent call last):" in out
    assert re.search(r'\[Rank 1\]   File ".*", line \d+, in fail_on_rank_1', out)
    assert "_cell.py" not in out  # the runtime's own frames are left out
    assert "[Rank 0]" not in out  # rank 0 finished


def fail_in_the_loop(config: dict[str, Any]) -> None:
    if train.get_context().get_world_rank() == config.get("failing_rank", 0):
        raise RuntimeError("the loop failed on purpose")
    train.report({"ok": 1})


def driver(config: dict[str, Any]) -> None:
    train.DataParallelTrainer(
        fail_in_the_loop,
        train_loop_config={"failing_rank": 1},
        scaling_config=train.ScalingConfig(num_workers=2),
    ).fit()


@pytest.mark.timeout(90)
@pytest.mark.actorrt(num_cpus=3, worker_env={"OMP_NUM_THREADS": "1"})
async def test_a_failed_trainer_makes_its_trial_error(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    grid = await tune.Tuner(
        driver, run_config=tune.RunConfig(storage_path=str(tmp_path / "fn"), verbose=0),
    ).fit_async()
    assert grid.num_errors == 1 and grid.num_terminated == 0
    [error] = grid.errors
    assert isinstance(error, train.WorkerGroupError)
    assert set(error.worker_failures) == {1}
    assert "[Rank 1] RuntimeError: the loop failed on purpose" in str(error)
    # The trial's log has rank 1's traceback once: the worker's frames, not the relay's.
    [trial] = list(grid)
    log = Path(trial.path, "output.log").read_text()  # noqa: ASYNC240
    assert log.count("in fail_in_the_loop") == 1, log
    assert "[Rank 1] Traceback (most recent call last):" in log
    assert "Remote traceback" not in log

    trainer = train.DataParallelTrainer(
        fail_in_the_loop, scaling_config=train.ScalingConfig(num_workers=2)
    )
    grid = await tune.Tuner(
        trainer,
        param_space={"train_loop_config": {"failing_rank": tune.grid_search([0, 1])}},
        run_config=tune.RunConfig(storage_path=str(tmp_path / "trainer"), verbose=0),
    ).fit_async()
    assert grid.num_errors == 2 and grid.num_terminated == 0
    for result in grid:
        assert isinstance(result.error, train.WorkerGroupError)
        failing = result.config["train_loop_config"]["failing_rank"]
        assert set(result.error.worker_failures) == {failing}
    assert actorrt.available_resources() == actorrt.cluster_resources()


def nothing() -> None:
    pass


@pytest.mark.actorrt(num_cpus=2)
async def test_a_trial_too_large_for_the_cluster_is_named_with_what_sized_it(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    three = train.DataParallelTrainer(nothing, scaling_config=train.ScalingConfig(num_workers=3))
    grid = await tune.Tuner(
        three, run_config=tune.RunConfig(storage_path=str(tmp_path / "cpu"), verbose=0),
    ).fit_async()
    [result] = list(grid)
    text = str(result.error)
    assert isinstance(result.error, actorrt.InfeasibleResourceError)
    assert text.startswith(f"trial DataParallelTrainer_{result.trial_id} cannot start")
    assert "tune.Tuner(trainer)" in text and "ScalingConfig(num_workers=3" in text
    assert "3 worker bundle(s) of {'CPU': 1.0} and nothing for the trial's driver" in text
    assert "GPU" not in text  # a CPU-only request gets no GPU advice

    gpu = train.DataParallelTrainer(
        nothing, scaling_config=train.ScalingConfig(num_workers=1, use_gpu=True)
    )
    grid = await tune.Tuner(
        gpu, run_config=tune.RunConfig(storage_path=str(tmp_path / "gpu"), verbose=0),
    ).fit_async()
    [result] = list(grid)
    assert "a fractional GPU must fit one device" in str(result.error)
    assert actorrt.available_resources() == actorrt.cluster_resources()

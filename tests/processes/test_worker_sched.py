"""Worker processes run under SCHED_BATCH (docs/processes.md), so a worker that a message
wakes does not preempt its owner; ``ACTORRT_WORKER_SCHED=normal`` keeps the default policy."""

import os
import subprocess

import pytest

import actorrt

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling")


@actorrt.actor(process=True, num_cpus=0.01)
class Policy:
    def mine(self) -> int:
        return os.sched_getscheduler(0)

    def of_a_child(self) -> int:
        # What the actor starts inherits its policy.
        out = subprocess.run(
            ["python3", "-c", "import os; print(os.sched_getscheduler(0))"],
            capture_output=True, text=True, check=True,
        )
        return int(out.stdout)


async def test_workers_run_as_batch_and_so_do_their_children() -> None:
    async with actorrt.Runtime(num_cpus=2):
        ref = await Policy.spawn()
        assert await ref.mine() == os.SCHED_BATCH
        assert await ref.of_a_child() == os.SCHED_BATCH
    assert os.sched_getscheduler(0) != os.SCHED_BATCH  # the owner keeps its own


async def test_normal_keeps_the_default_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTORRT_WORKER_SCHED", "normal")
    async with actorrt.Runtime(num_cpus=2):
        ref = await Policy.spawn()
        assert await ref.mine() == os.SCHED_OTHER


async def test_a_bad_value_fails_the_start_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACTORRT_WORKER_SCHED", "fast")
    async with actorrt.Runtime(num_cpus=2):
        with pytest.raises(ConnectionError) as err:
            await Policy.spawn()
    text = str(err.value)
    assert "ACTORRT_WORKER_SCHED='fast'" in text and "'batch'" in text, text

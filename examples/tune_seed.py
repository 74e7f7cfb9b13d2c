"""A Ray Tune script on 4 CPUs and 8 GPUs, ported by changing its imports.

    python examples/tune_seed.py

Where the Ray script said ``import ray`` / ``from ray import tune``, this one says
``import actorrt as ray`` / ``from actorrt import tune``; everything else is Ray Tune's API.
Each section prints how many trials ran at once, measured from the trials' own start and end
times. The machine need not have GPUs: ``ray.init(num_gpus=8)`` declares 8 logical ones.
Section 8 (undeclared workers) is shown last: in Ray it hangs; here it is an error in the
results, with the fix in its message.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import actorrt as ray
from actorrt import tune

STORAGE = os.path.join(tempfile.gettempdir(), "actorrt_tune_seed")


def train_fn(config: dict[str, Any]) -> None:
    """A light trial: a few steps of 'work', reporting a score and its own timing."""
    start = time.time()
    for step in range(3):
        time.sleep(0.3)  # the work of one training step
        tune.report({
            "score": config.get("lr", 0.1) * (step + 1),
            "start": start,
            "end": time.time(),
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        })


def at_once(results: tune.ResultGrid) -> int:
    """The most trials whose [start, end] intervals overlap."""
    events = []
    for r in results:
        events += [(r.metrics["start"], 1), (r.metrics["end"], -1)]
    running = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        running += delta
        peak = max(peak, running)
    return peak


def run(title: str, trainable: Any, space: dict[str, Any], **tune_config: Any) -> None:
    results = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(**tune_config),
        run_config=tune.RunConfig(storage_path=STORAGE, verbose=0),
    ).fit()
    gpus = sorted({r.metrics["gpus"] for r in results if r.metrics})
    print(f"{title:<58} {len(results):>3} trials, {at_once(results)} at once"
          + (f", CUDA_VISIBLE_DEVICES seen: {gpus}" if any(gpus) else ""))


def main() -> None:
    ray.init(num_cpus=4, num_gpus=8)
    print("cluster_resources():", ray.cluster_resources())
    space = {"lr": tune.uniform(0.001, 0.1)}

    # 1. Parallelism is a division: 4 CPUs / 1 CPU per trial = 4 at a time.
    run("1. default {'CPU': 1} on 4 CPUs", train_fn, space, num_samples=10)
    # 2. Bigger trials, fewer at once.
    run("2. with_resources {'cpu': 2}", tune.with_resources(train_fn, {"cpu": 2}), space,
        num_samples=4)
    # 3. Fractional CPUs for light trials: 8 at a time.
    run("3. with_resources {'cpu': 0.5}", tune.with_resources(train_fn, {"cpu": 0.5}), space,
        num_samples=16)
    # 4. A callable decides per sampled config.
    per_config = tune.with_resources(
        train_fn, resources=lambda config: {"gpu": 1} if config["use_gpu"] else {"gpu": 0}
    )
    run("4. callable: {'gpu': 1} if use_gpu else {'gpu': 0}", per_config,
        {**space, "use_gpu": tune.grid_search([True, False])}, num_samples=4)
    # 10. GPUs: one each on 8 GPUs, each trial sees only its own device.
    run("10. with_resources {'gpu': 1} on 8 GPUs", tune.with_resources(train_fn, {"gpu": 1}),
        space, num_samples=8)
    # 14. max_concurrent_trials caps below what resources allow.
    run("14. {'cpu': 0.5} with max_concurrent_trials=2",
        tune.with_resources(train_fn, {"cpu": 0.5}), space, num_samples=6,
        max_concurrent_trials=2)

    # 8. Workers the trial did not declare: four trials hold the four CPUs, and each asks
    # for one more. Ray hangs; here one trial gets the deadlock error, with its fix, and
    # the others finish with the CPU it gave back.
    gate = ray.get(Gate.spawn(4))
    results = tune.Tuner(
        undeclared,
        param_space={"gate": gate, "i": tune.grid_search(list(range(4)))},
        run_config=tune.RunConfig(storage_path=STORAGE, verbose=0),
    ).fit()
    print(f"8. undeclared workers: {results.num_terminated} finished, "
          f"{results.num_errors} errored:")
    for error in results.errors:
        print("   ", type(error).__name__ + ":", str(error).splitlines()[0][:150])
    ray.shutdown()


@ray.actor
class Helper:
    def ping(self) -> str:
        return "pong"


@ray.actor(max_concurrency=16)
class Gate:
    """Lets trials through once ``n`` have arrived (so all hold their CPU at once)."""

    def __init__(self, n: int) -> None:
        import asyncio

        self.n, self.arrived, self.open = n, 0, asyncio.Event()

    async def meet(self) -> None:
        self.arrived += 1
        if self.arrived >= self.n:
            self.open.set()
        await self.open.wait()


def undeclared(config: dict[str, Any]) -> None:
    """Starts a 1-CPU helper outside its own reservation, while holding a CPU itself."""
    ray.get(config["gate"].meet())
    helper = ray.get(Helper.options(num_cpus=1, placement="cluster").spawn())
    tune.report({"ping": ray.get(helper.ping())})


if __name__ == "__main__":
    main()

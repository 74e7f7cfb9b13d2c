"""Seed point 8: workers a trial did not declare. Ray hangs; actorrt says why, and how to fix it.

    python examples/tune_undeclared_workers.py

Two trials on 2 CPUs each hold 1 CPU (Tune reserved only the trial's own process), and each
then starts a 1-CPU helper outside its reservation (``placement="cluster"``: what Modin or a
hand-written pool of remote actors does). Each helper waits for the CPU the *other* trial
holds, and neither trial ends until its helper runs. In Ray the cluster hangs, silently.

actorrt's broker sees that the waits can never end while the holders hold what they hold:
within a second it fails one request with ``ResourceDeadlockError``. That trial is ERROR
(with the message in ``results.errors`` and its ``error.txt``), it is not retried (a
configuration error would fail again), and the other trial finishes with the CPU it gave
back. The second run applies the fix the message names: the helper declared as a bundle of
the trial's ``PlacementGroupFactory``.
"""

from __future__ import annotations

import tempfile
import textwrap
from typing import Any

from _meter import Meter  # here: a gate, so both trials hold their CPU before going on

import actorrt
from actorrt import tune


@actorrt.actor
class Helper:
    def square(self, x: int) -> int:
        return x * x


def undeclared(config: dict[str, Any]) -> None:
    actorrt.get(config["meter"].enter())  # both trials now hold their CPU
    helper = actorrt.get(Helper.options(num_cpus=1, placement="cluster").spawn())
    tune.report({"square": actorrt.get(helper.square(config["i"]))})


def declared(config: dict[str, Any]) -> None:
    # Default placement ("auto"): the helper goes into the trial's own second bundle.
    helper = actorrt.get(Helper.options(num_cpus=1).spawn())
    tune.report({"square": actorrt.get(helper.square(config["i"]))})


def main() -> None:
    actorrt.init(num_cpus=2)
    with tempfile.TemporaryDirectory() as storage:
        meter = actorrt.get(Meter.spawn(hold=2, total=2))
        results = tune.Tuner(
            undeclared,
            param_space={"meter": meter, "i": tune.grid_search([1, 2])},
            run_config=tune.RunConfig(
                storage_path=storage,
                verbose=0,
                failure_config=tune.FailureConfig(max_failures=2),  # a deadlock is not retried
            ),
        ).fit()
        print(f"undeclared helpers: {results.num_terminated} trial finished, "
              f"{results.num_errors} errored")
        for error in results.errors:
            print(f"{type(error).__name__}:")
            print(textwrap.fill(str(error), width=96, initial_indent="    ",
                                subsequent_indent="    "))

        fixed = tune.with_resources(declared, tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": 1}]))
        results = tune.Tuner(
            fixed,
            param_space={"i": tune.grid_search([1, 2])},
            run_config=tune.RunConfig(storage_path=storage, verbose=0),
        ).fit()
        print(f"declared helpers: {results.num_terminated} trials finished, "
              f"{results.num_errors} errored; squares {[r.metrics['square'] for r in results]}")
    actorrt.shutdown()


if __name__ == "__main__":
    main()

"""Ray Tune's dynamic-resources example (xgboost_dynamic_resources_example), ported.

    python examples/tune_resource_changing.py              (the function API)
    python examples/tune_resource_changing.py --trainable  (the class API)
    python examples/tune_resource_changing.py --test       (both)

Ray's example boosts XGBoost trees on the breast cancer data set; this one grows a
scikit-learn gradient-boosting model one tree per iteration (XGBoost is not a dependency),
with the same scheduling: ASHA stops the weak trials, and a ResourceChangingScheduler splits
the cluster's CPUs evenly among the trials still alive, so the last trials get more threads.
Changes from Ray's script: the imports, the model (with a pause per tree, as a stand-in
for XGBoost's seconds per tree), and ``tune.Tuner`` for ``tune.run``.

A trial whose new resources are free now restarts from its checkpoint in a new placement
group at once; one whose resources are not free keeps running as it is (Ray would pause it
and queue it with the new request).
"""

from __future__ import annotations

import argparse
import os
import pickle
import tempfile
import time
from typing import Any

import sklearn.datasets
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

import actorrt as ray
from actorrt import tune
from actorrt.tune import PlacementGroupFactory, Trainable
from actorrt.tune.schedulers import ASHAScheduler, ResourceChangingScheduler

CHECKPOINT_FILENAME = "model.pkl"
MAX_T = 6
ITERATION_PAUSE_S = 0.1


def load_data() -> tuple[Any, Any, Any, Any]:
    data, labels = sklearn.datasets.load_breast_cancer(return_X_y=True)
    split: tuple[Any, Any, Any, Any] = train_test_split(
        data, labels, test_size=0.25, random_state=1
    )
    return split


def new_model(config: dict[str, Any]) -> GradientBoostingClassifier:
    return GradientBoostingClassifier(
        n_estimators=0, warm_start=True, max_depth=config["max_depth"],
        subsample=config["subsample"], learning_rate=config["learning_rate"], random_state=1,
    )


def boost_one_tree(model: GradientBoostingClassifier, data: Any) -> float:
    train_x, test_x, train_y, test_y = data
    model.n_estimators += 1
    model.fit(train_x, train_y)
    # A tree of this small model takes milliseconds, where XGBoost's take seconds: without
    # a pause, the last trials could end before a result of theirs lets the scheduler give
    # them the CPUs that the stopped trials freed.
    time.sleep(ITERATION_PAUSE_S)
    return float(log_loss(test_y, model.predict_proba(test_x)))


# FUNCTION API EXAMPLE


def train_breast_cancer(config: dict[str, Any]) -> None:
    data = load_data()
    model = new_model(config)
    checkpoint = tune.get_checkpoint()
    if checkpoint:  # checkpoints are what lets a trial change its resources
        with open(os.path.join(checkpoint.path, CHECKPOINT_FILENAME), "rb") as f:
            model = pickle.load(f)
    nthread = int(tune.get_context().get_trial_resources().required_resources["CPU"])
    while model.n_estimators < MAX_T:
        logloss = boost_one_tree(model, data)
        with tempfile.TemporaryDirectory() as tmp:  # every iteration, as Ray's example
            with open(os.path.join(tmp, CHECKPOINT_FILENAME), "wb") as f:
                pickle.dump(model, f)
            tune.report({"eval-logloss": logloss, "nthread": nthread},
                        checkpoint=tune.Checkpoint.from_directory(tmp))


# TRAINABLE (CLASS) API EXAMPLE


class BreastCancerTrainable(Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        self.nthread = int(self.trial_resources.required_resources["CPU"])  # type: ignore[union-attr]
        self.new_nthread: int | None = None
        self.model = new_model(config)
        self.data = load_data()

    def step(self) -> dict[str, Any]:
        logloss = boost_one_tree(self.model, self.data)
        return {"eval-logloss": logloss, "nthread": self.nthread,
                "done": self.model.n_estimators >= MAX_T}

    def save_checkpoint(self, checkpoint_dir: str) -> dict[str, Any]:
        return {"nthread": self.nthread, "model": pickle.dumps(self.model)}

    def load_checkpoint(self, checkpoint: Any) -> None:
        self.nthread = checkpoint["nthread"]
        if self.new_nthread:
            self.nthread, self.new_nthread = self.new_nthread, None
        self.model = pickle.loads(checkpoint["model"])

    def update_resources(self, new_resources: PlacementGroupFactory) -> None:
        # called before load_checkpoint, in the trial restarted with its new resources
        self.new_nthread = int(new_resources.required_resources["CPU"])


def example_resources_allocation_function(
    tune_controller: Any, trial: Any, result: dict[str, Any], scheduler: Any
) -> PlacementGroupFactory | None:
    """Balances the cluster's CPUs over the live trials, never below the base."""
    base_trial_resource = scheduler.base_trial_resources
    if result["training_iteration"] < 1:
        return None
    if base_trial_resource is None:
        base_trial_resource = PlacementGroupFactory([{"CPU": 1, "GPU": 0}])
    min_cpu = base_trial_resource.required_resources.get("CPU", 0)
    total_available_cpus = tune_controller._resource_updater.get_num_cpus()
    cpu_to_use = max(min_cpu, total_available_cpus // len(tune_controller.get_live_trials()))
    return PlacementGroupFactory([{"CPU": cpu_to_use}])


def tune_breast_cancer(trainable: bool) -> Any:
    search_space = {
        "max_depth": tune.grid_search([2, 3]),
        "subsample": tune.grid_search([0.7, 0.8, 0.9]),
        "learning_rate": 0.5,
    }
    base_scheduler = ASHAScheduler(max_t=MAX_T, grace_period=1, reduction_factor=2)
    scheduler = ResourceChangingScheduler(
        base_scheduler=base_scheduler,
        resources_allocation_function=example_resources_allocation_function,
    )
    fn: Any = BreastCancerTrainable if trainable else train_breast_cancer
    tuner = tune.Tuner(
        tune.with_resources(fn, PlacementGroupFactory([{"CPU": 1, "GPU": 0}])),
        param_space=search_space,
        tune_config=tune.TuneConfig(metric="eval-logloss", mode="min", scheduler=scheduler),
        run_config=tune.RunConfig(
            verbose=0, checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=trainable),
        ),
    )
    results = tuner.fit()
    frame = results.get_dataframe()
    api = "class" if trainable else "function"
    print(f"{api} API: {len(results)} trials, {len(results.errors)} errors")
    seen = [int(n) for r in results for n in r.metrics_dataframe["nthread"]]
    print(f"{api} API: most threads a trial ran with: {max(seen)}")
    # A trial whose resources change restarts from a checkpoint taken at that result
    # (a class trainable is saved then, as Ray does): no iteration runs twice.
    repeated = sum(
        len(its) - len(set(its))
        for its in (list(r.metrics_dataframe["training_iteration"]) for r in results)
    )
    print(f"{api} API: iterations run twice: {repeated}")
    best = results.get_best_result()
    print(f"{api} API: best eval-logloss {best.metrics['eval-logloss']:.4f} with "
          f"max_depth={best.config['max_depth']} subsample={best.config['subsample']}")
    assert max(seen) > 1 and len(frame) == 6
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--trainable", action="store_true",
                        help="use the Trainable (class) API instead of the function API")
    parser.add_argument("--test", action="store_true", help="run both APIs")
    args, _ = parser.parse_known_args()
    ray.init(num_cpus=4)
    if args.test:
        tune_breast_cancer(True)
    tune_breast_cancer(args.trainable)

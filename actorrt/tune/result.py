"""The names of Tune's result fields (Ray's ``ray.tune.result`` constants).

Ray scripts import these (``from ray.tune.result import TRAINING_ITERATION``) to name the
fields Tune adds to every result, or the usual metric names.
"""

from __future__ import annotations

import os

__all__ = [
    "AUTO_RESULT_KEYS", "CONFIG_PREFIX", "DEFAULT_METRIC", "DEFAULT_RESULTS_DIR", "DONE",
    "EPISODES_THIS_ITER", "EPISODES_TOTAL", "EXPERIMENT_TAG", "HOSTNAME",
    "ITERATIONS_SINCE_RESTORE", "MEAN_ACCURACY", "MEAN_LOSS", "NEG_MEAN_LOSS", "NODE_IP",
    "PID", "SHOULD_CHECKPOINT", "TIMESTAMP", "TIMESTEPS_THIS_ITER", "TIMESTEPS_TOTAL",
    "TIME_SINCE_RESTORE", "TIME_THIS_ITER_S", "TIME_TOTAL_S", "TRAINING_ITERATION",
    "TRIAL_ID",
]

TRAINING_ITERATION = "training_iteration"
TIME_THIS_ITER_S = "time_this_iter_s"
TIME_TOTAL_S = "time_total_s"
TIME_SINCE_RESTORE = "time_since_restore"
ITERATIONS_SINCE_RESTORE = "iterations_since_restore"
TIMESTAMP = "timestamp"
DONE = "done"
SHOULD_CHECKPOINT = "should_checkpoint"
TRIAL_ID = "trial_id"
EXPERIMENT_TAG = "experiment_tag"
PID = "pid"
HOSTNAME = "hostname"
NODE_IP = "node_ip"
TIMESTEPS_TOTAL = "timesteps_total"
TIMESTEPS_THIS_ITER = "timesteps_this_iter"
EPISODES_TOTAL = "episodes_total"
EPISODES_THIS_ITER = "episodes_this_iter"
MEAN_ACCURACY = "mean_accuracy"
MEAN_LOSS = "mean_loss"
NEG_MEAN_LOSS = "neg_mean_loss"
DEFAULT_METRIC = "_metric"
CONFIG_PREFIX = "config"
# Where experiments go without RunConfig(storage_path=...) (Ray's is ~/ray_results).
DEFAULT_RESULTS_DIR = os.path.expanduser(os.path.join("~", "actorrt_results"))

# The keys Tune adds to every result; ``repr(Result)`` leaves them out, as Ray's does.
AUTO_RESULT_KEYS = (
    TRAINING_ITERATION, TIME_THIS_ITER_S, TIME_TOTAL_S, TIME_SINCE_RESTORE,
    ITERATIONS_SINCE_RESTORE, TIMESTEPS_TOTAL, "timesteps_since_restore", EPISODES_TOTAL,
    TIMESTAMP, "date", PID, HOSTNAME, NODE_IP, TRIAL_ID, "experiment_id", DONE, "config",
    "checkpoint_dir_name", SHOULD_CHECKPOINT,
)

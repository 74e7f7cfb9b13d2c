"""Ray's ``ray.train.constants``: the keys and names Train's results and folders use."""

import os

from .._shared._deprecation import MIGRATION_WARNINGS_ENV
from ._run_config import DEFAULT_STORAGE

__all__ = [
    "CHECKPOINT_DIR_NAME",
    "COPY_DIRECTORY_CHECKPOINTS_INSTEAD_OF_MOVING_ENV",
    "DEFAULT_STORAGE_PATH",
    "ENABLE_V2_MIGRATION_WARNINGS_ENV_VAR",
    "EVALUATION_DATASET_KEY",
    "MODEL_KEY",
    "PREPROCESSOR_KEY",
    "RAY_CHDIR_TO_TRIAL_DIR",
    "TRAIN_DATASET_KEY",
]

# Where runs go when RunConfig(storage_path=) is not given.
DEFAULT_STORAGE_PATH = os.path.expanduser(DEFAULT_STORAGE)
# The result key naming the folder of the checkpoint reported with it.
CHECKPOINT_DIR_NAME = "checkpoint_dir_name"
# Set to "0", trials and workers run in the folder they were started in, not their own.
RAY_CHDIR_TO_TRIAL_DIR = "RAY_CHDIR_TO_TRIAL_DIR"
# Dataset and checkpoint keys.
TRAIN_DATASET_KEY = "train"
EVALUATION_DATASET_KEY = "evaluation"
MODEL_KEY = "model"
PREPROCESSOR_KEY = "_preprocessor"
COPY_DIRECTORY_CHECKPOINTS_INSTEAD_OF_MOVING_ENV = (
    "TRAIN_COPY_DIRECTORY_CHECKPOINTS_INSTEAD_OF_MOVING"
)
# "0" turns off the warnings for Ray 2.7-2.40 spellings Train V2 and Tune replaced.
ENABLE_V2_MIGRATION_WARNINGS_ENV_VAR = MIGRATION_WARNINGS_ENV

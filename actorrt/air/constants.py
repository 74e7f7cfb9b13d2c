"""Ray's ``ray.air.constants``: the keys of results, checkpoints and datasets."""

from ..train import constants as _train
from ..train.constants import EVALUATION_DATASET_KEY as EVALUATION_DATASET_KEY
from ..train.constants import MODEL_KEY as MODEL_KEY
from ..train.constants import PREPROCESSOR_KEY as PREPROCESSOR_KEY
from ..train.constants import TRAIN_DATASET_KEY as TRAIN_DATASET_KEY
from ..tune.result import TIME_THIS_ITER_S as TIME_THIS_ITER_S
from ..tune.result import TIMESTAMP as TIMESTAMP
from ..tune.result import TRAINING_ITERATION as TRAINING_ITERATION

__all__ = [
    "COPY_DIRECTORY_CHECKPOINTS_INSTEAD_OF_MOVING_ENV",
    "EVALUATION_DATASET_KEY",
    "EXPR_ERROR_FILE",
    "EXPR_PARAM_FILE",
    "EXPR_PARAM_PICKLE_FILE",
    "EXPR_PROGRESS_FILE",
    "EXPR_RESULT_FILE",
    "MODEL_KEY",
    "PREPROCESSOR_KEY",
    "TENSOR_COLUMN_NAME",
    "TIMESTAMP",
    "TIME_THIS_ITER_S",
    "TRAINING_ITERATION",
    "TRAIN_DATASET_KEY",
    "WILDCARD_KEY",
]

COPY_DIRECTORY_CHECKPOINTS_INSTEAD_OF_MOVING_ENV = (
    _train.COPY_DIRECTORY_CHECKPOINTS_INSTEAD_OF_MOVING_ENV
)
WILDCARD_KEY = "*"
TENSOR_COLUMN_NAME = "__value__"
# The files of a trial's folder.
EXPR_PARAM_FILE = "params.json"
EXPR_PARAM_PICKLE_FILE = "params.pkl"
EXPR_PROGRESS_FILE = "progress.csv"
EXPR_RESULT_FILE = "result.json"
EXPR_ERROR_FILE = "error.txt"

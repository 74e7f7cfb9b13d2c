"""Every optional module of actorrt, used where its library is not installed, raises an
ImportError naming the extra that installs it (``pip install 'actorrt[EXTRA]'``).

Each case runs in a fresh interpreter where a meta-path finder makes the library
unimportable, as on a machine without it; the case's code is what a user writes first:
the import, or for a module that imports without its library (as Ray's do), the call
that needs it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

BLOCKER = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == {blocked!r} or name.startswith({blocked!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
try:
{code}
except ImportError as exc:
    print("ImportError:", exc)
else:
    print("no ImportError")
"""

# (what it is, the library hidden, the code that needs it, the extra named)
CASES = [
    ("ResultGrid.get_dataframe", "pandas",
     "import tempfile; from actorrt.tune import ResultGrid; "
     "ResultGrid([], experiment_path=tempfile.mkdtemp()).get_dataframe()", "tune"),
    ("ExperimentAnalysis.dataframe", "pandas",
     "import tempfile; from actorrt.tune import ExperimentAnalysis; "
     "ExperimentAnalysis(tempfile.mkdtemp(), trials=[]).dataframe()", "tune"),
    ("train.Result.metrics_dataframe", "pandas",
     "from actorrt.train import Result; "
     "Result(metrics={}, checkpoint=None, path='.').metrics_dataframe", "train"),
    ("iter_batches(pandas)", "pandas",
     "from actorrt.train._data import DataShard; "
     "next(DataShard('d', ('columns', {'x': [1, 2]})).iter_batches(batch_format='pandas'))",
     "train"),
    ("iter_batches(pyarrow)", "pyarrow",
     "from actorrt.train._data import DataShard; "
     "next(DataShard('d', ('columns', {'x': [1, 2]})).iter_batches(batch_format='pyarrow'))",
     "train"),
    ("train.Result.filesystem", "pyarrow",
     "from actorrt.train import Result; Result(metrics={}, checkpoint=None, path='.').filesystem",
     "train"),
    ("tune.Result.filesystem", "pyarrow",
     "from actorrt.tune import Result; Result(metrics={}, config={}, path='.').filesystem",
     "tune"),
    ("dashboard", "aiohttp",
     "import actorrt; actorrt.init(num_cpus=1, include_dashboard=True); actorrt.shutdown()",
     "dashboard"),
    ("TBXLoggerCallback", "tensorboardX",
     "from actorrt.tune.logger import TBXLoggerCallback; TBXLoggerCallback()", "tune"),
    ("tune.logger.aim", "aim",
     "from actorrt.tune.logger.aim import AimLoggerCallback; AimLoggerCallback()", "aim"),
    ("air.integrations.mlflow", "mlflow", "import actorrt.air.integrations.mlflow", "mlflow"),
    ("air.integrations.wandb", "wandb", "import actorrt.air.integrations.wandb", "wandb"),
    ("air.integrations.comet", "comet_ml",
     "from actorrt.air.integrations.comet import CometLoggerCallback; "
     "CometLoggerCallback(online=False)", "comet"),
    ("OptunaSearch", "optuna",
     "from actorrt.tune.search.optuna import OptunaSearch; OptunaSearch()", "optuna"),
    ("HyperOptSearch", "hyperopt",
     "from actorrt.tune.search.hyperopt import HyperOptSearch; HyperOptSearch()", "hyperopt"),
    ("BayesOptSearch", "bayes_opt",
     "from actorrt.tune.search.bayesopt import BayesOptSearch; BayesOptSearch()", "bayesopt"),
    ("NevergradSearch", "nevergrad",
     "from actorrt.tune.search.nevergrad import NevergradSearch; NevergradSearch()",
     "nevergrad"),
    ("TuneBOHB", "ConfigSpace",
     "from actorrt.tune.search.bohb import TuneBOHB; TuneBOHB()", "bohb"),
    ("ZOOptSearch", "zoopt",
     "from actorrt.tune.search.zoopt import ZOOptSearch; ZOOptSearch()", "zoopt"),
    ("AxSearch", "ax", "from actorrt.tune.search.ax import AxSearch; AxSearch()", "ax"),
    ("PB2", "sklearn",
     "from actorrt.tune.schedulers.pb2 import PB2; PB2(hyperparam_bounds={'lr': [0, 1]})",
     "pb2"),
    ("train.torch", "torch", "from actorrt.train.torch import get_device", "train"),
    ("train.lightning", "lightning", "import actorrt.train.lightning", "lightning"),
    ("tune.integration.pytorch_lightning", "lightning",
     "import actorrt.tune.integration.pytorch_lightning", "lightning"),
    ("RayDeepSpeedStrategy", "deepspeed",
     "from actorrt.train.lightning import RayDeepSpeedStrategy; RayDeepSpeedStrategy()",
     "deepspeed"),
    ("train.huggingface.transformers", "transformers",
     "import actorrt.train.huggingface.transformers", "transformers"),
    ("train.xgboost", "xgboost", "import actorrt.train.xgboost", "xgboost"),
    ("tune.integration.xgboost", "xgboost", "import actorrt.tune.integration.xgboost",
     "xgboost"),
    ("train.lightgbm", "lightgbm", "import actorrt.train.lightgbm", "lightgbm"),
    ("tune.integration.lightgbm", "lightgbm", "import actorrt.tune.integration.lightgbm",
     "lightgbm"),
]


# Importing DeepSpeed's fallbacks (Lightning, torch) takes 30 s alone on a loaded machine.
@pytest.mark.timeout(180)
@pytest.mark.parametrize(("what", "blocked", "code", "extra"), CASES,
                         ids=[case[0] for case in CASES])
def test_a_missing_library_names_its_extra(what: str, blocked: str, code: str,
                                           extra: str) -> None:
    if blocked == "lightning":  # Lightning's fallback, pytorch_lightning, is hidden too
        code = "    sys.modules['pytorch_lightning'] = None\n" + "    " + code
    else:
        code = "    " + code
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER.format(blocked=blocked, code=code)],
        capture_output=True, text=True, timeout=170, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert f"pip install 'actorrt[{extra}]'" in done.stdout, (what, done.stdout)


def test_every_extra_named_is_one_pyproject_has() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert {case[3] for case in CASES} <= set(extras)

"""Each integration, imported where its library is not installed, raises an ImportError
naming the extra that installs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

# A fresh interpreter where `blocked` cannot be imported, as on a machine without it.
SCRIPT = """
import importlib, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == {blocked!r} or name.startswith({blocked!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Block())
try:
    importlib.import_module({module!r})
except ImportError as exc:
    print(exc)
else:
    print("imported")
"""


@pytest.mark.parametrize(("module", "blocked", "extra"), [
    ("actorrt.air.integrations.mlflow", "mlflow", "mlflow"),
    ("actorrt.air.integrations.wandb", "wandb", "wandb"),
    ("actorrt.train.xgboost", "xgboost", "xgboost"),
    ("actorrt.tune.integration.xgboost", "xgboost", "xgboost"),
    ("actorrt.train.lightgbm", "lightgbm", "lightgbm"),
    ("actorrt.tune.integration.lightgbm", "lightgbm", "lightgbm"),
])
def test_a_missing_library_names_its_extra(module: str, blocked: str, extra: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(module=module, blocked=blocked)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert f"pip install 'actorrt[{extra}]'" in done.stdout, done.stdout

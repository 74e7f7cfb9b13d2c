"""Every script in examples/ runs as a user would run it, and prints what it claims to show.

Each runs in a fresh interpreter (a subprocess, as ``python examples/NAME.py``) with a
timeout; the test checks its exit status and a few key lines of its output.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# script -> (arguments, timeout in seconds, patterns that must each match a line of stdout)
CASES: dict[str, tuple[list[str], float, list[str]]] = {
    "actors.py": ([], 60, [
        r"^ask: add\(1\) -> 1$",
        r"^after a tell of add\(10\), add\(0\) -> 11$",
        r"^five pipelined asks -> \[12, 13, 14, 15, 16\]$",
        r"^slow_read with timeout=0.05 -> AskTimeoutError$",
        r"^an ask queued behind the crash -> ActorDiedError \(crashed\)$",
        r"^after the restart, words\(\) -> \[\]$",
        r"^child of a stopped parent -> parent ended$",
        r"^worker-process actor: pid (\d+) \(this process is (?!\1)\d+\)",
        r"^after stop, available CPUs: 2.0$",
    ]),
    "aiohttp_service.py": (["--self-test"], 60, [
        r"^GET /visit/ada -> 200 \{'name': 'ada', 'visits': 2\}$",
        r"^GET /squares\?n=1000 -> 200 \{'n': 1000, 'sum_of_squares': 332833500\}$",
        r"^20 visits answered in \d+ ms, beside a request that took \d+ ms",
        r"^stopped cleanly$",
    ]),
    "demo.py": ([], 60, [r"^opened 4 accounts"]),
    "tune_default_resources.py": ([], 90, [
        r"^1 CPU per trial on 4 CPUs: 8 trials, 4 at once \(expected 4\), [1-9]\d* waiting",
        r"^2 CPU per trial on 4 CPUs: 4 trials, 2 at once \(expected 2\), [1-9]\d* waiting",
        r"^4 CPU per trial on 4 CPUs: 2 trials, 1 at once \(expected 1\), 1 waiting",
    ]),
    "tune_fractional_cpus.py": ([], 90, [
        r"^\{'cpu': 0.5\} on 4 CPUs: 16 trials, 8 at once, [1-9]\d* waiting",
        r"^each trial was granted \{'CPU': 0.5\} and saw OMP_NUM_THREADS=1$",
    ]),
    "tune_gpus.py": ([], 90, [
        r"^use_gpu=True  -> CUDA_VISIBLE_DEVICES='[01]'  get_gpu_ids\(\)=\[[01]\]$",
        r"^use_gpu=False -> CUDA_VISIBLE_DEVICES=''   get_gpu_ids\(\)=\[\]$",
        r"^\{'cpu': 2, 'gpu': 1\} on 4 CPUs and 1 GPU: 1 at once \([12] waiting",
    ]),
    "tune_placement_group_factory.py": ([], 90, [
        r"^trial 0: workers in bundle 1 \(GPU \d\), bundle 2 \(GPU \d\)$",
        r"^trial 2: workers in bundle 1 \(GPU \d\), bundle 2 \(GPU \d\)$",
        r"^2 gangs at once on 10 CPUs and 4 GPUs \(1 waiting",
        r"^after the sweep, available == cluster: True$",
    ]),
    "tune_undeclared_workers.py": ([], 90, [
        r"^undeclared helpers: 1 trial finished, 1 errored$",
        r"^ResourceDeadlockError:$",
        r"PlacementGroupFactory",
        r"^declared helpers: 2 trials finished, 0 errored; squares \[1, 4\]$",
    ]),
    "tune_train_num_workers.py": ([], 180, [
        r"^num_workers=1: world_size=1, 20 results, final loss 0\.0\d\d$",
        r"^num_workers=2: world_size=2, 20 results, final loss 0\.0\d\d$",
        r"^2 trials finished, 0 errored$",
    ]),
    # Each trains on 2 workers that import Lightning / Transformers: seconds on an idle
    # machine, far more on a loaded one.
    "train_lightning.py": ([], 240, [
        r"^epoch 3: step 96, val_accuracy 0\.[89]\d\d$",
        r"^checkpoint files: \['checkpoint\.ckpt'\]$",
        r"^reloaded model: val_accuracy 0\.[89]\d\d \(reported 0\.[89]\d\d\)$",
    ]),
    "train_transformers.py": ([], 240, [
        r"^epoch 3: step 48, loss 0\.\d+, eval_accuracy (0\.9\d\d|1\.000)$",
        r"^checkpoint folder holds config\.json: True$",
        r"^reloaded model: eval_accuracy (0\.9\d\d|1\.000)$",
    ]),
    "tune_wait_for_gpu.py": (["--fake-gpus"], 90, [
        r"^2 GPUs found$",
        r"^trial on GPU 0: waited \d+\.\d s",
        r"^trial on GPU 1: waited 0\.\d s",
        r"^a trial without a GPU: RuntimeError: wait_for_gpu: no GPU is assigned",
    ]),
    "tune_max_concurrent_trials.py": ([], 90, [
        r"max_concurrent_trials=2:  2 at once$",
        r"max_concurrent_trials=10:  2 at once \(resources decide first\)$",
        r"ValueError: max_concurrent_trials=2 contradicts",
    ]),
    "tune_pin_drivers.py": ([], 90, [
        r"^\{'cpu': 1, 'TRAIN_DRIVER_RESOURCE': 1\}: 2 at once \([1-9]\d* waiting",
        r"TRAIN_DRIVER_RESOURCE': 1.0\}, \{'CPU': 1.0\}, \{'CPU': 1.0\}\]$",
        r"^3 units when 2 exist: InfeasibleResourceError: .*TRAIN_DRIVER_RESOURCE: 3",
    ]),
    "tune_hyperopt.py": ([], 120, [
        r"^24 trials, 0 errors$",
        r"^first trials ran the given points: \[\(1\.0, 2\.0\), \(4\.0, 2\.0\)\]$",
        r"^best mean_loss -?\d+\.\d{3} with width=",
        r"^random search's best with 24 trials: -?\d+\.\d{3}$",
    ]),
    "tune_bayesopt.py": ([], 180, [
        r"^12 trials, 0 errors$",
        r"^best mean_loss -?\d+\.\d{3} with width=",
    ]),
    "tune_nevergrad.py": ([], 120, [
        r"^24 trials, 0 errors$",
        r"^best mean_loss -?\d+\.\d{3} with width=",
    ]),
    "tune_bohb.py": ([], 120, [
        r"^12 trials, 0 errors$",
        # HyperBandForBOHB, max_t=9, eta=3: a bracket of 9 (6 stop at 1, 2 at 3, 1 goes on
        # to 9: each milestone is eta times the last, up to max_t) and one of 3 that never
        # fills (halved as planned for 5: 2 go on to 9).
        r"^iterations each trial ran: \[1, 1, 1, 1, 1, 1, 3, 3, 3, 9, 9, 9\]$",
    ]),
    "tune_pb2.py": ([], 120, [
        r"^4 trials, 0 errors, [1-9]\d* exploits$",
        r"^best mean_accuracy \d\.\d\d \(lr now",
    ]),
    "tune_optuna_multi_objective.py": ([], 120, [
        r"^12 trials, 0 errors$",
        r"^Pareto front: [1-9]\d* trial\(s\)",
    ]),
    "tune_resource_changing.py": (["--test"], 120, [
        r"^class API: 6 trials, 0 errors$",
        r"^function API: 6 trials, 0 errors$",
        # 6 trials at 1 CPU on 4: the last ones alive get an even share of all 4
        r"^class API: most threads a trial ran with: [2-4]$",
        r"^function API: most threads a trial ran with: [2-4]$",
        r"^class API: iterations run twice: 0$",
        r"^function API: iterations run twice: 0$",
    ]),
    "tune_ax.py": (["--smoke-test"], 120, [
        r"^10 trials, 0 errors$",
        r"^best hartmann6 -\d\.\d{3} \(the minimum is -3\.322\)$",
        r"^Best hyperparameters found were:  \{'x1': ",
    ]),
    "tune_zoopt.py": ([], 120, [
        r"^([4-9]|1\d|20) trials of a budget of 20, 0 errors$",
        r"^best mean_loss -?\d+\.\d{3} with width=",
    ]),
    "tune_seed.py": ([], 180, [
        r"^cluster_resources\(\): \{'CPU': 4.0, 'GPU': 8.0",
        r"^1\. default \{'CPU': 1\} on 4 CPUs +10 trials",
        r"^10\. with_resources \{'gpu': 1\} on 8 GPUs +8 trials",
        r"^8\. undeclared workers: 3 finished, 1 errored:$",
        r"^ +ResourceDeadlockError: resource deadlock",
    ]),
}

# Variables that would change what the examples print (thread counts, a fake GPU backend).
CLEARED = ("ACTORRT_NVML_BACKEND", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
           "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def run_example(script: str, args: list[str], timeout: float) -> str:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env["PYTHONUNBUFFERED"] = "1"
    # Tune adds a TensorBoard logger when tensorboardX is installed; importing it (and torch)
    # costs seconds per script on a small machine, and no example is about it.
    env["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    try:
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / script), *args],
            capture_output=True, text=True, timeout=timeout, env=env, cwd=EXAMPLES.parent,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{script} ran past {timeout} s\n--- stdout\n{exc.stdout!r}\n"
                    f"--- stderr\n{exc.stderr!r}")
    assert done.returncode == 0, (
        f"{script} exited {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    return done.stdout


def test_every_example_has_a_case() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(CASES)


# The subprocess's own timeout fires before pytest's, so a hang shows the example's output.
@pytest.mark.parametrize(
    "script",
    [pytest.param(name, marks=pytest.mark.timeout(CASES[name][1] + 30)) for name in sorted(CASES)],
)
def test_example(script: str) -> None:
    args, timeout, patterns = CASES[script]
    out = run_example(script, args, timeout)
    lines = out.splitlines()
    missing = [p for p in patterns if not any(re.search(p, line) for line in lines)]
    assert not missing, f"{script}: no line matches {missing}\n--- stdout\n{out}"

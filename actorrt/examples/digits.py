"""The demo job: a hyperparameter sweep of data-parallel torch training on the digits data.

    python -m actorrt.examples.digits            # or: actorrt demo, or: make demo
    python -m actorrt.examples.digits --trials 12 --workers 2 --cpus-per-worker 0.5

Each trial is a trial-driver function that runs a 2-worker ``TorchTrainer`` (gloo, DDP) on
scikit-learn's bundled 8x8 digits. The trial is declared with
``tune.with_resources(driver, lambda cfg: ScalingConfig(...))``, so the driver and its workers
are reserved as one gang: a trial never starts without room for its workers, and no
``max_concurrent_trials`` arithmetic is needed. Rank 0's ``train.report`` calls become the
trial's Tune results, so ASHA stops weak trials early and their whole gang goes at once.

At the end it prints the results table and the best config, the experiment folder, and
writes ``learning_curves.png`` there: every trial's accuracy per epoch, the ones ASHA stopped
drawn dashed and marked where they stopped.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from typing import Any

import actorrt
from actorrt import train, tune
from actorrt.train.torch import TorchTrainer, prepare_data_loader, prepare_model

__all__ = ["driver", "main", "train_loop"]

TEST_FRACTION = 0.25
DATA_SEED = 0


def load_split() -> tuple[Any, Any, Any, Any]:
    """The digits data, scaled to [0, 1], split the same way in every process."""
    import numpy as np
    from sklearn.datasets import load_digits  # type: ignore[import-untyped]

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(DATA_SEED).permutation(len(x))
    x = (x[order] / 16.0).astype(np.float32)
    y = y[order].astype(np.int64)
    cut = int(len(x) * (1 - TEST_FRACTION))
    return x[:cut], y[:cut], x[cut:], y[cut:]


def train_loop(config: dict[str, Any]) -> None:
    """One worker's training: DDP over the gang, a report (and rank 0's checkpoint) per epoch."""
    import tempfile

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(config["seed"])
    x_train, y_train, x_test, y_test = load_split()
    loader = prepare_data_loader(
        DataLoader(
            TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train)),
            batch_size=config["batch_size"],
            shuffle=True,
        )
    )
    model = prepare_model(
        nn.Sequential(
            nn.Linear(64, config["hidden"]), nn.ReLU(), nn.Linear(config["hidden"], 10)
        )
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    start_epoch = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:  # a restarted gang continues where it stopped
        with checkpoint.as_directory() as folder:
            state = torch.load(os.path.join(folder, "model.pt"))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1
    inputs, labels = torch.from_numpy(x_test), torch.from_numpy(y_test)
    rank = train.get_context().get_world_rank()
    for epoch in range(start_epoch, config["epochs"]):
        loader.sampler.set_epoch(epoch)
        model.train()
        total, batches = 0.0, 0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
        model.eval()
        with torch.no_grad():
            accuracy = float((model(inputs).argmax(1) == labels).float().mean())
        metrics = {"epoch": epoch, "loss": total / max(batches, 1), "accuracy": accuracy}
        if rank == 0:
            with tempfile.TemporaryDirectory() as folder:
                state = {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "epoch": epoch,
                }
                torch.save(state, os.path.join(folder, "model.pt"))
                train.report(metrics, checkpoint=train.Checkpoint.from_directory(folder))
        else:
            train.report(metrics)


def scaling(config: dict[str, Any]) -> train.ScalingConfig:
    """A trial's gang: its workers' shares (the driver itself takes none, as in Ray
    Train V2: it only waits)."""
    return train.ScalingConfig(
        num_workers=config["workers"], resources_per_worker={"CPU": config["cpus_per_worker"]}
    )


def driver(config: dict[str, Any]) -> None:
    """The trial: build the trainer and fit it; its reports reach Tune as they happen."""
    trainer = TorchTrainer(
        train_loop,
        train_loop_config=config,
        scaling_config=scaling(config),
        run_config=train.RunConfig(
            name="train",
            storage_path=tune.get_context().get_trial_dir(),
            checkpoint_config=train.CheckpointConfig(num_to_keep=1),
        ),
    )
    trainer.fit()  # a failed run raises, and the trial errors


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m actorrt.examples.digits",
        description=(
            "Sweep a small torch model on the digits data: every trial a data-parallel "
            "TorchTrainer run reserved with its driver as one gang, ASHA stopping weak trials."
        ),
    )
    parser.add_argument("--trials", type=int, default=8, help="trials to run (default 8)")
    parser.add_argument("--epochs", type=int, default=8, help="epochs per trial at most")
    parser.add_argument("--workers", type=int, default=2, help="training workers per trial")
    parser.add_argument(
        "--cpus-per-worker", type=float, default=0.5,
        help="CPUs each worker reserves (default 0.5: two trials share a 2-CPU machine)",
    )
    parser.add_argument(
        "--num-cpus", type=float, default=None,
        help="CPUs the runtime manages (default: this machine's)",
    )
    parser.add_argument("--seed", type=int, default=2, help="seed of the search")
    parser.add_argument(
        "--storage", default=None, help="where the experiment folder goes (~/actorrt_results)"
    )
    parser.add_argument("--no-plot", action="store_true", help="skip the learning-curve PNG")
    parser.add_argument("--quiet", action="store_true", help="no live progress output")
    args = parser.parse_args(argv)
    for name in ("trials", "epochs", "workers"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if not args.cpus_per_worker > 0:
        parser.error(f"--cpus-per-worker must be positive, got {args.cpus_per_worker}")
    if args.num_cpus is not None and not args.num_cpus > 0:
        parser.error(f"--num-cpus must be positive, got {args.num_cpus}")
    return args


def run(args: argparse.Namespace) -> tune.ResultGrid:
    """The sweep itself."""
    space = {
        "lr": tune.loguniform(1e-4, 3e-2),
        "hidden": tune.choice([16, 32, 64]),
        "batch_size": tune.choice([16, 32]),
        "seed": tune.randint(0, 1000),
        "epochs": args.epochs,
        "workers": args.workers,
        "cpus_per_worker": args.cpus_per_worker,
    }
    asha = tune.schedulers.ASHAScheduler(
        time_attr="training_iteration",
        max_t=args.epochs,
        grace_period=max(1, args.epochs // 4),
        reduction_factor=2,
    )
    tuner = tune.Tuner(
        tune.with_resources(driver, scaling),
        param_space=space,
        tune_config=tune.TuneConfig(
            metric="accuracy", mode="max", scheduler=asha,
            num_samples=args.trials, seed=args.seed,
        ),
        run_config=tune.RunConfig(
            name=f"digits_{time.strftime('%Y-%m-%d_%H-%M-%S')}",
            storage_path=args.storage,
            verbose=0 if args.quiet else 1,
        ),
    )
    return tuner.fit()


def curves(grid: tune.ResultGrid) -> list[tuple[str, list[float], bool]]:
    """Each trial's accuracy per epoch, and whether it ran every epoch."""
    out = []
    for result in grid:
        if result.error is not None or not result.metrics:
            continue
        frame = result.metrics_dataframe
        accuracy = [float(a) for a in frame["accuracy"]]
        out.append((result.trial_id, accuracy, len(accuracy) >= result.config["epochs"]))
    return out


def plot(grid: tune.ResultGrid, path: str) -> str | None:
    """Write the learning curves PNG; ``None`` when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    for trial_id, accuracy, finished in curves(grid):
        epochs = range(1, len(accuracy) + 1)
        if finished:
            ax.plot(epochs, accuracy, "-o", markersize=3, label=trial_id)
        else:
            (line,) = ax.plot(epochs, accuracy, "--", alpha=0.6, label=f"{trial_id} (stopped)")
            ax.plot(len(accuracy), accuracy[-1], "x", color=line.get_color(), markersize=9)
    ax.set_xlabel("epoch (training_iteration)")
    ax.set_ylabel("test accuracy")
    ax.set_title("Digits sweep: every trial's learning curve (dashed, x: stopped by ASHA)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def summary(grid: tune.ResultGrid) -> str:
    """The results table, best first, and the best config."""
    rows = []
    for result in grid:
        accuracy = result.metrics.get("accuracy", math.nan)
        epochs = result.metrics.get("training_iteration", 0)
        status = "ERROR" if result.error is not None else (
            "done" if epochs >= result.config["epochs"] else "stopped early"
        )
        rows.append((accuracy, result, epochs, status))
    rows.sort(key=lambda row: -row[0] if not math.isnan(row[0]) else math.inf)
    lines = [f"{'trial':<14}{'accuracy':>9}{'epochs':>8}  {'status':<14}{'lr':>8}"
             f"{'hidden':>8}{'batch':>7}"]
    for accuracy, result, epochs, status in rows:
        c = result.config
        lines.append(
            f"{result.trial_id:<14}{accuracy:>9.3f}{epochs:>8}  {status:<14}{c['lr']:>8.4f}"
            f"{c['hidden']:>8}{c['batch_size']:>7}"
        )
    best = grid.get_best_result()
    shown = {k: best.config[k] for k in ("lr", "hidden", "batch_size")}
    lines.append("")
    lines.append(f"best: accuracy {best.metrics['accuracy']:.3f} with {shown}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit status."""
    args = parse_args(argv)
    started = time.monotonic()
    num_cpus = args.num_cpus if args.num_cpus is not None else float(os.cpu_count() or 1)
    per_trial = args.workers * args.cpus_per_worker
    print(
        f"digits sweep: {args.trials} trials x up to {args.epochs} epochs, each a "
        f"{args.workers}-worker TorchTrainer reserving {per_trial:g} CPU of {num_cpus:g} "
        f"({int(num_cpus // per_trial)} trials at once)",
        flush=True,
    )
    actorrt.init(num_cpus=num_cpus)
    try:
        grid = run(args)
    finally:
        actorrt.shutdown()
    print()
    print(summary(grid))
    print(f"experiment folder: {grid.experiment_path}")
    if not args.no_plot:
        png = plot(grid, os.path.join(grid.experiment_path, "learning_curves.png"))
        print(f"learning curves: {png}" if png else "learning curves: install matplotlib")
    print(f"took {time.monotonic() - started:.1f} s")
    return 1 if grid.num_errors else 0


if __name__ == "__main__":
    sys.exit(main())

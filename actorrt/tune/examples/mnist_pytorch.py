"""Ray's ``ray.tune.examples.mnist_pytorch``: a small MNIST ConvNet and its train/test loops.

Programs import ``ConvNet``, ``train_func``, ``test_func`` (and the older names ``train``
and ``test``) and ``get_data_loaders``. The loops work on any loader of ``(images,
labels)`` batches of 1x28x28 images; ``get_data_loaders`` reads MNIST with torchvision,
downloading it into ``~/data`` when it is not there: without torchvision, or offline
without the files, it raises and says what to do.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

__all__ = [
    "EPOCH_SIZE",
    "TEST_SIZE",
    "ConvNet",
    "get_data_loaders",
    "test",
    "test_func",
    "train",
    "train_func",
    "train_mnist",
]

EPOCH_SIZE = 512  # training samples per call of train_func, as in Ray
TEST_SIZE = 256  # test samples per call of test_func

DATA_DIR = os.path.expanduser("~/data")


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise ImportError(
            "ray.tune.examples.mnist_pytorch needs torch: pip install torch"
        ) from exc
    return torch


def _conv_net_class() -> type:
    torch = _torch()
    nn, functional = torch.nn, torch.nn.functional

    class ConvNet(nn.Module):  # type: ignore[misc, name-defined]
        """Ray's example network: one 3-channel conv layer, max-pooling, a linear head."""

        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 3, kernel_size=3)
            self.fc = nn.Linear(192, 10)

        def forward(self, x: Any) -> Any:
            x = functional.relu(functional.max_pool2d(self.conv1(x), 3))
            x = x.view(-1, 192)
            return functional.log_softmax(self.fc(x), dim=1)

    ConvNet.__module__ = __name__
    ConvNet.__qualname__ = "ConvNet"
    return ConvNet


ConvNet = _conv_net_class()


def train_func(model: Any, optimizer: Any, train_loader: Any, device: Any = None) -> None:
    """One pass over up to ``EPOCH_SIZE`` training samples (negative log-likelihood)."""
    torch = _torch()
    device = device or torch.device("cpu")
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        if batch_idx * len(data) > EPOCH_SIZE:
            return
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()


def test_func(model: Any, data_loader: Any, device: Any = None) -> float:
    """The accuracy on up to ``TEST_SIZE`` samples of ``data_loader`` (a float in [0, 1])."""
    torch = _torch()
    device = device or torch.device("cpu")
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for batch_idx, (data, target) in enumerate(data_loader):
            if batch_idx * len(data) > TEST_SIZE:
                break
            data, target = data.to(device), target.to(device)
            predicted = model(data).argmax(dim=1)
            total += target.size(0)
            correct += int((predicted == target).sum().item())
    if total == 0:
        raise ValueError("test_func got an empty data loader: it needs at least one batch")
    return correct / total


train = train_func  # the names older Ray examples import
test = test_func


def get_data_loaders(batch_size: int = 64) -> tuple[Any, Any]:
    """MNIST's train and test loaders (normalised as in Ray), from ``~/data``.

    Raises:
        ImportError: torchvision is not installed.
        RuntimeError: the files are not in ``~/data`` and could not be downloaded.
    """
    torch = _torch()
    try:
        from torchvision import datasets, transforms  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ImportError(
            "get_data_loaders() reads MNIST with torchvision, which is not installed: "
            "pip install torchvision (or build loaders of 1x28x28 images yourself)"
        ) from exc
    from filelock import FileLock

    transform = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))]
    )
    os.makedirs(DATA_DIR, exist_ok=True)
    with FileLock(os.path.join(DATA_DIR, "mnist.lock")):  # one download per machine
        try:
            train_set = datasets.MNIST(DATA_DIR, train=True, download=True, transform=transform)
            test_set = datasets.MNIST(DATA_DIR, train=False, download=True, transform=transform)
        except Exception as exc:  # offline: torchvision raises URLError/RuntimeError
            raise RuntimeError(
                f"MNIST is not in {DATA_DIR} and could not be downloaded ({exc}): put the "
                "MNIST files there (torchvision's layout) or run once with network access"
            ) from exc
    loader = torch.utils.data.DataLoader
    return (
        loader(train_set, batch_size=batch_size, shuffle=True),
        loader(test_set, batch_size=batch_size, shuffle=True),
    )


def train_mnist(config: dict[str, Any]) -> None:
    """Ray's function trainable: SGD on MNIST with ``config["lr"]`` and ``["momentum"]``,
    reporting ``mean_accuracy`` after each pass."""
    from ... import tune

    torch = _torch()
    train_loader, test_loader = get_data_loaders()
    model = ConvNet()
    optimizer = torch.optim.SGD(
        model.parameters(), lr=config.get("lr", 0.01), momentum=config.get("momentum", 0.9)
    )
    while True:
        train_func(model, optimizer, train_loader)
        tune.report({"mean_accuracy": test_func(model, test_loader)})


if __name__ == "__main__":
    from ... import tune
    from ..schedulers import AsyncHyperBandScheduler

    parser = argparse.ArgumentParser(description="PyTorch MNIST under Tune")
    parser.add_argument("--smoke-test", action="store_true", help="Finish quickly")
    smoke = parser.parse_known_args()[0].smoke_test
    results = tune.Tuner(
        train_mnist,
        param_space={"lr": tune.loguniform(1e-4, 1e-2), "momentum": tune.uniform(0.1, 0.9)},
        tune_config=tune.TuneConfig(
            metric="mean_accuracy", mode="max", num_samples=1 if smoke else 50,
            scheduler=AsyncHyperBandScheduler(),
        ),
        run_config=tune.RunConfig(stop={"training_iteration": 5 if smoke else 100}),
    ).fit()
    print("Best config is:", results.get_best_result().config)

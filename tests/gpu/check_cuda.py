"""Check the GPU path of ``actorrt.train`` with real CUDA and NCCL (run by hand on a GPU node).

    PYTHONPATH=$PWD python tests/gpu/check_cuda.py [--workers N]

Not collected by pytest (no ``test_`` prefix); it exits 0 with a note where CUDA is not
available. On a node with GPUs it runs a ``TorchTrainer`` with ``use_gpu=True`` on
``min(N, GPUs)`` workers and checks, in every worker: the process group's backend is
NCCL; ``train.torch.get_device()`` is ``cuda:<LOCAL_RANK>`` (each worker sees the gang's
devices and picks its own) and is CUDA's current device; ``get_devices()`` agrees;
``prepare_model`` put the model on that device (wrapped in DDP with more than one
worker); an all-reduce over NCCL sums the ranks; a DDP step leaves every rank with equal
parameters. It prints one line per rank and ``OK``, or raises.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def train_loop(config: dict[str, Any]) -> None:
    import torch
    import torch.distributed as dist

    from actorrt import train
    from actorrt.train.torch import get_device, get_devices, prepare_model

    context = train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = get_device()
    assert dist.get_backend() == "nccl", dist.get_backend()
    assert device == torch.device("cuda", local_rank), (device, local_rank)
    assert torch.cuda.current_device() == device.index
    assert get_devices() == [device]

    model = prepare_model(torch.nn.Linear(8, 1))
    assert next(model.parameters()).device == device
    assert (type(model).__name__ == "DistributedDataParallel") == (world > 1)

    total = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(total)
    assert total.item() == world * (world + 1) / 2, total.item()

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(rank)  # different data per rank; DDP averages the gradients
    loss = model(torch.randn(16, 8, device=device)).pow(2).mean()
    loss.backward()
    optimizer.step()
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    assert all(torch.equal(gathered[0], g) for g in gathered), "ranks diverged"

    train.report({
        "rank": rank,
        "device": str(device),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "name": torch.cuda.get_device_name(device),
    })
    print(f"rank {rank}: {device} of CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}"
          f" ({torch.cuda.get_device_name(device)}), NCCL all-reduce and a DDP step agree")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="at most this many GPU workers")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print(f"skipped: torch {torch.__version__} sees no CUDA device here")
        return 0
    import actorrt
    from actorrt import train
    from actorrt.train.torch import TorchTrainer

    actorrt.init()
    gpus = int(actorrt.cluster_resources().get("GPU", 0))
    workers = max(1, min(args.workers, gpus))
    result = TorchTrainer(
        train_loop,
        scaling_config=train.ScalingConfig(num_workers=workers, use_gpu=True),
    ).fit()
    assert result.metrics["device"] == "cuda:0", result.metrics
    print(f"OK: {workers} worker(s) on {gpus} GPU(s); rank 0 saw {result.metrics}")
    actorrt.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

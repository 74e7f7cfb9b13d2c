"""``datasets=`` on a trainer and ``train.get_dataset_shard(name)`` in its workers.

Real worker processes; in-memory data of every supported kind. Each rank gets an equal,
disjoint shard; with a shuffle seed, the order is a function of (seed, epoch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import Recorder

import actorrt
from actorrt import train

WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
ROWS = 11  # two workers: 5 rows each, the 11th left out so both run as many batches


class SquaresDataset:
    """A torch-style map-style dataset (``__len__`` and ``__getitem__``)."""

    def __len__(self) -> int:
        return ROWS

    def __getitem__(self, i: int) -> Any:
        import torch

        return torch.tensor([i, i * i], dtype=torch.float64)



def read_shards(config: dict[str, Any]) -> None:
    import torch

    rank = train.get_context().get_world_rank()
    seen: dict[str, Any] = {"rank": rank}
    arr = train.get_dataset_shard("arr")
    seen["arr_len"] = len(arr)
    seen["arr"] = [
        batch["data"][:, 0].tolist() for batch in arr.iter_batches(batch_size=2)
    ]
    seen["arr_drop_last"] = [
        len(b["data"]) for b in arr.iter_batches(batch_size=2, drop_last=True)
    ]
    seen["epochs"] = [
        [int(x) for b in arr.iter_batches(
            batch_size=None, local_shuffle_buffer_size=100, local_shuffle_seed=7
        ) for x in b["data"][:, 0]]
        for _ in range(2)
    ]
    cols = next(train.get_dataset_shard("cols").iter_batches(batch_size=None))
    seen["cols"] = (cols["x"].tolist(), cols["name"].tolist())
    frame = next(train.get_dataset_shard("df").iter_batches(batch_format="pandas"))
    seen["df"] = (type(frame).__name__, frame["x"].tolist())
    seen["items"] = [r["k"] for r in train.get_dataset_shard("items").iter_rows()]
    seen["scalars"] = [
        int(x) for b in train.get_dataset_shard("scalars").iter_batches() for x in b["item"]
    ]
    batches = list(train.get_dataset_shard("torch").iter_torch_batches(
        batch_size=4, dtypes=torch.float32
    ))
    seen["torch"] = [
        (str(b["item"].dtype), str(b["item"].device), b["item"][:, 0].tolist()) for b in batches
    ]
    pairs = train.get_dataset_shard("pairs")  # a TensorDataset: rows are (x, y) tuples
    first = next(pairs.iter_batches(batch_size=2))["item"]
    seen["pairs_rows"] = [(float(x), int(y)) for x, y in first]
    try:
        next(pairs.iter_torch_batches(batch_size=2))
    except TypeError as exc:
        seen["pairs_error"] = str(exc)
    collated = next(pairs.iter_torch_batches(
        batch_size=2,
        collate_fn=lambda b: torch.utils.data.default_collate(list(b["item"])),
    ))
    seen["pairs_collated"] = [t.tolist() for t in collated]
    try:
        train.get_dataset_shard("nope")
    except KeyError as exc:
        seen["missing"] = str(exc)
    actorrt.get(config["recorder"].record(seen))


async def seen_by_rank(
    read: Any, datasets: dict[str, Any], tmp_path: Path
) -> list[dict[str, Any]]:
    """Run ``read`` on two workers over ``datasets``; what each rank recorded, by rank."""
    recorder = await Recorder.spawn()
    await train.DataParallelTrainer(
        read,
        train_loop_config={"recorder": recorder},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(storage_path=str(tmp_path)),
        datasets=datasets,
    ).fit_async()
    return sorted(await recorder.all(), key=lambda s: s["rank"])


@pytest.mark.timeout(90)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_each_rank_reads_its_own_disjoint_shard_of_every_kind(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    datasets = {
        "arr": np.stack([np.arange(ROWS), -np.arange(ROWS)], axis=1),
        "cols": {"x": np.arange(ROWS), "name": [f"n{i}" for i in range(ROWS)]},
        "df": pd.DataFrame({"x": np.arange(ROWS) * 10}),
        "items": [{"k": i} for i in range(ROWS)],
        "scalars": list(range(ROWS)),
        "torch": SquaresDataset(),
        "pairs": torch.utils.data.TensorDataset(
            torch.arange(ROWS, dtype=torch.float32), torch.arange(ROWS) * 2
        ),
    }
    by_rank = await seen_by_rank(read_shards, datasets, tmp_path)
    assert [s["rank"] for s in by_rank] == [0, 1]
    shards = [list(range(5)), list(range(5, 10))]  # equal, disjoint, row 10 left out
    for seen, rows in zip(by_rank, shards, strict=True):
        assert seen["arr_len"] == 5
        assert seen["arr"] == [rows[0:2], rows[2:4], rows[4:5]]
        assert seen["arr_drop_last"] == [2, 2]
        # Shuffled by (seed, epoch): each epoch a permutation of the shard, new each
        # epoch, and what the seed and epoch say.
        for epoch, order in enumerate(seen["epochs"]):
            expected = np.arange(5)
            np.random.default_rng((7, epoch + 2)).shuffle(expected)  # epochs 0, 1 above
            assert order == [rows[i] for i in expected]
        assert sorted(seen["epochs"][0]) == rows and seen["epochs"][0] != seen["epochs"][1]
        assert seen["cols"] == (rows, [f"n{i}" for i in rows])
        assert seen["df"] == ("DataFrame", [10 * i for i in rows])
        assert seen["items"] == rows and seen["scalars"] == rows
        assert seen["torch"] == [
            ("torch.float32", "cpu", [float(i) for i in rows[0:4]]),
            ("torch.float32", "cpu", [float(rows[4])]),
        ]
        assert seen["pairs_rows"] == [(float(i), 2 * i) for i in rows[:2]]
        assert "column 'item' holds Python objects" in seen["pairs_error"]
        assert seen["pairs_collated"] == [[float(i) for i in rows[:2]], [2 * i for i in rows[:2]]]
        assert "no dataset named 'nope'" in seen["missing"] and "'torch'" in seen["missing"]
    assert actorrt.available_resources() == actorrt.cluster_resources()


class FakeRayDataset:
    """What a ``ray.data.Dataset`` looks like from here."""

    def streaming_split(self, n: int) -> None: ...

    def iter_batches(self) -> None: ...


FakeRayDataset.__module__ = "ray.data.dataset"


def nothing() -> None:
    pass


def test_bad_datasets_are_refused_at_the_trainer() -> None:
    with pytest.raises(TypeError, match=r"Ray Data dataset.*docs/porting.md"):
        train.DataParallelTrainer(nothing, datasets={"train": FakeRayDataset()})
    with pytest.raises(TypeError, match=r"datasets\['x'\] must be a numpy array.*got int"):
        train.DataParallelTrainer(nothing, datasets={"x": 3})
    with pytest.raises(ValueError, match=r"one length; got lengths \{'a': 2, 'b': 3\}"):
        train.DataParallelTrainer(nothing, datasets={"c": {"a": [1, 2], "b": [1, 2, 3]}})
    with pytest.raises(TypeError, match="datasets must be a dict"):
        train.DataParallelTrainer(nothing, datasets=[1, 2])  # type: ignore[arg-type]


class CountingIterable(torch.utils.data.IterableDataset):  # type: ignore[misc]
    """A torch IterableDataset: no ``__len__``, rows only by iterating."""

    def __iter__(self) -> Any:
        return iter({"v": i, "sq": i * i} for i in range(ROWS))


def read_iterable_shards(config: dict[str, Any]) -> None:
    rank = train.get_context().get_world_rank()
    table = next(train.get_dataset_shard("arrow").iter_batches(
        batch_size=None, batch_format="pyarrow"
    ))
    seen = {
        "rank": rank,
        "arrow": (type(table).__name__, table.column("x").to_pylist(),
                  table.column("tag").to_pylist()),
        "arrow_numpy": [
            b["x"].tolist() for b in train.get_dataset_shard("arrow").iter_batches(batch_size=3)
        ],
        "gen": [int(x) for b in train.get_dataset_shard("gen").iter_batches() for x in b["item"]],
        "iterable": [
            b["sq"].tolist() for b in train.get_dataset_shard("iterable").iter_torch_batches(
                batch_size=10
            )
        ],
    }
    actorrt.get(config["recorder"].record(seen))


@pytest.mark.timeout(90)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_arrow_tables_generators_and_iterable_datasets_are_sharded_disjointly(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    import pyarrow as pa

    datasets = {
        "arrow": pa.table({"x": list(range(ROWS)), "tag": [f"t{i}" for i in range(ROWS)]}),
        "gen": (i * 3 for i in range(ROWS)),  # read once, when the trainer is built
        "iterable": CountingIterable(),
    }
    by_rank = await seen_by_rank(read_iterable_shards, datasets, tmp_path)
    shards = [list(range(5)), list(range(5, 10))]  # equal, disjoint, row 10 left out
    for seen, rows in zip(by_rank, shards, strict=True):
        assert seen["arrow"] == ("Table", rows, [f"t{i}" for i in rows])
        assert seen["arrow_numpy"] == [rows[:3], rows[3:]]
        assert seen["gen"] == [3 * i for i in rows]
        assert seen["iterable"] == [[i * i for i in rows]]

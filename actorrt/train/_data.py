"""``datasets=`` for in-memory data, and each worker's shard (``train.get_dataset_shard``).

Ray Data is not part of actorrt: a trainer takes the data users hold in memory, in the
shapes Ray Data's ``from_*`` constructors read, named as Ray names their columns:

| given | columns of a batch |
|---|---|
| a numpy array | ``"data"`` (rows along the first axis), as ``ray.data.from_numpy`` |
| a dict of equally long arrays or lists | its keys |
| a pandas DataFrame | its columns |
| a pyarrow ``Table`` | its columns, as ``ray.data.from_arrow`` |
| a list of dicts | their keys; a list of anything else: ``"item"``, as ``from_items`` |
| a torch map-style ``Dataset`` (``__len__`` and ``__getitem__``) | ``"item"``, as ``from_torch`` |
| a generator, a torch ``IterableDataset`` or any other iterable | as a list of its items |

A pyarrow table becomes a dict of numpy columns and an iterable a list, once, when the
trainer is built (a generator is read to its end there).

The coordinator splits each dataset into ``num_workers`` equal, contiguous, disjoint
shards (like Ray Train's ``streaming_split(equal=True)``: the last ``len % num_workers``
rows are left out, so every rank runs the same number of batches and no collective
waits for a rank that ran out). Only a rank's own rows travel to it (a torch Dataset
travels whole, with the range of its indices). The coordinator imports neither torch nor
pandas for this.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._extras import require

if TYPE_CHECKING:
    import numpy as np

PORTING = "docs/porting.md"
BATCH_FORMATS = ("default", "numpy", "pandas", "pyarrow")
KINDS = (
    "a numpy array, a dict of arrays, a pandas DataFrame, a pyarrow Table, a torch "
    "Dataset, a list or another iterable (a generator)"
)


def _is_ray_data(value: Any) -> bool:
    module = type(value).__module__ or ""
    return module.startswith("ray.data") or (
        hasattr(value, "streaming_split") and hasattr(value, "iter_batches")
    )


def _is_ndarray(value: Any) -> bool:
    return type(value).__name__ == "ndarray" and type(value).__module__ == "numpy"


def _kind(name: str, value: Any) -> str:
    """What kind of in-memory data ``value`` is; a clear error when it is none of them."""
    if _is_ray_data(value):
        raise TypeError(
            f"datasets[{name!r}] is a Ray Data dataset ({type(value).__module__}."
            f"{type(value).__name__}); actorrt has no Ray Data. Pass the data in memory "
            f"({KINDS}), or load it in the training function yourself; see {PORTING}"
        )
    if _is_ndarray(value):
        if value.ndim == 0:
            raise ValueError(f"datasets[{name!r}] is a 0-d array; rows run along axis 0")
        return "numpy"
    if isinstance(value, Mapping):
        lengths = {k: len(v) for k, v in value.items()}
        if not value or len(set(lengths.values())) != 1:
            raise ValueError(
                f"datasets[{name!r}] is a dict of columns, so its values must be arrays "
                f"or lists of one length; got lengths {lengths}"
            )
        return "columns"
    if type(value).__module__.startswith("pandas") and hasattr(value, "iloc"):
        return "pandas"
    if isinstance(value, list | tuple):
        return "items"
    if hasattr(value, "__getitem__") and hasattr(value, "__len__"):
        return "torch"
    raise TypeError(
        f"datasets[{name!r}] must be {KINDS}; got {type(value).__name__}. Ray Data is not "
        f"supported; see {PORTING}"
    )


def _is_arrow_table(value: Any) -> bool:
    return type(value).__name__ == "Table" and (type(value).__module__ or "").startswith(
        "pyarrow"
    )


def _in_memory(name: str, value: Any) -> Any:
    """A pyarrow table as a dict of numpy columns, and an iterable that is none of the
    other kinds (a generator, a torch ``IterableDataset``) as the list of its items."""
    if _is_arrow_table(value):
        return {str(c): value.column(c).to_numpy() for c in value.column_names}
    if _is_ray_data(value) or _is_ndarray(value) or isinstance(
        value, Mapping | list | tuple | str | bytes
    ):
        return value
    if type(value).__module__.startswith("pandas"):
        return value
    if hasattr(value, "__getitem__") and hasattr(value, "__len__"):
        return value
    if hasattr(value, "__iter__"):
        try:
            return list(value)
        except TypeError as exc:  # e.g. a torch IterableDataset that cannot iterate
            raise TypeError(f"datasets[{name!r}] could not be iterated: {exc}") from exc
    return value


def check_datasets(datasets: Mapping[str, Any] | None) -> dict[str, Any]:
    """``datasets=`` checked at the trainer's construction (names, kinds)."""
    if datasets is None:
        return {}
    if not isinstance(datasets, Mapping):
        raise TypeError(f"datasets must be a dict of name to data, got {datasets!r}")
    checked: dict[str, Any] = {}
    for name, value in datasets.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"dataset names are non-empty strings, got {name!r}")
        checked[name] = _in_memory(name, value)
        _kind(name, checked[name])
    return checked


def split_datasets(datasets: Mapping[str, Any], world: int) -> list[dict[str, Any]]:
    """Each rank's part of every dataset: ``[{name: part}, ...]`` by rank."""
    parts: list[dict[str, Any]] = [{} for _ in range(world)]
    for name, value in datasets.items():
        kind = _kind(name, value)
        rows = len(next(iter(value.values()))) if kind == "columns" else len(value)
        size = rows // world
        for rank in range(world):
            lo, hi = rank * size, (rank + 1) * size
            parts[rank][name] = (kind, _slice(kind, value, lo, hi))
    return parts


def _slice(kind: str, value: Any, lo: int, hi: int) -> Any:
    if kind == "numpy":
        return value[lo:hi].copy()  # only these rows travel
    if kind == "columns":
        return {k: (v[lo:hi].copy() if _is_ndarray(v) else list(v[lo:hi]))
                for k, v in value.items()}
    if kind == "pandas":
        return value.iloc[lo:hi]
    if kind == "items":
        return list(value[lo:hi])
    return (value, lo, hi)  # torch: the dataset and this rank's index range


class DataShard:
    """One worker's shard of a dataset (what ``train.get_dataset_shard`` returns).

    Iterate it once per epoch with ``iter_batches`` or ``iter_torch_batches``. Each call
    starts a new epoch; with ``local_shuffle_buffer_size`` the shard's rows come in an
    order drawn from ``(local_shuffle_seed, epoch)``: the same for the same seed and
    epoch, new each epoch (random when no seed is given, as in Ray). Without it, rows
    come in order.
    """

    def __init__(self, name: str, part: tuple[str, Any]) -> None:
        self.name = name
        self._kind, self._data = part
        self._epoch = 0

    def __len__(self) -> int:
        """The shard's number of rows."""
        if self._kind == "torch":
            _, lo, hi = self._data
            return int(hi - lo)
        if self._kind == "columns":
            return len(next(iter(self._data.values())))
        return len(self._data)

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """The shard's rows in order, each a dict of column to value."""
        for batch in self.iter_batches(batch_size=1):
            yield {k: v[0] for k, v in batch.items()}

    def iter_batches(
        self,
        *,
        prefetch_batches: int = 1,
        batch_size: int | None = 256,
        batch_format: str | None = "default",
        drop_last: bool = False,
        local_shuffle_buffer_size: int | None = None,
        local_shuffle_seed: int | None = None,
    ) -> Iterator[Any]:
        """The shard in batches of ``batch_size`` rows (``None``: one batch of all).

        Args:
            batch_format: ``"default"``/``"numpy"``: a dict of column to numpy array;
                ``"pandas"``: a DataFrame; ``"pyarrow"``: a pyarrow Table.
            drop_last: leave out a last batch shorter than ``batch_size``.
            local_shuffle_buffer_size: any positive number shuffles the shard's rows
                (all of them, not only a buffer's worth).
            local_shuffle_seed: the seed of that shuffle (with the epoch).
            prefetch_batches: accepted for Ray's signature; batches are made on demand.

        Raises:
            ValueError: a bad ``batch_size``, ``batch_format`` or shuffle size.
        """
        del prefetch_batches
        if batch_format is None:
            batch_format = "default"
        if batch_format not in BATCH_FORMATS:
            raise ValueError(
                f"batch_format must be one of {', '.join(BATCH_FORMATS)}, got {batch_format!r}"
            )
        order = self._order(batch_size, local_shuffle_buffer_size, local_shuffle_seed)
        for chunk in _chunks(order, batch_size, drop_last):
            batch = self._numpy_batch(chunk)
            if batch_format == "pandas":
                pd = require("pandas", "train", 'iter_batches(batch_format="pandas")')
                yield pd.DataFrame({k: list(v) if v.ndim > 1 else v for k, v in batch.items()})
            elif batch_format == "pyarrow":
                pa = require("pyarrow", "train", 'iter_batches(batch_format="pyarrow")')
                yield pa.table({k: list(v) if v.ndim > 1 else v for k, v in batch.items()})
            else:
                yield batch

    def iter_torch_batches(
        self,
        *,
        prefetch_batches: int = 1,
        batch_size: int | None = 256,
        dtypes: Any = None,
        device: Any = "auto",
        collate_fn: Any = None,
        drop_last: bool = False,
        local_shuffle_buffer_size: int | None = None,
        local_shuffle_seed: int | None = None,
    ) -> Iterator[Any]:
        """``iter_batches`` with each column as a ``torch.Tensor`` on ``device``.

        Args:
            dtypes: a ``torch.dtype`` for every column, or a dict of column to dtype.
            device: ``"auto"`` (default): this worker's ``train.torch.get_device()``;
                else a device or its name.
            collate_fn: when given, called with each numpy batch instead of the
                conversion; its result is yielded as it is.
            the rest: as for ``iter_batches``.
        """
        import torch

        from .torch.train_loop_utils import get_device

        target = get_device() if device == "auto" else torch.device(device)
        numpy_batches = self.iter_batches(
            batch_size=batch_size, drop_last=drop_last,
            local_shuffle_buffer_size=local_shuffle_buffer_size,
            local_shuffle_seed=local_shuffle_seed, prefetch_batches=prefetch_batches,
        )
        for batch in numpy_batches:
            if collate_fn is not None:
                yield collate_fn(batch)
                continue
            out = {}
            for column, values in batch.items():
                if values.dtype == object:
                    raise TypeError(
                        f"dataset {self.name!r}: column {column!r} holds Python objects "
                        f"(e.g. {type(values[0]).__name__}s, as a TensorDataset's tuples), "
                        "which are no tensor; pass collate_fn= to build the batch, or give "
                        "the data as a dict of arrays (one column each)"
                    )
                dtype = dtypes.get(column) if isinstance(dtypes, Mapping) else dtypes
                out[column] = torch.as_tensor(values, dtype=dtype, device=target)
            yield out

    def _order(self, batch_size: int | None, buffer: int | None, seed: int | None) -> Any:
        if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
            raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}")
        if buffer is not None and (isinstance(buffer, bool) or buffer < 1):
            raise ValueError(
                f"local_shuffle_buffer_size must be a positive int or None, got {buffer!r}"
            )
        import numpy as np

        epoch, self._epoch = self._epoch, self._epoch + 1
        order = np.arange(len(self))
        if buffer is not None:
            rng = np.random.default_rng(None if seed is None else (seed, epoch))
            rng.shuffle(order)
        return order

    def _numpy_batch(self, rows: Any) -> dict[str, np.ndarray]:
        import numpy as np

        data = self._data
        if self._kind == "numpy":
            return {"data": data[rows]}
        if self._kind == "columns":
            return {k: np.asarray(v)[rows] for k, v in data.items()}
        if self._kind == "pandas":
            frame = data.iloc[rows]
            return {str(k): frame[k].to_numpy() for k in frame.columns}
        if self._kind == "items":
            picked = [data[i] for i in rows]
            if picked and all(isinstance(p, Mapping) for p in picked):
                return {k: _stack([p[k] for p in picked]) for k in picked[0]}
            return {"item": _stack(picked)}
        dataset, lo, _ = data
        return {"item": _stack([dataset[lo + int(i)] for i in rows])}

    def __repr__(self) -> str:
        return f"DataShard({self.name!r}, rows={len(self)})"


def _stack(values: Sequence[Any]) -> np.ndarray:
    """Values as one array: stacked when they are equally shaped numbers or tensors."""
    import numpy as np

    converted = [v.numpy() if hasattr(v, "numpy") and callable(v.numpy) else v for v in values]
    if not any(isinstance(v, tuple | list | Mapping) for v in converted):
        try:
            return np.stack([np.asarray(v) for v in converted]) if converted else np.asarray([])
        except (ValueError, TypeError):
            pass
    out = np.empty(len(converted), dtype=object)  # one Python object per row, kept whole
    for i, value in enumerate(converted):
        out[i] = value
    return out


def _chunks(order: Any, batch_size: int | None, drop_last: bool) -> Iterator[Any]:
    size = len(order) if batch_size is None else batch_size
    if size == 0:
        return
    for start in range(0, len(order), size):
        chunk = order[start:start + size]
        if drop_last and len(chunk) < size:
            return
        yield chunk

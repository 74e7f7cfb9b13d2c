"""Hugging Face Transformers through TorchTrainer: 2 gloo workers train a tiny GPT-2 built
from a config (nothing downloaded) with transformers.Trainer and RayTrainReportCallback."""

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "transformers", reason="Hugging Face Transformers is not installed: actorrt[transformers]"
)
pytest.importorskip("accelerate", reason="accelerate is not installed: actorrt[transformers]")

import torch
import transformers
from conftest import Recorder

import actorrt
from actorrt import train
from actorrt.train.huggingface.transformers import RayTrainReportCallback, prepare_trainer
from actorrt.train.torch import TorchConfig, TorchTrainer

WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
              "TRANSFORMERS_VERBOSITY": "error"}
VOCAB = 100
SEQUENCE = 16
SAMPLES = 32
BATCH = 4



def tiny_gpt2(seed: int) -> transformers.GPT2LMHeadModel:
    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQUENCE, n_embd=16, n_layer=1, n_head=2,
        bos_token_id=0, eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(config)


class Tokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    """Fixed random token ids; a causal LM learns to predict each sequence."""

    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, VOCAB, (SAMPLES, SEQUENCE), generator=generator)

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class Batches:
    """Ready-made batches (as a worker's data shard iterator yields them): re-iterable,
    no length. Counts how many it handed out."""

    def __init__(self, rank: int) -> None:
        self.ids = Tokens().ids[rank::2]
        self.given = 0

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for start in range(0, len(self.ids), BATCH):
            self.given += 1
            chunk = self.ids[start : start + BATCH]
            yield {"input_ids": chunk, "labels": chunk}


def checksum(model: torch.nn.Module) -> str:
    flat = torch.cat([p.detach().cpu().flatten() for p in model.parameters()])
    return hashlib.sha256(flat.numpy().tobytes()).hexdigest()


def train_gpt2(config: dict[str, Any]) -> None:
    """A Ray Train Transformers loop, as its docs write one, with actorrt's imports."""
    rank = train.get_context().get_world_rank()
    model = tiny_gpt2(seed=100 + rank)  # ranks start apart: DDP must bring them together
    args = transformers.TrainingArguments(
        output_dir=config["output_dir"],
        per_device_train_batch_size=BATCH,
        per_device_eval_batch_size=BATCH,
        num_train_epochs=2,
        learning_rate=1e-2,
        eval_strategy="epoch",
        logging_strategy="epoch",
        save_strategy="epoch",
        report_to="none",
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=Tokens(), eval_dataset=Tokens(),
        callbacks=[RayTrainReportCallback()],
    )
    trainer = prepare_trainer(trainer)
    trainer.train()
    record = {
        "rank": rank,
        "checksum": checksum(model),
        "steps": trainer.state.global_step,
        "hf_world": (trainer.args.world_size, trainer.args.process_index),
    }

    # prepare_trainer also feeds an iterable of ready-made batches as it is.
    batches = Batches(rank)
    more = transformers.Trainer(
        model=model,
        args=transformers.TrainingArguments(
            output_dir=config["output_dir"] + "-batches", max_steps=4, save_strategy="no",
            report_to="none", disable_tqdm=True,
        ),
        train_dataset=batches,
    )
    prepare_trainer(more).train()
    record.update(batch_steps=more.state.global_step, batches_given=batches.given,
                  after_batches=checksum(model))
    actorrt.get(config["recorder"].record(record))


@pytest.mark.timeout(180)
@pytest.mark.actorrt(num_cpus=2, worker_env=WORKER_ENV)
async def test_trainer_reports_each_save_and_ranks_end_equal(
    actorrt_runtime: actorrt.Runtime, tmp_path: Path
) -> None:
    recorder = await Recorder.spawn()
    trainer = TorchTrainer(
        train_gpt2,
        train_loop_config={"recorder": recorder, "output_dir": str(tmp_path / "hf")},
        torch_config=TorchConfig(backend="gloo", timeout_s=60),
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="transformers", storage_path=str(tmp_path)),
    )
    result = await trainer.fit_async()
    assert result.error is None, result.failures

    ranks = sorted(await recorder.all(), key=lambda r: r["rank"])
    assert [r["hf_world"] for r in ranks] == [(2, 0), (2, 1)]
    # DDP: ranks started from different seeds and ended with identical weights.
    assert ranks[0]["checksum"] == ranks[1]["checksum"]
    # Each rank trained on its half: 32 samples / (2 ranks * 4) = 4 steps an epoch.
    assert [r["steps"] for r in ranks] == [8, 8]

    # One report per save (each epoch), with the merged log history.
    assert [m["epoch"] for m in result.metrics_history] == [1.0, 2.0]
    assert [m["step"] for m in result.metrics_history] == [4, 8]
    assert isinstance(result.metrics["loss"], float)
    assert isinstance(result.metrics["eval_loss"], float)

    # The checkpoint holds Transformers' folder under "checkpoint", and it loads.
    assert result.checkpoint is not None
    assert os.listdir(result.checkpoint.path) == ["checkpoint"]
    folder = os.path.join(result.checkpoint.path, "checkpoint")
    assert {"config.json", "trainer_state.json"} <= set(os.listdir(folder))
    loaded = transformers.GPT2LMHeadModel.from_pretrained(folder)
    assert checksum(loaded) == ranks[0]["checksum"]

    # Batches from an iterable went in as they were: 4 steps, 4 batches, still in sync.
    assert [(r["batch_steps"], r["batches_given"]) for r in ranks] == [(4, 4), (4, 4)]
    assert ranks[0]["after_batches"] == ranks[1]["after_batches"] != ranks[0]["checksum"]


def test_exports_are_ray_train_transformers_names() -> None:
    import actorrt.train.huggingface.transformers as module

    assert set(module.__all__) == {"RayTrainReportCallback", "prepare_trainer"}
    for name in module.__all__:
        assert getattr(module, name).__module__ == module.__name__, name
    assert RayTrainReportCallback.CHECKPOINT_NAME == "checkpoint"


def test_prepare_trainer_rejects_what_is_not_a_trainer() -> None:
    with pytest.raises(TypeError, match="prepare_trainer takes a transformers.Trainer"):
        prepare_trainer(object())  # type: ignore[arg-type]


def test_without_transformers_the_import_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['transformers'] = None\n"
        "try:\n"
        "    import actorrt.train.huggingface.transformers\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "pip install 'actorrt[transformers]'" in out

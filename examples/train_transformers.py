"""A Ray Train V2 Hugging Face Transformers script, ported by changing its imports.

    python examples/train_transformers.py

The shape is Ray's "Get started with Hugging Face Transformers": a ``transformers.Trainer``
with ``RayTrainReportCallback`` added and passed through ``prepare_trainer``, run by a
``TorchTrainer`` on 2 workers; afterwards the model is loaded from the reported
checkpoint with ``from_pretrained``. The Ray script's imports were::

    import ray.train.huggingface.transformers
    from ray.train import ScalingConfig
    from ray.train.torch import TorchTrainer

To run offline in seconds, nothing is downloaded: the model is a one-layer BERT built
from a ``BertConfig``, and the data are token-id sequences whose label says which half of
the vocabulary they were drawn from (instead of Yelp reviews and ``bert-base-cased``).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing to fetch; never try
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np
import torch
import transformers

import actorrt.train.huggingface.transformers
from actorrt.train import RunConfig, ScalingConfig
from actorrt.train.torch import TorchTrainer

VOCAB, LENGTH = 100, 12


class HalfVocabulary(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    """Label 0: tokens from the lower half of the vocabulary; label 1: the upper half."""

    def __init__(self, size: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 2, (size,), generator=generator)
        low = torch.randint(1, VOCAB // 2, (size, LENGTH), generator=generator)
        self.ids = low + self.labels[:, None] * (VOCAB // 2 - 1)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def tiny_bert() -> transformers.BertForSequenceClassification:
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=LENGTH, num_labels=2,
    )
    return transformers.BertForSequenceClassification(config)


def compute_metrics(eval_pred: Any) -> dict[str, float]:
    logits, labels = eval_pred
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


def train_func(config: dict[str, Any]) -> None:
    """Runs on each Train worker."""
    torch.manual_seed(0)
    training_args = transformers.TrainingArguments(
        output_dir=config["output_dir"],
        per_device_train_batch_size=16,
        num_train_epochs=3,
        learning_rate=5e-3,
        eval_strategy="epoch",
        save_strategy="epoch",
        logging_strategy="epoch",
        report_to="none",
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(
        model=tiny_bert(),
        args=training_args,
        train_dataset=HalfVocabulary(512, seed=1),
        eval_dataset=HalfVocabulary(128, seed=2),
        compute_metrics=compute_metrics,
    )
    trainer.add_callback(actorrt.train.huggingface.transformers.RayTrainReportCallback())
    trainer = actorrt.train.huggingface.transformers.prepare_trainer(trainer)
    trainer.train()


def main() -> None:
    with tempfile.TemporaryDirectory() as storage:
        trainer = TorchTrainer(
            train_func,
            train_loop_config={"output_dir": os.path.join(storage, "hf_output")},
            scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
            run_config=RunConfig(storage_path=storage, name="transformers-tiny-bert"),
        )
        result = trainer.fit()
        if result.error is not None:
            raise result.error
        for metrics in result.metrics_history:
            print(f"epoch {metrics['epoch']:.0f}: step {metrics['step']}, "
                  f"loss {metrics['loss']:.3f}, eval_accuracy {metrics['eval_accuracy']:.3f}")

        # Load the trained model from the reported checkpoint, as Ray's guide does.
        assert result.checkpoint is not None
        with result.checkpoint.as_directory() as checkpoint_dir:
            checkpoint_path = os.path.join(
                checkpoint_dir,
                actorrt.train.huggingface.transformers.RayTrainReportCallback.CHECKPOINT_NAME,
            )
            print("checkpoint folder holds config.json:",
                  os.path.exists(os.path.join(checkpoint_path, "config.json")))
            model = transformers.BertForSequenceClassification.from_pretrained(checkpoint_path)
        data = HalfVocabulary(128, seed=2)
        with torch.no_grad():
            predicted = model(input_ids=data.ids).logits.argmax(-1)
        accuracy = (predicted == data.labels).float().mean().item()
        print(f"reloaded model: eval_accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()

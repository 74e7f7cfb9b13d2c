"""actorrt.train.huggingface: Hugging Face integrations (Ray's ``ray.train.huggingface``).

``actorrt.train.huggingface.transformers`` holds ``prepare_trainer`` and
``RayTrainReportCallback`` for ``transformers.Trainer``.
"""

__all__: list[str] = []

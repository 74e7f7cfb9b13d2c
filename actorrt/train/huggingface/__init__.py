"""actorrt.train.huggingface: Hugging Face integrations (Ray's ``ray.train.huggingface``).

``actorrt.train.huggingface.transformers`` holds ``prepare_trainer`` and
``RayTrainReportCallback`` for ``transformers.Trainer``.
"""

__all__: list[str] = []


def __getattr__(name: str) -> object:
    if name == "transformers":  # loads on first use, as an import of it would
        import importlib

        return importlib.import_module(f"{__name__}.transformers")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The ``transformers`` import, and the error when it is not installed."""

from __future__ import annotations

EXTRA_HINT = (
    "actorrt.train.huggingface.transformers needs Hugging Face Transformers, which is not "
    "installed: pip install 'actorrt[transformers]' (or pip install 'transformers>=4.40' "
    "'accelerate>=0.26')"
)

try:
    import transformers
except ModuleNotFoundError as exc:
    if exc.name != "transformers":
        raise  # transformers is there but one of its own dependencies is not
    raise ModuleNotFoundError(EXTRA_HINT, name="transformers") from None

__all__ = ["EXTRA_HINT", "transformers"]

"""Ray Train's PyTorch examples (``ray.train.examples.pytorch``)."""

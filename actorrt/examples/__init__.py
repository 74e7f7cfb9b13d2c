"""Runnable jobs that ship with the package (``python -m actorrt.examples.digits``)."""

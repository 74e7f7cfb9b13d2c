"""Ray Train's example modules that other Ray programs import (``ray.train.examples``)."""

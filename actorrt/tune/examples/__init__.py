"""Ray Tune's example modules that other Ray programs import (``ray.tune.examples``)."""

"""``python -m actorrt``: the ``actorrt`` command (see ``actorrt._cli._main``)."""

import sys

from ._cli._main import main

sys.exit(main())

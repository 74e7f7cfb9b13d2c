"""``python -m actorrt``: the ``actorrt`` command (see ``actorrt._cli``)."""

import sys

from ._cli import main

sys.exit(main())

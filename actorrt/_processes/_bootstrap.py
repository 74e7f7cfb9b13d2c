"""How a fresh actorrt interpreter starts: a worker process, or the fork server.

``python -P -c BOOTSTRAP <owner pid> <package parent> <module>``: before importing anything
the new interpreter asks the kernel to SIGKILL it when its parent goes
(``PR_SET_PDEATHSIG``, which needs no thread of it to run, so a process holding the GIL in a
C call or stopped by SIGSTOP dies too) and checks that its parent has not gone already; it
imports ``actorrt`` from the folder its owner imported it from (``-P``: never from a
same-named folder in the working directory), and runs ``<module>`` as ``__main__``.
"""

from __future__ import annotations

import os

# The folder holding this process's ``actorrt`` package: new interpreters import it from there.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Exit code of a worker that could not connect to its runtime (it says why on stderr).
START_FAILED = 3
# Exit code of a worker that ended because its connection to its runtime was lost (the
# owner died, or the connection broke): never a signal, which would read as a kill.
RUNTIME_LOST = 4

WORKER_MAIN = "actorrt._processes._worker_main"
FORKSERVER_MAIN = "actorrt._processes._forkserver_main"

BOOTSTRAP = """\
import sys
owner, package, module = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if sys.platform == "linux":
    import ctypes, os
    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != owner:
        os._exit(1)  # the owner died before the line above: nobody waits for this process
sys.path.insert(0, package)
import runpy
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def command(executable: str, owner_pid: int, module: str) -> list[str]:
    """The command line that starts ``module`` in a fresh interpreter, as above."""
    return [executable, "-P", "-c", BOOTSTRAP, str(owner_pid), PACKAGE_PARENT, module]

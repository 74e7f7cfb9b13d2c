"""Finding a worker's descendants by walking down ``/proc/<pid>/task/<tid>/children`` finds
what reading the whole process table finds: a plain child, one in a session of its own, a
double-forked daemon re-parented to the worker, a child of a thread other than the main
one and a grandchild; and everything is ended by ``end_descendants``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(60)

# Run as a worker is: a session leader (setsid) and the reaper of its orphans.
SESSION = textwrap.dedent(
    """
    import json, os, subprocess, sys, threading, time
    from actorrt._processes import _descendants as d

    os.setsid()
    assert d.become_subreaper()
    spare = subprocess.Popen(["sleep", "300"])  # as the worker's owner watcher is spared
    plain = subprocess.Popen(["sleep", "300"])
    session = subprocess.Popen(["sleep", "300"], start_new_session=True)
    nested = subprocess.Popen(["sh", "-c", "sleep 300 & wait"])
    daemon = subprocess.run(
        [sys.executable, "-c",
         "import os, sys, time\\n"
         "if os.fork(): os._exit(0)\\n"
         "os.setsid()\\n"
         "if os.fork(): os._exit(0)\\n"
         "print(os.getpid(), flush=True)\\n"
         "os.close(1)\\n"
         "time.sleep(300)\\n"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True,
    ).stdout.split()[0]
    from_thread = []
    t = threading.Thread(target=lambda: from_thread.append(subprocess.Popen(["sleep", "300"])))
    t.start()
    t.join()
    deadline = time.monotonic() + 20
    while True:  # until sh has started its sleep and the daemon's parents have exited
        walked = d._walked({spare.pid})
        if walked is not None and len(walked) >= 6 or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    whole = d._descendants({spare.pid}, whole_table=True)
    left = d.end_descendants({spare.pid})
    after = d._descendants({spare.pid}, whole_table=True)
    spare.kill()
    spare.wait()
    print(json.dumps({
        "walked": sorted(walked or []), "whole": sorted(whole),
        "expected": sorted([plain.pid, session.pid, nested.pid, int(daemon),
                            from_thread[0].pid]),
        "left": left, "after": sorted(after), "spare": spare.pid,
    }))
    """
)


def test_the_walk_finds_what_the_whole_process_table_shows() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SESSION], capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["walked"] == seen["whole"], seen
    assert set(seen["expected"]) <= set(seen["walked"]), seen
    # and sh's own sleep, a grandchild (and the daemon's exited middle process, a zombie
    # re-parented to this session's leader until it is reaped)
    assert len(seen["walked"]) > len(seen["expected"]), seen
    assert seen["spare"] not in seen["walked"]
    assert seen["left"] == [] and seen["after"] == [], seen

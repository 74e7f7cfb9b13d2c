"""A real Slurm on this machine for the cluster tests: Debian's ``slurm-wlm`` and ``munge``.

``slurm_cluster(folder, n)`` starts ``munged`` and ``slurmctld`` in the root namespace and one
``slurmd`` per host of a new test network (``netns.py``): each host is a Slurm node with its
own address and, in a UTS namespace of its own, its own host name (``n0``, ``n1``, ...), so a
batch script's ``hostname -I`` and ``srun -w NODE`` mean what they mean on a real cluster.
Everything lives in ``folder`` (the configuration, spool and state directories, the logs, the
munge socket) and the configuration is found through ``SLURM_CONF``, so nothing under /etc
is written and no other Slurm is touched. Each node offers ``cpus`` CPUs whatever the machine
has (``SlurmdParameters=config_overrides``) and no GPUs.

What the tests' network lacks is left out on purpose: processes are tracked by parentage
(``proctrack/linuxproc``) and not bound to CPUs (``task/none``); ``slurmd`` of this release
initialises its cgroup plugin all the same, so the root namespace's ``/sys/fs/cgroup`` is
bound into ``folder`` for it (``ip netns exec`` mounts a fresh ``/sys``, without cgroups).

``slurm_skip_reason()`` says why a real Slurm cannot run here (not root, no network
namespaces, the packages missing: ``make test`` installs them when run as root).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .netns import TestNetwork, make_network, netns_skip_reason

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "sinfo", "scontrol")
READY_WITHIN = 60.0


def slurm_skip_reason() -> str | None:
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} missing): `make test` installs "
                "it as root, or run `apt-get install slurm-wlm munge`")
    if not os.path.exists("/etc/munge/munge.key"):
        return "munge has no key (/etc/munge/munge.key): reinstall the munge package"
    return netns_skip_reason()


class SlurmCluster:
    """The running daemons of :func:`slurm_cluster` and how to reach them."""

    def __init__(self, folder: Path, net: TestNetwork, names: list[str]) -> None:
        self.folder = folder
        self.net = net
        self.names = names
        self.env = {"SLURM_CONF": str(folder / "slurm.conf")}
        self.daemons: list[subprocess.Popen[Any]] = []
        self.slurmd: dict[str, subprocess.Popen[Any]] = {}

    def run(
        self, argv: list[str], timeout: float = 30, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command (``sbatch``, ``squeue``, ...) against this cluster, in this
        process's environment or in ``env``."""
        env = {**kw.pop("env", os.environ), **self.env}
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout,
                              **kw)

    def logs(self) -> str:
        """The daemons' logs, for a failure's message."""
        parts = []
        for path in sorted(self.folder.glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts)

    def leftovers(self) -> dict[str, list[str]]:
        """What still runs on each node besides its ``slurmd``: ``{node: [command lines]}``."""
        left: dict[str, list[str]] = {}
        for name, host in zip(self.names, self.net.hosts, strict=True):
            daemon = self.slurmd[name].pid
            for pid in host.pids():
                line = _cmdline(pid)
                if pid == daemon or line.startswith(("unshare ", "slurmd ")) or not line:
                    continue
                left.setdefault(name, []).append(f"{pid}: {line}")
        return left

    def wait_idle(self) -> None:
        deadline = time.monotonic() + READY_WITHIN
        while time.monotonic() < deadline:
            done = self.run(["sinfo", "-h", "-N", "-o", "%N %T"])
            states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
            if done.returncode == 0 and all(states.get(n) == "idle" for n in self.names):
                return
            for proc in self.daemons:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args!r} exited {proc.returncode}\n{self.logs()}")
            time.sleep(0.2)
        raise RuntimeError(f"the Slurm nodes were not idle within {READY_WITHIN} s: "
                           f"{done.stdout or done.stderr}\n{self.logs()}")


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


def _config(folder: Path, net: TestNetwork, names: list[str], cpus: int) -> str:
    port = _free_port(net.root_ip)
    lines = [
        "ClusterName=actorrt-test",
        f"SlurmctldHost={socket.gethostname()}({net.root_ip})",
        f"SlurmctldPort={port}",
        "SlurmdPort=6818",  # each node has an address, so a port, of its own
        "SlurmUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={folder}/munge.sock",
        f"StateSaveLocation={folder}/state",
        f"SlurmdSpoolDir={folder}/spool/%n",
        f"SlurmctldPidFile={folder}/slurmctld.pid",
        f"SlurmdPidFile={folder}/slurmd-%n.pid",
        f"SlurmctldLogFile={folder}/slurmctld.log",
        f"SlurmdLogFile={folder}/slurmd-%n.log",
        "SlurmdParameters=config_overrides",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "MpiDefault=none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        "KillWait=10",
    ]
    for name, host in zip(names, net.hosts, strict=True):
        lines.append(f"NodeName={name} NodeAddr={host.ip} CPUs={cpus} State=UNKNOWN")
    lines.append(f"PartitionName=test Nodes={','.join(names)} Default=YES MaxTime=INFINITE "
                 "State=UP")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def slurm_cluster(folder: Path, n_nodes: int, cpus: int = 4) -> Iterator[SlurmCluster]:
    """Munge, a controller and ``n_nodes`` Slurm nodes of ``cpus`` CPUs; all stopped (and
    every process left on the nodes killed) afterwards. Skips the test, saying why, where
    Slurm cannot run here."""
    import pytest

    reason = slurm_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"n{i}" for i in range(n_nodes)]
    for sub in ("state", *(f"spool/{n}" for n in names)):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    cgroups = folder / "cgroup"
    cgroups.mkdir()
    net = make_network(n_nodes)
    cluster = SlurmCluster(folder, net, names)
    mounted = False
    try:
        subprocess.run(["mount", "--rbind", "/sys/fs/cgroup", str(cgroups)], check=True,
                       capture_output=True, timeout=30)
        mounted = True
        (folder / "slurm.conf").write_text(_config(folder, net, names, cpus))
        (folder / "cgroup.conf").write_text(
            f"CgroupPlugin=cgroup/v1\nCgroupMountpoint={cgroups}\n"
            "ConstrainCores=no\nConstrainRAMSpace=no\nConstrainDevices=no\n"
        )
        env = {**os.environ, **cluster.env}

        def daemon(argv: list[str], log: str) -> subprocess.Popen[Any]:
            with open(folder / log, "wb") as out:
                proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True)
            cluster.daemons.append(proc)
            return proc

        daemon(["munged", "--foreground", "--force", f"--socket={folder}/munge.sock",
                "--key-file=/etc/munge/munge.key", f"--pid-file={folder}/munged.pid",
                f"--log-file={folder}/munged.log", f"--seed-file={folder}/munged.seed"],
               "munged.out.log")
        daemon(["slurmctld", "-D", "-i"], "slurmctld.out.log")
        for name, host in zip(names, net.hosts, strict=True):
            with open(folder / f"slurmd-{name}.out.log", "wb") as out:
                proc = host.popen(
                    ["unshare", "--uts", "sh", "-c", f"hostname {name} && exec slurmd -D"],
                    env=cluster.env, stdout=out, stderr=subprocess.STDOUT,
                )
            cluster.slurmd[name] = proc
            cluster.daemons.append(proc)
        cluster.wait_idle()
        yield cluster
    finally:
        for proc in reversed(cluster.daemons):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(cluster.daemons):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        net.close()
        if mounted:
            subprocess.run(["umount", "-R", str(cgroups)], capture_output=True, timeout=30)

"""A single-node Slurm on localhost for the tests: Debian's slurm-wlm (slurmctld + slurmd) with munge, three GPUs
declared as gres, all state under one folder, started and stopped by the test.

The GPUs are /dev/tty10 to /dev/tty12 declared as gres: Slurm hands each task one of them and sets its
CUDA_VISIBLE_DEVICES, as it does for a real GPU; the tasks find no CUDA device behind it, so what runs there is
the CPU grade (builds and static checks). Needs root (slurmd runs the jobs as the submitting user, here root)
and, on a machine without Slurm, apt (the packages are about 12 MiB; installing them takes seconds).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
FAKE_GPUS = 3  # /dev/tty10, /dev/tty11, ...
NODE = "localhost"
START_TIMEOUT_S = 60.0


class Unavailable(Exception):
    """Slurm cannot be installed or started here (not root, no apt): the reason, in one line."""


@dataclass
class Cluster:
    conf: Path
    daemons: list[subprocess.Popen]

    @property
    def env(self) -> dict[str, str]:
        """The environment under which sbatch, squeue and sacct talk to this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def stop(self) -> None:
        for daemon in reversed(self.daemons):
            daemon.terminate()
        for daemon in self.daemons:
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()


def install() -> None:
    """apt-get installs slurm-wlm's daemons, its client and munge, unless they are there."""
    if all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise Unavailable("Slurm is not installed and cannot be: installing it needs root and apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise Unavailable(f"{' '.join(command[:2])} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")


def start(root: Path) -> Cluster:
    """Write a slurm.conf for one node with three GPUs under root, start munge (unless it runs), slurmctld and
    slurmd, and wait until the node takes jobs."""
    if os.geteuid() != 0:
        raise Unavailable("a single-node Slurm needs root here (slurmd runs jobs as their user)")
    install()
    daemons: list[subprocess.Popen] = []
    try:
        _start_munge(root, daemons)
        conf = _write_config(root)
        logs = root / "logs"
        logs.mkdir(exist_ok=True)
        env = {**os.environ, "SLURM_CONF": str(conf)}
        for command in (["slurmctld", "-D", "-i", "-f", str(conf)], ["slurmd", "-D", "-N", NODE, "-f", str(conf)]):
            log = open(logs / f"{command[0]}.out", "w")
            daemons.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL))
        cluster = Cluster(conf, daemons)
        _wait_for_idle_node(cluster, logs)
        return cluster
    except BaseException:
        Cluster(Path(), daemons).stop()
        raise


def _start_munge(root: Path, daemons: list[subprocess.Popen]) -> None:
    if subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
        return  # a munged already answers on its default socket
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        subprocess.run(["mungekey", "--create", "--keyfile", str(key)], check=True, capture_output=True)
        shutil.chown(key, "munge", "munge")
    for folder in ("/run/munge", "/var/log/munge", "/var/lib/munge"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.chown(folder, "munge", "munge")
    log = open(root / "munged.out", "w")
    daemons.append(subprocess.Popen(["munged", "--foreground"], user="munge", group="munge", stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
    deadline = time.monotonic() + START_TIMEOUT_S
    while subprocess.run(["munge", "-n"], capture_output=True).returncode != 0:
        if time.monotonic() > deadline or daemons[-1].poll() is not None:
            raise Unavailable(f"munged did not start: {(root / 'munged.out').read_text().strip()[-300:]}")
        time.sleep(0.2)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _write_config(root: Path) -> Path:
    state = root / "state"
    spool = root / "spool"
    for folder in (state, spool):
        folder.mkdir(parents=True, exist_ok=True)
    cpus = max(os.cpu_count() or 1, FAKE_GPUS)  # a task takes a CPU: as many as GPUs, so that GPUs bound the tasks
    (root / "gres.conf").write_text(f"AutoDetect=off\nNodeName={NODE} Name=gpu File=/dev/tty[10-{9 + FAKE_GPUS}]\n")
    conf = root / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=gradeclass",
        f"SlurmctldHost={NODE}(127.0.0.1)",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"StateSaveLocation={state}",
        f"SlurmdSpoolDir={spool}",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd.pid",
        f"SlurmctldLogFile={root}/slurmctld.log",
        f"SlurmdLogFile={root}/slurmd.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        "GresTypes=gpu",
        "MpiDefault=none",
        "SchedulerParameters=sched_interval=1",
        f"NodeName={NODE} NodeAddr=127.0.0.1 CPUs={cpus} Gres=gpu:{FAKE_GPUS} State=UNKNOWN",
        f"PartitionName=gpu Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
        "",
    ]))
    return conf


def _wait_for_idle_node(cluster: Cluster, logs: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(daemon.poll() is not None for daemon in cluster.daemons):
            break
        state = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=cluster.env, capture_output=True, text=True)
        if state.stdout.strip() == "idle":
            return
        time.sleep(0.5)
    outputs = " | ".join(f"{log.name}: {log.read_text().strip()[-300:]}" for log in sorted(logs.iterdir()))
    raise Unavailable(f"the single-node Slurm did not come up in {START_TIMEOUT_S:.0f} s ({outputs})")

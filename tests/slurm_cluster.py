"""A throwaway one-node Slurm cluster for the live tests: Debian's packages, private config, root.

`SlurmCluster` writes slurm.conf and gres.conf into a fresh directory, starts its own munged (own
key and socket), slurmctld and slurmd on free ports, and stops exactly those three processes by
pid. Nothing under /etc is touched, so a cluster that runs on the machine already is left alone:
client commands reach this one through `SLURM_CONF`, which `env()` sets.

The plugin's job step strips every SLURM_* variable, SLURM_CONF included, before its nested
`srun` (a real cluster's nodes find /etc/slurm/slurm.conf, or get the config from slurmd); so
`env()` also puts first in PATH a `srun` wrapper that sets SLURM_CONF and runs the real srun.

The node has one fake GPU (a gres whose device file is a symlink to /dev/null), so `--gpus=1`
jobs are scheduled and see CUDA_VISIBLE_DEVICES, and two partitions on that node: `cpu` (the
default) and `gpu`. `SlurmdParameters=config_overrides` lets the node declare at least
MIN_MEMORY_MB whatever the machine has (Slurm does not enforce memory here), so the workflow's
real requests (8 GB for an NPT job, twice that on a retry) fit on a small CI runner.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("munge", "slurm-client", "slurmctld", "slurmd")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "srun")
MIN_MEMORY_MB = 65536
ENABLE_VARS = ("CI", "TABREPRO_LIVE_SLURM")


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def skip_reason() -> str | None:
    """Why the live Slurm tests cannot run here, or None when they can."""
    if not any(_truthy(os.environ.get(var)) for var in ENABLE_VARS):
        return "live Slurm test not enabled: set TABREPRO_LIVE_SLURM=1 (CI sets CI=true)"
    if os.geteuid() != 0:
        return "live Slurm test needs root (it apt-installs Slurm and starts its daemons)"
    if not Path("/etc/debian_version").is_file() or shutil.which("apt-get") is None:
        return "live Slurm test needs Debian (apt-get, Debian's slurm packages)"
    return None


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


def ensure_installed(timeout: float = 300) -> float:
    """apt-get install the Slurm packages unless their programs are there; returns seconds spent."""
    if all(_which(name) for name in DAEMONS + CLIENTS):
        return 0.0
    started = time.monotonic()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=120", *PACKAGES]
    run = subprocess.run(install, env=env, capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0:  # stale package lists: refresh once and retry
        subprocess.run(
            ["apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=120"],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        run = subprocess.run(install, env=env, capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0:
        raise RuntimeError(f"apt-get install {' '.join(PACKAGES)} failed:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    missing = [name for name in DAEMONS + CLIENTS if not _which(name)]
    if missing:
        raise RuntimeError(f"installed {PACKAGES} but these programs are still missing: {missing}")
    return time.monotonic() - started


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


@dataclass
class Job:
    """One job as `scontrol show job -o` reports it (only the fields the tests use)."""

    fields: dict[str, str]

    @property
    def id(self) -> str:
        return self.fields["JobId"]

    @property
    def state(self) -> str:
        return self.fields.get("JobState", "")

    @property
    def comment(self) -> str:
        return self.fields.get("Comment", "")

    @property
    def rule(self) -> str:
        """The Snakemake rule, from the comment the plugin sets: rule_<name>_wildcards_<values>."""
        match = re.match(r"rule_(.+?)(?:_wildcards_.*)?$", self.comment)
        return match.group(1) if match else ""

    def get(self, key: str, default: str = "") -> str:
        return self.fields.get(key, default)


def _parse_show_job(line: str) -> dict[str, str]:
    # `scontrol show job -o`: Key=Value pairs separated by spaces; values may not contain '='
    # except Command/WorkDir paths, which never hold spaces in these tests.
    fields: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    return fields


class SlurmCluster:
    """One node, two partitions (cpu default, gpu), one fake GPU. Use as a context manager."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root or tempfile.mkdtemp(prefix="tabrepro-slurm-"))
        self._own_root = root is None
        self.conf = self.root / "etc" / "slurm.conf"
        self.node = ""
        self.processes: dict[str, subprocess.Popen] = {}
        self.start_seconds = 0.0

    # ------------------------------------------------------------------------------ lifecycle
    def __enter__(self) -> SlurmCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment whose Slurm commands (and the jobs they submit) talk to this cluster."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}"
        for var in list(env):  # a test run inside a Slurm job must not leak that job's settings
            if var.startswith(("SLURM_", "SBATCH_", "SRUN_")) and var != "SLURM_CONF":
                del env[var]
        return env

    def start(self, timeout: float = 60) -> None:
        started = time.monotonic()
        self.root.chmod(0o755)  # munged (user munge) must reach its own directory below
        for sub in ("bin", "etc", "log", "state", "spool", "run", "dev"):
            (self.root / sub).mkdir(exist_ok=True)
        srun = self.root / "bin" / "srun"
        srun.write_text(f'#!/bin/sh\nSLURM_CONF={self.conf}\nexport SLURM_CONF\nexec {_which("srun")} "$@"\n')
        srun.chmod(0o755)
        self._start_munge(timeout)
        self._write_config()
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._wait(lambda: "UP" in self._try(["scontrol", "ping"]), timeout, "slurmctld to answer")
        self._spawn("slurmd", [_which("slurmd"), "-D", "-f", str(self.conf), "-N", self.node])
        self._wait(
            lambda: self._try(["sinfo", "-h", "-N", "-p", "cpu", "-o", "%T"]).strip() == "idle",
            timeout,
            "the node to become idle",
        )
        self.start_seconds = time.monotonic() - started

    def stop(self) -> None:
        """Cancel this cluster's jobs, then stop the daemons it started (by pid), newest first."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            ids = self._try(["squeue", "-h", "-o", "%i", "-t", "PENDING,RUNNING,SUSPENDED,COMPLETING"]).split()
            if ids:
                self._try(["scancel", *ids])
                deadline = time.monotonic() + 20
                while (
                    time.monotonic() < deadline
                    and self._try(["squeue", "-h", "-o", "%i", "-t", "PENDING,RUNNING,SUSPENDED,COMPLETING"]).split()
                ):
                    time.sleep(0.5)
        for name in reversed(list(self.processes)):
            proc = self.processes.pop(name)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
            for handle in (proc.stdout, proc.stderr):
                if handle:
                    handle.close()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------------------ daemons
    def _spawn(self, name: str, argv: list, **kwargs) -> None:
        # In the foreground (-D, --foreground) the daemons log to stderr: one file per daemon.
        log = open(self.root / "log" / f"{name}.log", "wb")
        try:
            self.processes[name] = subprocess.Popen(
                [str(a) for a in argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env(),
                **kwargs,
            )
        finally:
            log.close()

    def _start_munge(self, timeout: float) -> None:
        munge = self.root / "munge"
        munge.mkdir(mode=0o700, exist_ok=True)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        sockets = self.root / "run" / "munge"  # clients need search permission on the socket's dir
        sockets.mkdir(mode=0o755, exist_ok=True)
        sockets.chmod(0o755)
        uid, gid = pwd.getpwnam("munge").pw_uid, grp.getgrnam("munge").gr_gid
        for path in (munge, key, sockets):
            os.chown(path, uid, gid)
        self.munge_socket = sockets / "munge.socket"
        self._spawn(
            "munged",
            [
                _which("munged"),
                "--foreground",
                "--key-file",
                key,
                "--socket",
                self.munge_socket,
                "--pid-file",
                munge / "munged.pid",
                "--log-file",
                munge / "munged.log",
                "--seed-file",
                munge / "munged.seed",
                "--num-threads",
                "2",
            ],
            user=uid,
            group=gid,
            extra_groups=[],
            cwd=munge,
        )
        self._wait(self.munge_socket.exists, timeout, "munged's socket")

    def _write_config(self) -> None:
        probe = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True, timeout=30, env=self.env())
        node_line = next(text for text in probe.stdout.splitlines() if text.startswith("NodeName="))
        fields = dict(token.split("=", 1) for token in node_line.split())
        self.node = fields.pop("NodeName")
        fields["RealMemory"] = str(max(int(fields.get("RealMemory", 0)), MIN_MEMORY_MB))
        hardware = " ".join(f"{k}={v}" for k, v in fields.items())
        host = socket.gethostname().split(".")[0]
        gpu = self.root / "dev" / "fakegpu0"
        if not gpu.is_symlink():
            gpu.symlink_to("/dev/null")  # a gres device must exist and must not be a regular file
        (self.root / "etc" / "gres.conf").write_text(f"NodeName={self.node} Name=gpu File={gpu}\n")
        r = self.root
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=tabrepro-test",
                    f"SlurmctldHost={host}(127.0.0.1)",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    # cred_expire: a requeued job may start again this many seconds after it stopped (120)
                    f"AuthInfo=socket={self.munge_socket},cred_expire=10",
                    f"StateSaveLocation={r / 'state'}",
                    f"SlurmdSpoolDir={r / 'spool'}",
                    f"SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}",
                    f"SlurmdPidFile={r / 'run' / 'slurmd.pid'}",
                    "SlurmctldDebug=info",
                    "SlurmdDebug=info",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/affinity",  # task/none breaks the plugin's `srun --cpu-bind=q`
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core_Memory",
                    "DefMemPerCPU=1000",
                    "EnforcePartLimits=ALL",  # an impossible request fails at sbatch instead of pending forever
                    "MinJobAge=600",  # finished jobs stay visible to squeue (the profile's status command)
                    "ReturnToService=2",
                    "SlurmdParameters=config_overrides",
                    "KillWait=5",
                    "MailProg=/bin/true",
                    "GresTypes=gpu",
                    "AccountingStorageType=accounting_storage/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "JobCompType=jobcomp/none",
                    f"NodeName={self.node} NodeAddr=127.0.0.1 {hardware} Gres=gpu:1 State=UNKNOWN",
                    "PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
                    "PartitionName=gpu Nodes=ALL MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )

    def _try(self, argv: list[str], timeout: float = 20) -> str:
        try:
            run = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env())
        except (subprocess.TimeoutExpired, OSError):
            return ""
        return run.stdout if run.returncode == 0 else ""

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{name} exited ({proc.returncode}) while waiting for {what}:\n" + self.diagnostics()
                    )
            if ready():
                return
            time.sleep(0.2)
        raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}:\n" + self.diagnostics())

    # ------------------------------------------------------------------------------ queries
    def jobs(self) -> list[Job]:
        """Every job slurmctld still knows (finished ones for MinJobAge), oldest first."""
        out = self._try(["scontrol", "show", "job", "-o"])
        jobs = [Job(_parse_show_job(line)) for line in out.splitlines() if line.startswith("JobId=")]
        return sorted(jobs, key=lambda job: int(job.id))

    def scancel(self, job_id: str) -> None:
        subprocess.run(["scancel", job_id], check=True, timeout=20, env=self.env())

    def diagnostics(self, lines: int = 40) -> str:
        """The tails of the daemons' logs, for assertion messages."""
        parts = []
        for path in sorted((self.root / "log").glob("*.log")):
            try:
                tail = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            parts.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(parts)

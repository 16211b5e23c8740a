"""A team of torchrun-launched worker processes for the attacker's distributed stages.

The pipeline process (the leader) stays one process. When a stage needs several GPUs it
hands the team a task, `function(world, **kwargs)` run on every rank:

    with Team(spec) as team:                         # the workers start at the first task
        team.run(train_on_rank, attacker=..., ...)   # returns when every rank has finished

torchrun starts `gpus_per_node` workers per node (`python -m pipeline.runtime.worker`); each
joins the process group (NCCL on CUDA, gloo on CPU) once, then runs the leader's tasks one
after another until the team closes. A task is the function itself and its keyword
arguments, pickled (the function by reference: a module-level function; the arguments as
they are, e.g. the attacker's typed settings); tasks and their outcome travel through a
TCPStore the leader hosts on `port + 1`, which, like torch.distributed's own store, only the
job's nodes must reach. On a multi-node job every other node runs
`serve_node(spec)` instead of the experiment: it starts that node's torchrun when the
leader starts the team and stops it when the leader closes it.

Never a hang: joining, every collective and the nodes' heartbeats time out after
`timeout_s`; the first failing rank's error comes back as a VpevalError naming the rank,
after every worker has been stopped.
"""
from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import torch
from torch.distributed import DistError, TCPStore

from pipeline.core.errors import VpevalError
from pipeline.core.schemas import Distributed, check_of, require
from pipeline.runtime.distributed import World

HEARTBEAT_S = 1.0        # node agents' heartbeat period
MAX_POLL_S = 0.5         # the leader's longest wait between checks
STOP_GRACE_S = 10.0      # longest wait for killed workers to be reaped
CLOSE_WAIT_S = 60.0      # a clean close waits this long for the workers to leave
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class TeamSpec:
    """Where the team's ranks run: `gpus_per_node` ranks on each of `nodes` nodes."""

    gpus_per_node: int
    nodes: int
    node_rank: int
    master_addr: str
    port: int            # torchrun's rendezvous; the leader's task store listens on port + 1
    device_type: str     # "cuda": one GPU per rank, NCCL; "cpu": CPU processes, gloo
    timeout_s: float

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes

    def torchrun_command(self) -> list[str]:
        """The torchrun command line that starts this node's workers."""
        return [sys.executable, "-m", "torch.distributed.run", f"--nnodes={self.nodes}",
                f"--nproc-per-node={self.gpus_per_node}", f"--node-rank={self.node_rank}",
                f"--master-addr={self.master_addr}", f"--master-port={self.port}", "--max-restarts=0",
                "--monitor-interval=0.5", f"--rdzv-conf=timeout={max(1, round(self.timeout_s))}",
                "-m", "pipeline.runtime.worker", f"--control={self.master_addr}:{self.port + 1}",
                f"--device-type={self.device_type}", f"--timeout={self.timeout_s}"]


def team_spec(distributed: Distributed, device: str) -> TeamSpec | None:
    """The team the typed `distributed` settings ask for, or None for a single process.

    Checks before any work that this node has the GPUs (and the Slurm job the nodes) asked
    for; fills the node rank, the leader's address and the port from Slurm when not given.
    """
    for key in ("gpus_per_node", "nodes"):
        require(check_of(Distributed, key), getattr(distributed, key), f"distributed.{key}")
    gpus, nodes = distributed.gpus_per_node, distributed.nodes
    if gpus == 1 and nodes == 1:
        return None
    device_type = _device_type(device, gpus)
    slurm = _slurm_job(nodes) if nodes > 1 else None
    node_rank = _pick(distributed, "node_rank", lambda: slurm and slurm.node, lambda: 0, nodes)
    master_addr = _pick(distributed, "master_addr", lambda: slurm and slurm.hostnames[0], lambda: "127.0.0.1", nodes)
    port = _pick(distributed, "port", lambda: slurm and _job_port(slurm.job_id), _free_port_pair, nodes)
    if not 0 <= int(node_rank) < nodes:
        raise VpevalError(f"distributed.node_rank={node_rank} is outside 0..{nodes - 1}")
    return TeamSpec(gpus, nodes, int(node_rank), str(master_addr), int(port), device_type,
                    float(distributed.timeout_s))


def run_on_ranks(team: "Team | None", device: str, function: Callable[..., None], **kwargs: Any) -> None:
    """`function(world, **kwargs)` on every rank of `team`, or here alone on `device` without one."""
    if team is None:
        function(World.single(device), **kwargs)
    else:
        team.run(function, **kwargs)


class Team:
    """The leader's side of a team (node 0). Use as a context manager; see the module doc."""

    def __init__(self, spec: TeamSpec):
        if spec.node_rank != 0:
            raise ValueError("the leader runs on node 0; other nodes call serve_node")
        self.spec = spec
        self.store: TCPStore | None = None
        self.process: subprocess.Popen | None = None
        self.tasks = 0
        self.failure: str | None = None

    def __enter__(self) -> "Team":
        self.store = TCPStore(self.spec.master_addr, self.spec.port + 1, is_master=True, wait_for_workers=False,
                              timeout=timedelta(seconds=self.spec.timeout_s))
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if self.failure is None:
            self._stop(clean=exc_type is None)
        self.store = None

    def run(self, function: Callable[..., None], **kwargs: Any) -> None:
        """Run `function(world, **kwargs)` on every rank; `function` must be a module-level function
        and kwargs picklable."""
        if self.failure is not None:
            raise VpevalError(f"the distributed team stopped earlier: {self.failure}")
        payload = pickle.dumps((function, kwargs))  # an unpicklable task fails here, before the team starts
        if self.process is None:
            self._start()
        self.tasks += 1
        task = self.tasks
        self.store.set(f"task/{task}", payload)
        self._wait_until(lambda: self.store.add(f"finished/{task}", 0) >= self.spec.world_size,
                         f"{function.__name__}", deadline=None)

    def _start(self) -> None:
        self.store.set("start", "1")
        self.process = subprocess.Popen(self.spec.torchrun_command(), env=_worker_env(), start_new_session=True)
        spec = self.spec
        self._wait_until(lambda: self.store.add("joined", 0) >= spec.world_size, "start",
                         deadline=time.monotonic() + spec.timeout_s)

    def _wait_until(self, done: Callable[[], bool], what: str, deadline: float | None) -> None:
        """Poll until `done()`, failing on a worker error, dead workers, a silent node or the deadline."""
        delay, beats = 0.02, _Heartbeats(self.spec)
        while not done():
            error = self._error()
            if error:
                self._fail(f"distributed {what} failed on {error}")
            if self.process.poll() is not None:
                time.sleep(0.5)  # a worker's error message may still be on its way
                error = self._error()
                self._fail(f"distributed {what}: the workers of node 0 exited with status {self.process.returncode}"
                           + (f"; first error on {error}" if error else " (see the log above)"))
            silent = beats.silent_node(self.store)
            if silent is not None:
                self._fail(f"distributed {what}: node {silent} sent no heartbeat for {self.spec.timeout_s:g} s")
            if deadline is not None and time.monotonic() > deadline:
                joined = self.store.add("joined", 0)
                self._fail(f"distributed {what}: only {joined} of {self.spec.world_size} ranks joined within "
                           f"{self.spec.timeout_s:g} s (distributed.timeout_s): a node or GPU is missing, or "
                           f"{self.spec.master_addr}:{self.spec.port} cannot be reached")
            time.sleep(delay)
            delay = min(2 * delay, MAX_POLL_S)

    def _error(self) -> str:
        return self.store.get("error").decode() if self.store.check(["error"]) else ""

    def _fail(self, message: str) -> None:
        self.failure = message
        self._stop(clean=False)
        raise VpevalError(message)

    def _stop(self, clean: bool) -> None:
        """Close the team: an exit task and a wait when `clean`, else stop every worker at once."""
        if self.process is not None and self.process.poll() is None:
            if clean:
                self.store.set(f"task/{self.tasks + 1}", pickle.dumps(None))
                _wait_for_exit(self.process, CLOSE_WAIT_S)
            _terminate(self.process)
        self.store.set("closed" if clean else "abort", "1")
        if clean and self.spec.nodes > 1:
            deadline = time.monotonic() + CLOSE_WAIT_S
            while self.store.add("left", 0) < self.spec.nodes - 1 and time.monotonic() < deadline:
                time.sleep(0.2)


def serve_node(spec: TeamSpec) -> None:
    """A follower node (node_rank > 0): start this node's workers when the leader starts the
    team, keep a heartbeat, stop them when it closes; raise if the leader or a worker fails."""
    if spec.node_rank == 0:
        raise ValueError("node 0 is the leader; it uses Team")
    where = f"{spec.master_addr}:{spec.port + 1}"
    try:
        store = TCPStore(spec.master_addr, spec.port + 1, is_master=False, timeout=timedelta(seconds=spec.timeout_s))
    except DistError as error:
        raise VpevalError(f"node {spec.node_rank}: cannot reach the leader at {where} within "
                          f"{spec.timeout_s:g} s ({str(error).splitlines()[0]})") from None
    process: subprocess.Popen | None = None
    try:
        while not store.check(["closed"]):
            store.add(f"beat/{spec.node_rank}", 1)
            if store.check(["abort"]):
                raise VpevalError(f"node {spec.node_rank}: the leader stopped the team (see its log)")
            if process is None and store.check(["start"]):
                process = subprocess.Popen(spec.torchrun_command(), env=_worker_env(), start_new_session=True)
            if process is not None and process.poll() not in (None, 0):
                message = f"node {spec.node_rank}: its workers exited with status {process.returncode}"
                store.compare_set("error", "", message)
                raise VpevalError(message)
            time.sleep(HEARTBEAT_S)
        store.add("left", 1)
        if process is not None:
            _wait_for_exit(process, CLOSE_WAIT_S)
    except DistError:
        raise VpevalError(f"node {spec.node_rank}: lost the leader at {where}") from None
    finally:
        if process is not None:
            _terminate(process)


class _Heartbeats:
    """Which follower node, if any, has not beaten for `timeout_s` (counted from now)."""

    def __init__(self, spec: TeamSpec):
        self.spec = spec
        now = time.monotonic()
        self.last = {node: (-1, now) for node in range(1, spec.nodes)}

    def silent_node(self, store: TCPStore) -> int | None:
        now = time.monotonic()
        for node, (count, since) in self.last.items():
            current = store.add(f"beat/{node}", 0)
            if current != count:
                self.last[node] = (current, now)
            elif now - since > self.spec.timeout_s:
                return node
        return None


def _device_type(device: str, gpus: int) -> str:
    """"cuda" when this node has `gpus` GPUs for the team, "cpu" for CPU processes; else a clear error."""
    if device == "cpu":
        return "cpu"
    if device not in ("auto", "cuda"):
        raise VpevalError(f"device={device!r} picks one GPU; a team uses GPUs 0..{gpus - 1} of each node: "
                          f"use device=cuda (or CUDA_VISIBLE_DEVICES)")
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if visible < gpus:
        raise VpevalError(f"distributed.gpus_per_node={gpus} but {socket.gethostname()} has {visible} visible GPU(s): "
                          f"fewer GPUs than requested (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}); "
                          f"lower distributed.gpus_per_node, or use device=cpu for CPU processes")
    return "cuda"


def _slurm_job(nodes: int):
    """The Slurm job this process runs in (submitit's view of it), checked against `nodes`; None outside Slurm."""
    if "SLURM_JOB_ID" not in os.environ:
        return None
    from submitit.slurm.slurm import SlurmJobEnvironment

    job = SlurmJobEnvironment()
    if job.num_nodes < nodes:
        raise VpevalError(f"distributed.nodes={nodes} but Slurm job {job.job_id} has {job.num_nodes} node(s): "
                          f"fewer nodes than requested")
    if job.num_tasks != job.num_nodes:
        raise VpevalError(f"Slurm job {job.job_id} runs {job.num_tasks} tasks on {job.num_nodes} nodes; a "
                          f"distributed experiment needs one vpeval task per node (hydra.launcher.tasks_per_node=1)")
    return job


def _pick(distributed: Distributed, key: str, from_slurm: Callable[[], Any], single_node: Callable[[], Any],
          nodes: int) -> Any:
    """distributed.<key> when set, else Slurm's value, else (one node only) the single-node default."""
    for value in (getattr(distributed, key), from_slurm(), single_node() if nodes == 1 else None):
        if value is not None:
            return value
    raise VpevalError(f"distributed.{key} must be set for a multi-node run outside Slurm")


def _job_port(job_id: str) -> int:
    """A port in 20000..59998 derived from the Slurm job id, the same on every node of the job."""
    return 20000 + 2 * (sum(ord(char) * 31 ** i for i, char in enumerate(str(job_id))) % 20000)


def _free_port_pair() -> int:
    """A port p with p and p + 1 free on this machine (p for torchrun, p + 1 for the task store)."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            if port >= 65535:
                continue
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
    raise VpevalError("found no two free consecutive ports; set distributed.port")


def _worker_env() -> dict[str, str]:
    """The environment of the workers: this one, with the vpeval package importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    return env


def _wait_for_exit(process: subprocess.Popen, seconds: float) -> None:
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass


def _terminate(process: subprocess.Popen) -> None:
    """SIGKILL torchrun's process group (torchrun, its workers and their loader processes); every
    file they write is written atomically, so nothing half-written is left behind."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _wait_for_exit(process, STOP_GRACE_S)

"""Checks of a Slurm sweep before anything is submitted (`vpeval -m hydra/launcher=slurm ...`).

- the launcher is installed (the `slurm` extra: hydra-submitit-launcher);
- the resources asked for fit the partition (`sinfo`): a job that no node can hold would pend
  forever while `vpeval -m` waits for it, so it is refused here with what the nodes have.
Without `sinfo` on this machine the resources are not checked (sbatch still refuses a bad gres).

Waiting on the sweep's jobs (`hydra_plugins/vpeval_launcher`, vpeval's Slurm launcher, uses
it): submitit learns that a job ended from `sacct`; on a cluster without accounting it
cannot (`Bypassing sacct error`), so a job cancelled with `scancel`, killed at its time limit
or lost with its node left `vpeval -m` waiting forever. `SweepWatch` waits on every job at
once: a job is over when submitit says so or when `squeue` has not listed it for two polls;
every `REPORT_SECONDS` one log line names the jobs still queued or running and how many are
left. A job that ended without a result comes back as a failed point with one line (the
aggregate lists it as "did not finish"), a failed job's traceback as its last line, and a
submission sbatch refuses as one line, so the sweep returns whatever its jobs did.
"""
from __future__ import annotations

import importlib.util
import logging
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable

from hydra.core.utils import JobReturn, JobStatus

from pipeline.app.sweep import sweep_variants
from pipeline.core.errors import VpevalError

log = logging.getLogger(__name__)
EXTRA = "pip install 'vpeval[slurm]' (hydra-submitit-launcher)"


@dataclass(frozen=True)
class Node:
    partition: str
    default: bool
    cpus: int
    memory_mb: int
    gpus: int


def wants_slurm(overrides: list[str]) -> bool:
    return any(re.fullmatch(r"hydra/launcher=(slurm|submitit_slurm)", o) for o in overrides)


def check_launcher_installed() -> None:
    if importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None:
        raise VpevalError(f"hydra/launcher=slurm: the Slurm launcher is not installed; {EXTRA}")


def parse_sinfo(text: str) -> list[Node]:
    """`sinfo -h -N -o '%P|%c|%m|%G'` lines -> nodes (a GRES like `gpu:h100:8(S:0-1)` gives 8 GPUs)."""
    nodes = []
    for line in text.splitlines():
        if line.count("|") != 3:
            continue
        partition, cpus, memory, gres = line.strip().split("|")
        gpus = sum(int(m.group(1)) for m in re.finditer(r"gpu(?::[^:,(]+)?:(\d+)", gres))
        nodes.append(Node(partition.rstrip("*"), partition.endswith("*"), int(cpus.rstrip("+")),
                          int(re.sub(r"\D.*", "", memory) or 0), gpus))
    return nodes


def resource_problems(launcher, nodes: list[Node]) -> list[str]:
    """What no node of the launcher's partition can give (empty when the job fits)."""
    partition = launcher.get("partition")
    pool = [n for n in nodes if (n.partition == partition if partition else n.default)]
    where = f"partition {partition}" if partition else "the default partition"
    if not pool:
        known = sorted({n.partition for n in nodes})
        return [f"hydra.launcher.partition={partition}: no such partition (sinfo lists {known})"]
    cpus = int(launcher.get("cpus_per_task") or 1) * int(launcher.get("tasks_per_node") or 1)
    memory_mb = float(launcher.get("mem_gb") or 0) * 1024
    gpus = int(launcher.get("gpus_per_node") or 0)
    fits = [n for n in pool if n.cpus >= cpus and n.memory_mb >= memory_mb and n.gpus >= gpus]
    problems = []
    if not fits:
        most = max(pool, key=lambda n: (n.gpus >= gpus, n.cpus, n.memory_mb))
        if most.cpus < cpus:
            problems.append(f"hydra.launcher.cpus_per_task={launcher.get('cpus_per_task')}: the nodes of {where} "
                            f"have at most {max(n.cpus for n in pool)} CPUs")
        if most.memory_mb < memory_mb:
            problems.append(f"hydra.launcher.mem_gb={launcher.get('mem_gb')}: the nodes of {where} have at most "
                            f"{max(n.memory_mb for n in pool) / 1024:.1f} GB")
        if most.gpus < gpus:
            problems.append(f"hydra.launcher.gpus_per_node={gpus}: the nodes of {where} have at most "
                            f"{max(n.gpus for n in pool)} GPUs (device=cpu asks for none)")
    nodes_wanted = int(launcher.get("nodes") or 1)
    if len(fits) < nodes_wanted and fits:
        problems.append(f"hydra.launcher.nodes={nodes_wanted}: only {len(fits)} node(s) of {where} can hold a task")
    return problems


def check_slurm_sweep(overrides: list[str]) -> None:
    """Refuse, in one line, a Slurm sweep that cannot be launched or could never start."""
    if not wants_slurm(overrides):
        return
    check_launcher_installed()
    for override in overrides:
        memory = re.fullmatch(r"\+*hydra\.launcher\.additional_parameters\.(mem|mem[-_]per[-_](?:cpu|gpu))=(.*)", override)
        if memory:
            raise VpevalError(f"{override.lstrip('+')}: sbatch already gets --mem from hydra.launcher.mem_gb, and "
                              "Slurm refuses two memory requests: set hydra.launcher.mem_gb (GB per node) instead")
    if shutil.which("sinfo") is None:
        return
    from hydra import compose, initialize_config_dir

    from pipeline.core.config_tree import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        variant = (sweep_variants([o for o in overrides if not o.startswith("-")]) or [[]])[0]
        launcher = compose(config_name="config", overrides=variant, return_hydra_config=True).hydra.launcher
    listing = subprocess.run(["sinfo", "-h", "-N", "-o", "%P|%c|%m|%G"], capture_output=True, text=True, check=False)
    if listing.returncode != 0:
        raise VpevalError(f"hydra/launcher=slurm: sinfo failed ({listing.stderr.strip() or listing.returncode}); "
                          "is Slurm reachable from here?")
    problems = resource_problems(launcher, parse_sinfo(listing.stdout))
    if problems:
        raise VpevalError("Slurm job could never start: " + "; ".join(problems))


POLL_SECONDS = 15.0
REPORT_SECONDS = 60.0


def queued_job_ids() -> set[str] | None:
    """Ids of the jobs Slurm still lists (array elements one by one), None without `squeue`."""
    if shutil.which("squeue") is None:
        return None
    listing = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True, check=False)
    return None if listing.returncode != 0 else {line.strip() for line in listing.stdout.splitlines() if line.strip()}


def last_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


class SweepWatch:
    """Waits for every job of a sweep (`wait`), then knows each one's outcome (`outcome`)."""

    def __init__(self, jobs: list, queue: Callable[[], set[str] | None] = queued_job_ids,
                 poll: float = POLL_SECONDS, report: float = REPORT_SECONDS, clock=time.monotonic, sleep=time.sleep):
        self.jobs, self.queue, self.poll, self.report, self.clock, self.sleep = jobs, queue, poll, report, clock, sleep
        self.vanished: set[str] = set()  # ended without submitit knowing (no result file)
        self.finished = False

    def wait(self) -> None:
        last_report, missing = None, set()  # missing: not listed by squeue at the last poll
        while not self.finished:
            pending = [job for job in self.jobs if str(job.job_id) not in self.vanished and not job.done()]
            queued = self.queue() if pending else None
            if queued is not None:  # gone twice in a row and still no result: it ended without one
                now_missing = {str(job.job_id) for job in pending if str(job.job_id) not in queued}
                self.vanished |= now_missing & missing
                missing = now_missing
                pending = [job for job in pending if str(job.job_id) not in self.vanished]
            if not pending:
                self.finished = True
                break
            now = self.clock()
            if last_report is None or now - last_report >= self.report:
                shown = ", ".join(str(job.job_id) for job in pending[:10]) + (" ..." if len(pending) > 10 else "")
                log.info("sweep: waiting for %d of %d Slurm job(s): %s", len(pending), len(self.jobs), shown)
                last_report = now
            self.sleep(self.poll)

    def outcome(self, job, overrides: list[str]) -> JobReturn:
        """The job's own JobReturn, or a failed one whose error is one line."""
        self.wait()
        if str(job.job_id) in self.vanished:
            error = VpevalError(f"Slurm job {job.job_id} ended without a result (cancelled, timed out, out of "
                                "memory or node lost); rerun the sweep to finish it from the cache")
        else:
            try:
                return job.results()[0]
            except Exception as failure:  # submitit's FailedJobError carries the job's whole log
                error = VpevalError(f"Slurm job {job.job_id} failed: {last_line(failure)}")
        log.error("sweep: %s", error)
        return JobReturn(overrides=overrides, status=JobStatus.FAILED, _return_value=error)


class WatchedJob:
    """A submitit job whose `results()` waits with the sweep's watch."""

    def __init__(self, job, watch: SweepWatch, overrides: list[str]):
        self.job, self.watch, self.overrides = job, watch, overrides

    def results(self) -> list[JobReturn]:
        return [self.watch.outcome(self.job, self.overrides)]


class WatchedExecutor:
    """submitit's executor, its jobs watched together and a refused submission one line."""

    def __init__(self, executor, queue: Callable[[], set[str] | None] = queued_job_ids):
        self.executor, self.queue = executor, queue

    def __getattr__(self, name: str) -> Any:
        return getattr(self.executor, name)

    def map_array(self, function, *job_params) -> list[WatchedJob]:
        try:
            jobs = self.executor.map_array(function, *job_params)
        except Exception as refused:  # sbatch's own complaint, e.g. a duplicated --mem
            raise VpevalError(f"hydra/launcher=slurm: Slurm refused the jobs: {last_line(refused)}") from None
        watch = SweepWatch(list(jobs), queue=self.queue)
        return [WatchedJob(job, watch, list(params[0])) for job, params in zip(jobs, zip(*job_params))]

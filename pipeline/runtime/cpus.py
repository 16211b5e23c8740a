"""How many CPUs this process may use, and torch's threads set to match.

torch (OpenMP) starts one thread per CPU of the affinity mask, whatever share of them the
process was given: a container's or a cluster job's cgroup quota (`cpu.max`), or a Slurm
allocation (`SLURM_CPUS_PER_TASK`) that does not bind the job to its cores. More threads than
CPUs, or threads sharing cores with other jobs, wait on each other in every parallel region
(docs/performance.md, "Threads"). The process's worker pools (decoding, audio conversion) and
the McAdams kernels' threads (as many as torch's, `anonymizers.mcadams`) follow the same count,
and so do the thread pools of per-file work (`file_threads`: at most 16);
numba runs no parallel kernel of its own (`nogil` kernels in Python threads), so it needs no
setting. A thread count the user set (`OMP_NUM_THREADS`) wins.

>>> usable_cpus({"SLURM_CPUS_PER_TASK": "1"})[0]
1
"""
from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Mapping

CGROUP = Path("/sys/fs/cgroup")
MAX_FILE_THREADS = 16  # a speech screen of a 35-s utterance peaks at 66 MiB: at most about 1 GiB at once


def cgroup_quota(root: Path = CGROUP, membership: Path = Path("/proc/self/cgroup")) -> float | None:
    """CPUs of this process's cgroup quota (v2 `cpu.max`, or v1 `cpu.cfs_quota_us` over
    `cpu.cfs_period_us`), None without one.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "cpu.max").write_text("150000 100000\\n")
    >>> cgroup_quota(root, root / "none")
    1.5
    """
    try:
        own = next((line.split(":", 2)[2].strip() for line in membership.read_text().splitlines()
                    if line.startswith("0::")), "/")
    except OSError:
        own = "/"
    for folder in (root / own.lstrip("/"), root):
        try:
            quota, period = (folder / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        except (OSError, ValueError):
            pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def usable_cpus(environ: Mapping[str, str] = os.environ) -> tuple[int, str]:
    """(CPUs this process may use, why): the least of its affinity mask, its cgroup quota
    (rounded up) and `SLURM_CPUS_PER_TASK`."""
    limits = {"affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1}
    quota = cgroup_quota()
    if quota is not None:
        limits["cgroup quota"] = max(1, math.ceil(quota))
    slurm = environ.get("SLURM_CPUS_PER_TASK", "")
    if slurm.isdigit() and int(slurm) > 0:
        limits["SLURM_CPUS_PER_TASK"] = int(slurm)
    reason = min(limits, key=lambda name: limits[name])
    return limits[reason], f"{reason} {limits[reason]}"


def use_usable_cpus(logger: logging.Logger, environ: Mapping[str, str] = os.environ) -> int:
    """Set torch's intra-op threads to the usable CPUs, unless `OMP_NUM_THREADS` is set (torch
    took it at start: the user's choice stands); log one line saying how many and why."""
    import torch

    cpus, why = usable_cpus(environ)
    given = environ.get("OMP_NUM_THREADS")
    if given:
        logger.info("cpus: %d usable (%s); torch threads %d, as OMP_NUM_THREADS=%s asks", cpus, why,
                    torch.get_num_threads(), given)
        return torch.get_num_threads()
    torch.set_num_threads(cpus)
    logger.info("cpus: %d usable (%s); torch threads and worker pools %d (OMP_NUM_THREADS=N overrides)", cpus, why,
                cpus)
    return cpus


def file_threads() -> int:
    """Threads for per-file work that releases the GIL (decoding, FLAC encoding, numpy's FFTs):
    torch's intra-op thread count (the usable CPUs, or OMP_NUM_THREADS), at most MAX_FILE_THREADS."""
    import torch

    return max(1, min(torch.get_num_threads(), MAX_FILE_THREADS))

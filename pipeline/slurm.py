"""Checks of a Slurm sweep before anything is submitted (`vpeval -m hydra/launcher=slurm ...`).

- the launcher is installed (the `slurm` extra: hydra-submitit-launcher);
- the resources asked for fit the partition (`sinfo`): a job that no node can hold would pend
  forever while `vpeval -m` waits for it, so it is refused here with what the nodes have.
Without `sinfo` on this machine the resources are not checked (sbatch still refuses a bad gres).
"""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from dataclasses import dataclass

from pipeline.errors import VpevalError
from pipeline.sweep import sweep_variants

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
    if shutil.which("sinfo") is None:
        return
    from hydra import compose, initialize_config_dir

    from pipeline.config_tree import CONFIG_DIR

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

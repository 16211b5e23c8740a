"""pipeline.app.slurm: a Slurm sweep refused before submission when it cannot launch or never start."""
import os
import stat

import pytest
from omegaconf import OmegaConf

from pipeline.app import cli, slurm
from pipeline.core.errors import VpevalError

SINFO = """cpu*|4|7900|(null)
cpu*|8|15800|(null)
gpu|32|257000|gpu:h100:4(S:0-1)
gpu|32|257000|gpu:h100:4(S:0-1)
"""


def launcher(**keys):
    base = {"partition": None, "cpus_per_task": 16, "tasks_per_node": 1, "mem_gb": 128, "gpus_per_node": None,
            "nodes": 1}
    return OmegaConf.create({**base, **keys})


def test_sinfo_lines_become_nodes():
    nodes = slurm.parse_sinfo(SINFO)
    assert nodes[0] == slurm.Node("cpu", True, 4, 7900, 0)
    assert nodes[2] == slurm.Node("gpu", False, 32, 257000, 4)


@pytest.mark.parametrize("keys, expected", [
    ({"cpus_per_task": 4, "mem_gb": 8}, []),
    ({}, ["hydra.launcher.cpus_per_task=16: the nodes of the default partition have at most 8 CPUs",
          "hydra.launcher.mem_gb=128: the nodes of the default partition have at most 15.4 GB"]),
    ({"partition": "gpu", "gpus_per_node": 8}, ["hydra.launcher.gpus_per_node=8: the nodes of partition gpu have "
                                                "at most 4 GPUs (device=cpu asks for none)"]),
    ({"partition": "cpu", "cpus_per_task": 2, "mem_gb": 1, "gpus_per_node": 1},
     ["hydra.launcher.gpus_per_node=1: the nodes of partition cpu have at most 0 GPUs (device=cpu asks for none)"]),
    ({"partition": "gpu", "gpus_per_node": 4, "nodes": 3}, ["hydra.launcher.nodes=3: only 2 node(s) of partition gpu "
                                                            "can hold a task"]),
    ({"partition": "h200"}, ["hydra.launcher.partition=h200: no such partition (sinfo lists ['cpu', 'gpu'])"]),
])
def test_resources_the_partition_cannot_give_are_named(keys, expected):
    assert slurm.resource_problems(launcher(**keys), slurm.parse_sinfo(SINFO)) == expected


def fake_sinfo(folder, monkeypatch):
    script = folder / "sinfo"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{SINFO}EOF\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_cli_refuses_a_sweep_that_could_never_start(tmp_path, monkeypatch, capsys):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    fake_sinfo(tmp_path, monkeypatch)
    with pytest.raises(SystemExit):
        cli.check_overrides(["-m", "hydra/launcher=slurm", "device=cpu", "seed=1,2"])
    err = capsys.readouterr().err
    assert err.startswith("vpeval: error: Slurm job could never start: hydra.launcher.cpus_per_task=16")
    cli.check_overrides(["-m", "hydra/launcher=slurm", "device=cpu", "hydra.launcher.cpus_per_task=4",
                         "hydra.launcher.mem_gb=7", "seed=1,2"])  # fits a cpu node: no GPU asked for


def test_missing_slurm_extra_is_named(monkeypatch):
    real = slurm.importlib.util.find_spec
    monkeypatch.setattr(slurm.importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("hydra_plugins") else real(name, *a))
    with pytest.raises(VpevalError, match=r"pip install 'vpeval\[slurm\]'"):
        slurm.check_slurm_sweep(["-m", "hydra/launcher=slurm", "seed=1,2"])


class FakeJob:
    """A submitit job: done after `done_after` polls (never: None); `fails` makes its results raise."""

    def __init__(self, job_id, done_after=0, fails=None):
        self.job_id, self.done_after, self.fails, self.polls = job_id, done_after, fails, 0

    def done(self):
        self.polls += 1
        return self.done_after is not None and self.polls > self.done_after

    def results(self):
        if self.fails:
            raise self.fails
        from hydra.core.utils import JobReturn, JobStatus

        return [JobReturn(overrides=[f"job={self.job_id}"], status=JobStatus.COMPLETED, _return_value="ok")]


def test_a_sweep_whose_job_was_cancelled_without_sacct_returns(caplog):
    """Regression (issue 27): after `scancel` of one point on a Slurm without accounting,
    `vpeval -m` waited forever; while waiting it never said for which jobs."""
    import logging

    from submitit.core.utils import FailedJobError

    from pipeline.app.slurm import SweepWatch, WatchedJob

    caplog.set_level(logging.INFO, logger="pipeline.app.slurm")
    cancelled = FakeJob("42_1", done_after=None)  # no result, ever; squeue stops listing it
    finished = FakeJob("42_0", done_after=2)
    crashed = FakeJob("42_2", done_after=0, fails=FailedJobError("Traceback ...\n  File x\nMemoryError: out of memory"))
    queue = iter([{"42_0", "42_1"}, {"42_0"}, {"42_0"}, set(), set()])
    slept = []
    watch = SweepWatch([finished, cancelled, crashed], queue=lambda: next(queue), sleep=slept.append,
                       clock=lambda: 60.0 * len(slept))
    results = [WatchedJob(job, watch, [f"seed={k}"]).results()[0] for k, job in enumerate((finished, cancelled, crashed))]
    assert results[0].return_value == "ok"
    assert results[1].status.name == "FAILED" and "Slurm job 42_1 ended without a result" in str(results[1]._return_value)
    assert str(results[2]._return_value) == "Slurm job 42_2 failed: MemoryError: out of memory"
    waiting = [r.getMessage() for r in caplog.records if "waiting for" in r.getMessage()]
    assert waiting[0] == "sweep: waiting for 2 of 3 Slurm job(s): 42_0, 42_1" and len(slept) >= 2


def test_slurm_refusals_are_one_line(monkeypatch):
    from pipeline.app.slurm import WatchedExecutor, check_slurm_sweep
    from pipeline.core.errors import VpevalError

    monkeypatch.setattr("pipeline.app.slurm.check_launcher_installed", lambda: None)
    with pytest.raises(VpevalError, match=r"^hydra.launcher.additional_parameters.mem=30G: sbatch already gets --mem"):
        check_slurm_sweep(["-m", "hydra/launcher=slurm", "+hydra.launcher.additional_parameters.mem=30G"])

    class Refusing:
        def map_array(self, *args):
            raise RuntimeError("sbatch: error: line 1\nsbatch: error: Batch job submission failed: Memory required")

    with pytest.raises(VpevalError, match=r"Slurm refused the jobs: sbatch: error: Batch job submission failed"):
        WatchedExecutor(Refusing()).map_array(print, [["seed=1"]])

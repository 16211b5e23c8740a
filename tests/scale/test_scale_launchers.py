"""Hydra launchers: the Slurm config (composed and handed to submitit, never submitted) and a
real sweep through submitit's local executor, one job per sweep point."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.utils import JobReturn, JobStatus

from pipeline.core.config import CONFIG_DIR

submitit = pytest.importorskip("submitit")


def launcher_config(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True).hydra.launcher


def test_slurm_launcher_takes_its_resources_from_the_distributed_settings():
    launcher = launcher_config(["hydra/launcher=slurm", "distributed.gpus_per_node=8", "distributed.nodes=2",
                                "hydra.launcher.partition=h200", "hydra.launcher.timeout_min=30"])
    assert launcher._target_ == "hydra_plugins.vpeval_launcher.VpevalSlurmLauncher"  # submitit's, watched
    assert (launcher.gpus_per_node, launcher.nodes, launcher.tasks_per_node) == (8, 2, 1)
    assert (launcher.partition, launcher.timeout_min, launcher.max_num_timeout) == ("h200", 30, 3)
    assert launcher.cpus_per_task > 0 and launcher.mem_gb > 0
    default = launcher_config(["hydra/launcher=slurm"])
    assert (default.gpus_per_node, default.nodes) == (1, 1)


class RecordingExecutor:
    """Stands in for submitit.AutoExecutor: records what the launcher asks for, submits nothing."""

    created: list["RecordingExecutor"] = []

    def __init__(self, folder, cluster, **init_params):
        self.folder, self.cluster, self.init_params, self.params, self.jobs = folder, cluster, init_params, {}, []
        RecordingExecutor.created.append(self)

    def update_parameters(self, **params):
        self.params.update(params)

    def map_array(self, function, *job_params):
        self.jobs = list(zip(*job_params))
        return [_FinishedJob(overrides, f"7_{i}") for i, (overrides, *_) in enumerate(self.jobs)]


class _FinishedJob:
    def __init__(self, overrides, job_id):
        self.overrides, self.job_id = overrides, job_id

    def done(self):
        return True

    def results(self):
        return [JobReturn(overrides=self.overrides, status=JobStatus.COMPLETED, _return_value=None)]


def test_a_slurm_sweep_asks_submitit_for_one_job_per_point(monkeypatch, tmp_path):
    from submitit.slurm.slurm import SlurmExecutor

    from pipeline.app.cli import main

    real_executor = submitit.AutoExecutor
    which = shutil.which  # the partition check (sinfo) has its own tests: here as on a machine without Slurm
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None if name == "sinfo" else which(name, *args, **kwargs))
    RecordingExecutor.created.clear()
    monkeypatch.setattr(submitit, "AutoExecutor", RecordingExecutor)
    main(["-m", "hydra/launcher=slurm", "hydra.launcher.partition=gpu", "distributed.gpus_per_node=4",
          "distributed.nodes=2", "seed=1,2,3", f"paths.data={tmp_path}", f"hydra.sweep.dir={tmp_path}/sweep"])
    (executor,) = RecordingExecutor.created
    assert executor.cluster == "slurm" and executor.init_params == {"slurm_max_num_timeout": 3}
    assert [[o for o in overrides if o.startswith("seed=")] for overrides, *_ in executor.jobs] == [
        ["seed=1"], ["seed=2"], ["seed=3"]]
    params = executor.params
    assert (params["gpus_per_node"], params["nodes"], params["tasks_per_node"]) == (4, 2, 1)
    assert (params["slurm_partition"], params["timeout_min"], params["mem_gb"]) == ("gpu", 240, 128)

    # submitit's own Slurm executor accepts every parameter and writes the expected sbatch lines
    monkeypatch.setattr(SlurmExecutor, "affinity", classmethod(lambda cls: 1))
    slurm = real_executor(folder=tmp_path / "submitit", cluster="slurm", **executor.init_params)
    slurm.update_parameters(**params)
    sbatch = slurm._executor._make_submission_file_text("python -m pipeline", "job")
    for line in ("--gpus-per-node=4", "--nodes=2", "--ntasks-per-node=1", "--partition=gpu", "--time=240",
                 "--mem=128GB", "--cpus-per-task=16"):
        assert f"#SBATCH {line}" in sbatch, line


FAKE_TASK = '''
import json, os
from pathlib import Path
import hydra
from pipeline.core.config import CONFIG_DIR

@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def app(cfg):
    import submitit
    job = submitit.JobEnvironment()
    out = Path(cfg.paths.data) / f"point-{cfg.seed}.json"
    out.write_text(json.dumps({"seed": cfg.seed, "job": job.job_id, "pid": os.getpid(),
                               "gpus": cfg.distributed.gpus_per_node}))

app()
'''


@pytest.mark.slow  # two real submitit jobs: ~10-20 s on 2 cores
def test_a_local_submitit_sweep_runs_one_job_per_point(tmp_path):
    script = tmp_path / "fake_task.py"
    script.write_text(FAKE_TASK)
    result = subprocess.run([sys.executable, str(script), "-m", "hydra/launcher=submitit_local", "seed=1,2",
                             "hydra.launcher.timeout_min=5", f"paths.data={tmp_path}",
                             f"hydra.sweep.dir={tmp_path}/sweep"],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(CONFIG_DIR.parent)})
    assert result.returncode == 0, result.stderr[-2000:]
    points = [json.loads((tmp_path / f"point-{seed}.json").read_text()) for seed in (1, 2)]
    assert [point["seed"] for point in points] == [1, 2]
    assert len({point["job"] for point in points}) == len({point["pid"] for point in points}) == 2
    assert len(list((tmp_path / "sweep" / ".submitit").iterdir())) >= 2  # one submitit job folder per point

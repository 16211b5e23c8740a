"""Threads follow the CPUs the process may use (pipeline.runtime.cpus, issue 38)."""
import logging
import os

import pytest
import torch

from pipeline.runtime import cpus


@pytest.fixture
def torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_cgroup_quota_v2_v1_and_none(tmp_path):
    v2 = tmp_path / "v2"
    (v2 / "job").mkdir(parents=True)
    (v2 / "job" / "cpu.max").write_text("250000 100000\n")
    (tmp_path / "self").write_text("0::/job\n")
    assert cpus.cgroup_quota(v2, tmp_path / "self") == 2.5
    (v2 / "job" / "cpu.max").write_text("max 100000\n")
    assert cpus.cgroup_quota(v2, tmp_path / "self") is None
    v1 = tmp_path / "v1" / "cpu"
    v1.mkdir(parents=True)
    (v1 / "cpu.cfs_quota_us").write_text("100000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert cpus.cgroup_quota(v1.parent, tmp_path / "none") == 1.0
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpus.cgroup_quota(v1.parent, tmp_path / "none") is None


def test_the_least_limit_wins_and_is_named(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(cpus, "cgroup_quota", lambda: 2.5)
    assert cpus.usable_cpus({}) == (3, "cgroup quota 3")
    assert cpus.usable_cpus({"SLURM_CPUS_PER_TASK": "2"}) == (2, "SLURM_CPUS_PER_TASK 2")
    monkeypatch.setattr(cpus, "cgroup_quota", lambda: None)
    assert cpus.usable_cpus({"SLURM_CPUS_PER_TASK": ""}) == (4, "affinity 4")


def test_torch_threads_follow_unless_the_user_set_them(monkeypatch, caplog, torch_threads):
    """Regression (issue 38): torch took every core of the node whatever the job's share."""
    monkeypatch.setattr(cpus, "usable_cpus", lambda environ: (1, "SLURM_CPUS_PER_TASK 1"))
    log = logging.getLogger("test.cpus")
    with caplog.at_level(logging.INFO, logger=log.name):
        torch.set_num_threads(2)
        assert cpus.use_usable_cpus(log, {}) == 1 and torch.get_num_threads() == 1
        torch.set_num_threads(2)
        assert cpus.use_usable_cpus(log, {"OMP_NUM_THREADS": "2"}) == 2 and torch.get_num_threads() == 2
    first, second = [r.getMessage() for r in caplog.records]
    assert first.startswith("cpus: 1 usable (SLURM_CPUS_PER_TASK 1); torch threads and worker pools 1")
    assert "as OMP_NUM_THREADS=2 asks" in second


@pytest.mark.parametrize("torch_threads, expected", [(1, 1), (8, 8), (64, cpus.MAX_FILE_THREADS)])
def test_file_threads_follow_torch_up_to_the_cap(monkeypatch, torch_threads, expected):
    monkeypatch.setattr(torch, "get_num_threads", lambda: torch_threads)
    assert cpus.file_threads() == expected

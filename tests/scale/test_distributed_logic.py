"""torch.distributed logic that needs no worker process: the single-process world, each rank's
rows of a global batch, global batch norm without a process group, and the team settings (GPUs,
nodes, Slurm) checked before any worker starts."""
from dataclasses import replace

import pytest
import torch
from torch import nn

from pipeline.asv.crops import CropBatches, CropPlan
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import Distributed
from pipeline.runtime.distributed import GlobalBatchNorm1d, World, use_global_batchnorm
from pipeline.runtime.team import _job_port, team_spec

pytestmark = pytest.mark.usefixtures("single_thread")


def test_single_world_collectives_are_identities():
    world = World.single("cpu")
    tensor = torch.tensor([1.0, 2.0])
    assert world.sum(tensor) is tensor and tensor.tolist() == [1.0, 2.0]
    assert world.broadcast(0.5) == 0.5 and world.rows(6) == slice(0, 6) and world.is_main
    with world.main_first():
        pass


def test_ranks_take_disjoint_rows_of_the_same_global_batch(corpus, tmp_path):
    from pipeline.asv.audio_cache import build_audio_cache

    cache = build_audio_cache(corpus[0], tmp_path / "cache", workers=2, progress=False)
    plan = CropPlan(cache.lengths, 8000, 8, seed=3)
    whole = CropBatches(cache.folder, cache.offsets, cache.labels, plan, epoch=1)[2]
    shards = [CropBatches(cache.folder, cache.offsets, cache.labels, plan, epoch=1,
                          rows=World(rank, 4, torch.device("cpu")).rows(8))[2] for rank in range(4)]
    assert all(crops.shape == (2, 8000) for crops, _ in shards)
    torch.testing.assert_close(torch.cat([crops for crops, _ in shards]), whole[0], rtol=0, atol=0)
    torch.testing.assert_close(torch.cat([labels for _, labels in shards]), whole[1], rtol=0, atol=0)
    with pytest.raises(VpevalError, match="batch of 8 crops cannot be split evenly over 3 ranks"):
        World(0, 3, torch.device("cpu")).rows(8)


def test_global_batchnorm_without_a_process_group_is_batchnorm():
    torch.manual_seed(1)
    plain, converted = nn.BatchNorm1d(4), use_global_batchnorm(nn.Sequential(nn.BatchNorm1d(4)))[0]
    assert isinstance(converted, GlobalBatchNorm1d)
    x = torch.randn(5, 4, 7)
    torch.testing.assert_close(converted(x), plain(x))
    torch.testing.assert_close(converted.running_var, plain.running_var)


def team(**given) -> Distributed:
    """`distributed` settings as the experiment types them: `given` over a single-node default."""
    return Distributed(**{"node_rank": None, "master_addr": None, "port": None, "timeout_s": 5, **given})


def test_one_gpu_and_one_node_need_no_team():
    assert team_spec(team(gpus_per_node=1, nodes=1), "auto") is None


@pytest.mark.parametrize("settings, line", [
    ({"gpus_per_node": 0, "nodes": 1}, "distributed.gpus_per_node=0: must be an integer >= 1"),
    ({"gpus_per_node": 2, "nodes": 1.5}, "distributed.nodes=1.5: must be an integer >= 1"),
])
def test_an_api_callers_team_is_checked_by_the_settings_rule(settings, line):
    """The guard is the `distributed` schema's own check (one home per rule): a fractional node
    count is refused, where `int()` once made it one node."""
    with pytest.raises(VpevalError) as raised:
        team_spec(team(**settings), "cpu")
    assert str(raised.value) == line


def test_fewer_gpus_than_requested_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    settings = team(gpus_per_node=4, nodes=1)
    for device in ("auto", "cuda"):
        with pytest.raises(VpevalError, match=r"gpus_per_node=4 but .* has 2 visible GPU\(s\): fewer GPUs than requested"):
            team_spec(settings, device)
    assert team_spec(replace(settings, gpus_per_node=2), "cuda").device_type == "cuda"
    with pytest.raises(VpevalError, match="device='cuda:1' picks one GPU"):
        team_spec(replace(settings, gpus_per_node=2), "cuda:1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(VpevalError, match="has 0 visible GPU"):
        team_spec(replace(settings, gpus_per_node=2), "auto")
    assert team_spec(replace(settings, gpus_per_node=2), "cpu").device_type == "cpu"


def test_multi_node_settings_come_from_slurm_or_must_be_given(monkeypatch):
    settings = team(gpus_per_node=2, nodes=2)
    for key in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(VpevalError, match="distributed.node_rank must be set for a multi-node run outside Slurm"):
        team_spec(settings, "cpu")
    given = team_spec(replace(settings, node_rank=1, master_addr="head", port=29400), "cpu")
    assert (given.node_rank, given.master_addr, given.port, given.world_size) == (1, "head", 29400, 4)
    monkeypatch.setenv("SLURM_JOB_ID", "123456")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[07-08]")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_NODEID", "1")
    slurm = team_spec(settings, "cpu")
    assert (slurm.node_rank, slurm.master_addr, slurm.port) == (1, "gpu07", _job_port("123456"))
    assert 20000 <= slurm.port <= 59998 and slurm.port == _job_port("123456")
    monkeypatch.setenv("SLURM_NTASKS", "8")
    with pytest.raises(VpevalError, match="needs one vpeval task per node"):
        team_spec(settings, "cpu")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")
    with pytest.raises(VpevalError, match="nodes=2 but Slurm job 123456 has 1 node.*fewer nodes than requested"):
        team_spec(settings, "cpu")


@pytest.mark.gpu
def test_a_team_asking_for_more_gpus_than_visible_fails_before_any_work():
    with pytest.raises(VpevalError, match="fewer GPUs than requested"):
        team_spec(team(gpus_per_node=torch.cuda.device_count() + 1, nodes=1), "cuda")

"""torch.distributed on CPU (gloo): teams of torchrun workers, DDP training, sharded extraction.

Training and extraction on 2 and on 4 ranks (4: `slow`, about a minute on 2 cores) are
compared with one process; the other team tests use the shared 2-rank team.

The functions named `*_task` run inside team workers (`function(world, **kwargs)` on every
rank); the workers import this module, so the tests put its folder on PYTHONPATH.

Tolerance of "N ranks = 1 process": the global batch is the same, but gradient sums and
batch-norm statistics are added in another order, so float32 results differ by rounding
that Adam steps amplify. After 8 steps of the tiny model every parameter agrees within
PARAMETER_TOLERANCE (measured: 2e-6) — except the bias of the attention logits
(SHIFT_FREE): softmax over time ignores it, its exact gradient is 0, and Adam turns the
rounding noise of that 0 into steps of size lr, so it drifts without changing any output.
Embeddings are compared as the scores see them: by direction. EMBEDDING_TOLERANCE bounds the
cosine distance 1 - cos(team, alone) of each utterance's two embeddings. Measured: up to 4e-6
(Intel Xeon, AVX-512, 2026-11-25), against 2.5e-3 between the two closest utterances of one
speaker. Element-wise, the same runs differ by up to 2.6e-3 of the largest element on AVX-512
(3e-6 to 2e-4 on AMD EPYC): after 4 Adam steps a parameter whose gradient is rounding noise
moves by about ±lr whatever the noise, so element-wise agreement depends on the CPU's kernels.
Two runs with the same number of ranks are bitwise equal on CPU, killed or not.
The same tolerances hold at 4 ranks (2 crops each): on AMD EPYC (2026-11-28) the largest
parameter difference was 1.4e-5 at 2 ranks and 1.2e-5 at 4, the cosine distance 1.2e-7 at both.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from pipeline.asv.crops import CropBatches
from pipeline.asv.embed import embed_utterances, extract_embeddings
from pipeline.asv.model import SpeakerEncoder
from pipeline.asv.train import attacker_settings, train_attacker
from pipeline.core.config import REPO_ROOT
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import Extraction
from pipeline.data.manifest import read_manifest, write_manifest
from pipeline.runtime.distributed import World, use_global_batchnorm
from pipeline.runtime.team import Team, TeamSpec, _free_port_pair
from pipeline.stages.extract import extract_on_rank
from tests.unit.anonymizers import test_neural_system as neural
from tests.helpers import attacker_config, encoder_folder, read_log, split_settings, typed_attacker, validation_eer

TESTS = Path(__file__).resolve().parent
trained = neural.trained  # the tiny voice converter of the anonymiser tests (a module fixture)
DDP_OVERRIDES = ["attacker.training.batch_size=8", "attacker.training.epochs=2", "attacker.training.checkpoint_every=3"]
PARAMETER_TOLERANCE = 1e-4
EMBEDDING_TOLERANCE = 1e-4
SHIFT_FREE = "ecapa.asp.conv.conv.bias"


def cosine_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1 - cos between matching rows of two embedding matrices."""
    a, b = (x / np.linalg.norm(x, axis=1, keepdims=True) for x in (a, b))
    return 1.0 - (a * b).sum(axis=1)


pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def workers_import_this_module():
    """Team workers inherit PYTHONPATH; they import the `*_task` functions from this folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])))
        patch.setenv("OMP_NUM_THREADS", "1")
        yield


def local_spec(ranks: int = 2, nodes: int = 1, timeout_s: float = 120.0, device: str = "cpu") -> TeamSpec:
    """A team led from this machine (node 0) on a free port."""
    return TeamSpec(ranks, nodes, 0, "127.0.0.1", _free_port_pair(), device, timeout_s)


@pytest.fixture(scope="module")
def team(workers_import_this_module):
    """Two CPU ranks (gloo), shared by the tests of this module that leave it healthy."""
    with Team(local_spec()) as shared:
        yield shared


@pytest.fixture(scope="module")
def four_ranks(workers_import_this_module):
    """Four CPU ranks (gloo) on however few cores: each holds 2 crops of the batch of 8."""
    with Team(local_spec(ranks=4)) as shared:
        yield shared


@pytest.fixture(scope="module", params=[2, pytest.param(4, marks=pytest.mark.slow)], ids=lambda n: f"{n}ranks")
def ranks(request) -> Team:
    """The shared 2-rank team, or four ranks."""
    return request.getfixturevalue("team" if request.param == 2 else "four_ranks")


@pytest.fixture(scope="module")
def manifests(corpus, tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("manifests")
    return write_manifest(folder / "train.jsonl", corpus[0]), write_manifest(folder / "val.jsonl", corpus[1])


@pytest.fixture(scope="module")
def random_model(tmp_path_factory) -> Path:
    """A model folder (model.json + model.pt) holding an untrained tiny encoder with non-trivial BN statistics."""
    architecture = {k: v for k, v in OmegaConf.to_container(attacker_config().model).items() if k != "_target_"}
    torch.manual_seed(5)
    encoder = SpeakerEncoder(**architecture)
    for layer in encoder.modules():
        if isinstance(layer, nn.BatchNorm1d):
            layer.running_mean.uniform_(-1, 1)
            layer.running_var.uniform_(0.5, 2)
    return encoder_folder(tmp_path_factory.mktemp("random_model"), encoder)


# --- tasks run by team workers ---------------------------------------------------------------

def train_task(world: World, train: str, val: str, out: str, overrides: list[str], kill_at_fetch: int = 0) -> None:
    """Tiny attacker training on every rank; rank 1 SIGKILLs itself at its `kill_at_fetch`-th batch."""
    torch.set_num_threads(1)
    if kill_at_fetch and world.rank == 1:
        fetch, fetched = CropBatches.__getitem__, []

        def killed_at_a_fetch(self, step):
            fetched.append(step)
            if len(fetched) == kill_at_fetch:
                os.kill(os.getpid(), signal.SIGKILL)
            return fetch(self, step)

        CropBatches.__getitem__ = killed_at_a_fetch  # this worker process dies with the patch
    val_utts = read_manifest(val)
    train_attacker(typed_attacker(overrides=tuple(overrides)), read_manifest(train), out, seed=1986, world=world,
                   validate=lambda encoder: validation_eer(encoder, val_utts, world))


def batchnorm_task(world: World, out: str) -> None:
    """GlobalBatchNorm1d on this rank's half of a fixed batch: output, input gradient, running stats."""
    torch.manual_seed(0)
    x = (torch.randn(8, 6, 5) * 3 + 1)[world.rows(8)].requires_grad_()
    layer = use_global_batchnorm(nn.Sequential(nn.BatchNorm1d(6)))[0].train()
    weight = torch.linspace(-1, 1, 8 * 6 * 5).view(8, 6, 5)[world.rows(8)]
    y = layer(x)
    (y * weight).sum().backward()
    torch.save({"y": y.detach(), "grad": x.grad, "mean": layer.running_mean, "var": layer.running_var,
                "kind": type(layer).__name__}, f"{out}.{world.rank}")


def failing_task(world: World) -> None:
    """Rank 1 fails while rank 0 waits for it in a collective."""
    if world.rank == 1:
        raise VpevalError("rank one cannot go on")
    world.barrier()


# --- teams of gloo workers ---------------------------------------------------------------------

def test_global_batchnorm_over_two_ranks_is_batchnorm_over_the_whole_batch(team, tmp_path):
    team.run(batchnorm_task, out=str(tmp_path / "bn"))
    halves = [torch.load(tmp_path / f"bn.{rank}", weights_only=True) for rank in range(2)]
    assert {half["kind"] for half in halves} == {"GlobalBatchNorm1d"}
    torch.manual_seed(0)
    x = (torch.randn(8, 6, 5) * 3 + 1).requires_grad_()
    reference = nn.BatchNorm1d(6).train()
    y = reference(x)
    (y * torch.linspace(-1, 1, 8 * 6 * 5).view(8, 6, 5)).sum().backward()
    torch.testing.assert_close(torch.cat([h["y"] for h in halves]), y.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat([h["grad"] for h in halves]), x.grad, rtol=1e-5, atol=1e-5)
    for half in halves:
        torch.testing.assert_close(half["mean"], reference.running_mean, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(half["var"], reference.running_var, rtol=1e-5, atol=1e-6)


def test_sharded_extraction_equals_one_process_in_order(ranks, corpus, manifests, random_model, tmp_path):
    utts = corpus[1] + corpus[0]
    manifest = write_manifest(tmp_path / "utts.jsonl", utts)
    extraction = {"batch_seconds": 4.0, "precision": "fp32", "workers": 1}
    ranks.run(extract_on_rank, model=str(random_model), manifest=str(manifest), out=str(tmp_path), extraction=extraction)
    ids, alone = extract_embeddings(random_model, utts, device="cpu", progress=False, **extraction)
    assert (tmp_path / "ids.txt").read_text().split() == ids == [utt.id for utt in utts]
    np.testing.assert_array_equal(np.load(tmp_path / "embeddings.npy"), alone)  # same buckets, same numbers
    assert np.abs(alone).sum(axis=1).min() > 0  # every row was filled by some rank


@pytest.fixture(scope="module")
def ddp_trained(team, manifests, tmp_path_factory) -> Path:
    """An uninterrupted 2-rank DDP run."""
    out = tmp_path_factory.mktemp("ddp_trained")
    team.run(train_task, train=str(manifests[0]), val=str(manifests[1]), out=str(out), overrides=DDP_OVERRIDES)
    return out


@pytest.fixture(scope="module")
def trained_alone(manifests, tmp_path_factory) -> Path:
    """The same training in this process alone."""
    out = tmp_path_factory.mktemp("trained_alone")
    train_task(World.single("cpu"), str(manifests[0]), str(manifests[1]), str(out), DDP_OVERRIDES)
    return out


def final_encoder(folder: Path) -> SpeakerEncoder:
    architecture = OmegaConf.to_container(attacker_config().model)
    encoder = SpeakerEncoder(**{k: v for k, v in architecture.items() if k != "_target_"})
    encoder.load_state_dict(torch.load(folder / "checkpoint.pt", weights_only=True)["model"])
    return encoder.eval()


def test_ddp_matches_one_process(ranks, request, trained_alone, corpus, manifests, tmp_path):
    if ranks.spec.world_size == 2:
        trained = request.getfixturevalue("ddp_trained")
    else:
        trained = tmp_path
        ranks.run(train_task, train=str(manifests[0]), val=str(manifests[1]), out=str(trained), overrides=DDP_OVERRIDES)
    one, many = (torch.load(folder / "checkpoint.pt", weights_only=True) for folder in (trained_alone, trained))
    assert (one["epoch"], one["step"]) == (many["epoch"], many["step"]) == (2, 0)
    differences = {name: (one["model"][name].double() - many["model"][name].double()).abs().max().item()
                   for name in one["model"] if one["model"][name].is_floating_point() and name != SHIFT_FREE}
    assert max(differences.values()) < PARAMETER_TOLERANCE, max(differences.items(), key=lambda item: item[1])
    embeddings = [embed_utterances(final_encoder(folder), corpus[1], device="cpu", progress=False)[1]
                  for folder in (trained_alone, trained)]
    assert cosine_distance(*embeddings).max() < EMBEDDING_TOLERANCE
    for a, b in zip(read_log(trained_alone / "training_log.jsonl"), read_log(trained / "training_log.jsonl")):
        assert (a["crops"], a["steps"]) == (b["crops"], b["steps"])
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4) and a["accuracy"] == pytest.approx(b["accuracy"], abs=0.02)


def test_ddp_run_killed_mid_epoch_resumes_to_the_same_model(ddp_trained, team, manifests, tmp_path,
                                                             workers_import_this_module):
    kwargs = dict(train=str(manifests[0]), val=str(manifests[1]), out=str(tmp_path), overrides=DDP_OVERRIDES)
    started = time.monotonic()
    with Team(local_spec()) as doomed:
        # rank 1 dies fetching epoch 2, step 4; rank 0's collective or torchrun notices first
        with pytest.raises(VpevalError, match=r"^distributed train_task: the workers of node 0 exited with status"
                                              r"|^distributed train_task failed on rank 0: .* by peer"):
            doomed.run(train_task, kill_at_fetch=8, **kwargs)
        with pytest.raises(VpevalError, match="stopped earlier"):
            doomed.run(train_task, **kwargs)
    assert time.monotonic() - started < 60
    checkpoint = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert (checkpoint["epoch"], checkpoint["step"]) == (1, 2)  # 6 of 8 steps, mid-epoch
    team.run(train_task, **kwargs)
    resumed, uninterrupted = (torch.load(folder / "model.pt", weights_only=True) for folder in (tmp_path, ddp_trained))
    for name in uninterrupted:
        assert torch.equal(resumed[name], uninterrupted[name]), name
    assert read_log(tmp_path / "training_log.jsonl") == [
        {**record, "seconds": resumed_record["seconds"]} for record, resumed_record
        in zip(read_log(ddp_trained / "training_log.jsonl"), read_log(tmp_path / "training_log.jsonl"))]


def test_a_failing_rank_stops_the_team_with_its_error(workers_import_this_module):
    started = time.monotonic()
    with Team(local_spec()) as failing:
        with pytest.raises(VpevalError, match=r"^distributed failing_task failed on rank 1: rank one cannot go on$"):
            failing.run(failing_task)
    assert time.monotonic() - started < 60


def test_a_missing_node_fails_after_the_timeout(workers_import_this_module):
    started = time.monotonic()
    with Team(local_spec(ranks=1, nodes=2, timeout_s=4)) as lonely:
        with pytest.raises(VpevalError, match=r"node 1 sent no heartbeat for 4 s|ranks joined within 4 s"):
            lonely.run(failing_task)
    assert time.monotonic() - started < 40


@pytest.mark.slow  # two torchruns and a follower process: ~30 s on 2 cores
def test_two_nodes_on_one_machine_extract_like_one_process(workers_import_this_module, corpus, random_model,
                                                           tmp_path):
    leader = local_spec(ranks=1, nodes=2)
    follower = subprocess.Popen([sys.executable, "-c", (
        "from pipeline.runtime.team import TeamSpec, serve_node; "
        f"serve_node(TeamSpec(1, 2, 1, '127.0.0.1', {leader.port}, 'cpu', 120.0))")],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ["PYTHONPATH"]])})
    utts = corpus[1]
    manifest = write_manifest(tmp_path / "utts.jsonl", utts)
    extraction = {"batch_seconds": 3.0, "precision": "fp32", "workers": 1}
    try:
        with Team(leader) as two_nodes:
            two_nodes.run(extract_on_rank, model=str(random_model), manifest=str(manifest), out=str(tmp_path),
                          extraction=extraction)
        assert follower.wait(timeout=60) == 0  # the follower node left when the leader closed the team
    finally:
        follower.kill()
    _, alone = extract_embeddings(random_model, utts, device="cpu", progress=False, **extraction)
    np.testing.assert_array_equal(np.load(tmp_path / "embeddings.npy"), alone)


def test_on_a_team_rank_0_alone_logs_the_training_curves(team, corpus, tmp_path):
    """Both ranks train; one TensorBoard run holds the epochs of the training log."""
    pytest.importorskip("tensorboard")
    from pipeline.core.cache import Cache
    from pipeline.stages import split, train
    from tests.unit.runtime.test_curves import tensorboard_scalars

    everything = write_manifest(tmp_path / "all.jsonl", corpus[0] + corpus[1])
    cfg = OmegaConf.create({"split": {"val_fraction": 0.34, "enroll_utterances": 1, "select_fraction": None},
                            "attacker": attacker_config(overrides=tuple(DDP_OVERRIDES))})
    cache = Cache(tmp_path / "cache")
    held_out = split.run(split_settings(**cfg.split), everything, cache, seed=1986)
    model = train.run(attacker_settings(cfg.attacker), held_out, cache, seed=1986, device="cpu", team=team,
                      curves={"backend": "tensorboard", "folder": str(tmp_path / "curves")})
    [run] = [p for p in (tmp_path / "curves").iterdir() if p.is_dir()]
    assert run.name == f"attacker_{model.name}" and len(list(run.glob("events.out.tfevents.*"))) == 1
    log = read_log(model / "training_log.jsonl")
    assert tensorboard_scalars(run)["epoch/val_eer"] == \
        [(r["epoch"] * r["steps"], pytest.approx(r["val_eer"], rel=1e-6)) for r in log]


def test_train_and_extract_stages_on_a_team_write_complete_cache_folders(team, corpus, tmp_path):
    from pipeline.core.cache import Cache, is_complete
    from pipeline.core.layout import manifest_path, read_embeddings
    from pipeline.stages import extract, split, train

    everything = write_manifest(tmp_path / "all.jsonl", corpus[0] + corpus[1])
    cfg = OmegaConf.create({"split": {"val_fraction": 0.34, "enroll_utterances": 1, "select_fraction": None},
                            "attacker": attacker_config(overrides=tuple(DDP_OVERRIDES))})
    results = {}
    for name, with_team in (("team", team), ("alone", None)):
        cache = Cache(tmp_path / name)
        held_out = split.run(split_settings(**cfg.split), everything, cache, seed=1986)
        model = train.run(attacker_settings(cfg.attacker), held_out, cache, seed=1986, device="cpu", team=with_team)
        embedded = extract.run(model, manifest_path(held_out, "val"), cache, device="cpu",
                               extraction=Extraction(batch_seconds=4.0, precision="fp32", workers=1, audio_cache=None),
                               team=with_team)
        assert is_complete(model) and is_complete(embedded) and (model / "model.pt").is_file()
        assert [record["epoch"] for record in read_log(model / "training_log.jsonl")] == [1, 2]
        results[name] = read_embeddings(embedded)
    assert results["team"].keys() == results["alone"].keys()
    team_emb, alone_emb = (np.stack([results[name][utt] for utt in results["alone"]]) for name in ("team", "alone"))
    assert cosine_distance(team_emb, alone_emb).max() < EMBEDDING_TOLERANCE


def anonymised_alone_and_on(team, system, manifest: Path, folder: Path, **options) -> dict[str, Path]:
    """The anonymize stage's folders of `manifest` in one process and on `team`, after checking
    that they hold the same files (the key, so the folder's name, too)."""
    from pipeline.core.cache import Cache, is_complete
    from pipeline.stages import anonymize

    folders = {name: anonymize.run(system, manifest, Cache(folder / name), list_name="train", seed=3, device="cpu",
                                   team=with_team, **options) for name, with_team in (("team", team), ("alone", None))}
    assert folders["team"].name == folders["alone"].name and is_complete(folders["team"])
    assert [p.name for p in folders["team"].glob("pseudo_speakers*")] == ["pseudo_speakers.jsonl"]
    for name in ("pseudo_speakers.jsonl", "speech.json"):
        assert (folders["team"] / name).read_text() == (folders["alone"] / name).read_text()
    utts = read_manifest(manifest)
    for utt in utts:
        assert anonymize.output_path(folders["team"], utt).read_bytes() == \
            anonymize.output_path(folders["alone"], utt).read_bytes()
    assert [(u.id, u.pseudo_speaker) for u in read_manifest(folders["team"] / "manifest.jsonl")] == \
        [(u.id, u.pseudo_speaker) for u in read_manifest(folders["alone"] / "manifest.jsonl")]
    return folders


def test_anonymisation_on_a_team_writes_what_one_process_writes(team, corpus, tmp_path):
    """McAdams on 2 ranks: each rank anonymises its half of the batches, the leader gathers the
    records; the folder equals one process's. A setting that interpolates another reaches the
    ranks resolved (the ranks get the system's node without the config around it)."""
    from pipeline.core.config import compose

    manifest = write_manifest(tmp_path / "list.jsonl", corpus[0] + corpus[1])
    cfg = compose(["split.enroll_utterances=4"])
    cfg.anonymizer.batch_seconds = "${split.enroll_utterances}"  # as a recipe's yaml may write it
    anonymised_alone_and_on(team, cfg.anonymizer, manifest, tmp_path)


def test_a_speaker_level_voice_converter_on_a_team_writes_what_one_process_writes(team, trained, tmp_path):
    """xvector at speaker level: every rank prepares the speakers' statistics and draws the
    same pseudo-speakers as one process."""
    from pipeline.core.config import compose

    cfg = compose(["anonymizer=xvector_speaker", f"anonymizer.vc_model={trained['vc_model']}", *neural.SMALL_POOL,
                   "anonymizer.batch_seconds=3"])
    folders = anonymised_alone_and_on(team, cfg.anonymizer, trained["manifest"], tmp_path, output_check=neural.UNTRAINED)
    from pipeline.stages.anonymize import _batches

    utts = read_manifest(folders["team"] / "manifest.jsonl")
    assert len(_batches(utts, 3.0)) >= 2 and all(u.pseudo_speaker["target_speakers"] for u in utts)  # both ranks worked


def test_each_rank_anonymises_its_own_batches(team, corpus, tmp_path):
    """The ranks' record files hold disjoint halves of the batches that cover the list."""
    from pipeline.core.config import compose
    from pipeline.stages import anonymize

    utts = corpus[0]
    system = compose(["anonymizer.batch_seconds=4"]).anonymizer
    team.run(anonymize.anonymize_on_rank, system=OmegaConf.to_container(system),
             manifest=str(write_manifest(tmp_path / "list.jsonl", utts)), out=str(tmp_path), list_name="train",
             seed=3, sample_rate=16000, speakers=None)
    done = [[json.loads(line)["id"] for line in (tmp_path / f"pseudo_speakers.{rank}.jsonl").read_text().splitlines()]
            for rank in (0, 1)]
    batches = [[u.id for u in batch] for batch in anonymize._batches(utts, 4.0)]
    assert len(batches) >= 4
    assert done == [sum(batches[rank::2], []) for rank in (0, 1)]


# --- CUDA ------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_ddp_on_two_gpus_with_nccl_matches_one_gpu(workers_import_this_module, corpus, manifests, random_model,
                                                   tmp_path):
    overrides = [*DDP_OVERRIDES, "attacker.training.precision=fp32"]
    with Team(local_spec(timeout_s=300.0, device="cuda")) as gpus:
        gpus.run(train_task, train=str(manifests[0]), val=str(manifests[1]), out=str(tmp_path / "two"),
                 overrides=overrides)
        extraction = {"batch_seconds": 4.0, "precision": "fp32", "workers": 1}
        manifest = write_manifest(tmp_path / "utts.jsonl", corpus[1])
        gpus.run(extract_on_rank, model=str(random_model), manifest=str(manifest), out=str(tmp_path),
                 extraction=extraction)
    train_task(World.single("cuda"), str(manifests[0]), str(manifests[1]), str(tmp_path / "one"), overrides)
    embeddings = [embed_utterances(final_encoder(tmp_path / name), corpus[1], device="cpu", progress=False)[1]
                  for name in ("one", "two")]
    # cuDNN picks kernels per process, so rounding differs more than on CPU
    assert np.abs(embeddings[0] - embeddings[1]).max() < 1e-2 * np.abs(embeddings[0]).max()
    _, alone = extract_embeddings(random_model, corpus[1], device="cuda", progress=False, **extraction)
    np.testing.assert_allclose(np.load(tmp_path / "embeddings.npy"), alone, rtol=0, atol=1e-4)


@pytest.mark.gpu
def test_compiled_bf16_training_on_cuda_learns(manifests, tmp_path):
    overrides = [*DDP_OVERRIDES, "attacker.training.epochs=3", "attacker.training.precision=bf16",
                 "attacker.training.compile=true"]
    train_task(World.single("cuda"), str(manifests[0]), str(manifests[1]), str(tmp_path), overrides)
    log = read_log(tmp_path / "training_log.jsonl")
    assert all(np.isfinite(record["loss"]) for record in log) and log[-1]["loss"] < log[0]["loss"]


@pytest.mark.slow  # inductor compiles the tiny model's training step on CPU: ~4 min on 2 cores
def test_compiled_training_on_cpu_follows_eager_training(manifests, tmp_path):
    overrides = [*DDP_OVERRIDES, "attacker.training.epochs=1"]
    train_task(World.single("cpu"), str(manifests[0]), str(manifests[1]), str(tmp_path / "eager"), overrides)
    train_task(World.single("cpu"), str(manifests[0]), str(manifests[1]), str(tmp_path / "compiled"),
               [*overrides, "attacker.training.compile=true"])
    eager, compiled = (read_log(tmp_path / name / "training_log.jsonl")[0] for name in ("eager", "compiled"))
    assert compiled["loss"] == pytest.approx(eager["loss"], rel=0.02)

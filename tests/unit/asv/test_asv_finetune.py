"""Fine-tuning the semi-informed attacker as VPC 2026 does it: `attacker.init` / `finetune`, the
training augmentations (`attacker.training.augment`, SpeechBrain's DropFreq and DropChunk) and
SpeechBrain's cyclic learning rate."""
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from speechbrain.augment.augmenter import Augmenter
from speechbrain.augment.time_domain import DropChunk, DropFreq
from speechbrain.nnet.schedulers import CyclicLRScheduler

from pipeline.app.settings import problems
from pipeline.asv.augment import Augmentation, seeded
from pipeline.asv.embed import load_encoder
from pipeline.asv.schedules import cyclic
from pipeline.asv.train import train_attacker
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from tests.helpers import attacker_config, encoder_folder, read_log, typed_attacker, validation_eer

pytestmark = pytest.mark.usefixtures("single_thread")

VPC2026 = "attacker/augment@attacker.training.augment=vpc2026"
# VPC 2026's wav_augment (train_ecapa_ssl_tdnn_small.yaml), built with SpeechBrain's own classes
VPC_DROP_FREQ = dict(drop_freq_low=0, drop_freq_high=1, drop_freq_count_low=1, drop_freq_count_high=3,
                     drop_freq_width=0.05)
VPC_DROP_CHUNK = dict(drop_length_low=1000, drop_length_high=2000, drop_count_low=1, drop_count_high=5)
# 4 steps per epoch on the toy corpus, a mid-epoch checkpoint every 3 steps
RUN = ("attacker.training.batch_size=8", "attacker.training.checkpoint_every=3")


def speech(batch: int = 4, seconds: float = 1.0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(0).normal(0, 0.1, (batch, int(16000 * seconds)))).float()


# --- schedule ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["triangular", "triangular2", "exp_range"])
def test_cyclic_schedule_is_speechbrains_as_vpc_steps_it(mode):
    """VPC calls CyclicLRScheduler.on_batch_end before every optimiser step (compute_objectives)."""
    weights = torch.nn.Parameter(torch.zeros(1))
    theirs, ours = torch.optim.AdamW([weights], lr=0.01), torch.optim.AdamW([weights], lr=0.01)
    reference = CyclicLRScheduler(base_lr=1e-8, max_lr=0.01, step_size=5, mode=mode, gamma=0.97)
    schedule = cyclic(ours, total_steps=30, base_lr=1e-8, step_size_up=5, mode=mode, gamma=0.97)
    for _ in range(30):  # three whole cycles
        reference.on_batch_end(theirs)
        assert ours.param_groups[0]["lr"] == theirs.param_groups[0]["lr"]
        ours.step()
        schedule.step()


def test_vpc_2026_schedule_is_the_vpc_2024_one():
    """VPC 2026 (train_ecapa_ssl_tdnn_small.yaml) keeps VPC 2024's CyclicLRScheduler: base 1e-8,
    max = lr, step_size 65000; the config group has it once, as cyclic_vpc2024."""
    vpc = attacker_config("ecapa_tiny", ("attacker/scheduler@attacker.training.scheduler=cyclic_vpc2024",))
    weights = torch.nn.Parameter(torch.zeros(1))
    ours, theirs = torch.optim.AdamW([weights], lr=0.01), torch.optim.AdamW([weights], lr=0.01)
    schedule = instantiate(vpc.training.scheduler)(ours, total_steps=100)
    reference = CyclicLRScheduler(base_lr=1e-8, max_lr=0.01, step_size=65000)
    for _ in range(100):
        reference.on_batch_end(theirs)
        assert ours.param_groups[0]["lr"] == theirs.param_groups[0]["lr"]
        ours.step()
        schedule.step()
    with pytest.raises(VpevalError, match="attacker.training.scheduler.mode=linear"):
        cyclic(ours, total_steps=1, base_lr=1e-8, step_size_up=5, mode="linear")


# --- augmentation --------------------------------------------------------------------------------

def test_vpc2026_augmentation_is_speechbrains_drop_freq_then_drop_chunk():
    augment = Augmentation(attacker_config("ecapa_tiny", (VPC2026,)).training.augment, seed=7)
    wavs = speech()
    with seeded(7, 1, 2, wavs.device):
        expected = DropChunk(**VPC_DROP_CHUNK)(DropFreq(**VPC_DROP_FREQ)(wavs), torch.ones(len(wavs)))
    augmented = augment(wavs, 1, 2)
    assert torch.equal(augmented, expected)
    assert ((augmented == 0).sum(dim=1) >= 1000).all()  # every crop lost at least one chunk
    # VPC writes the two in an Augmenter; with its settings that is the same chain, once its own
    # draw (how many augmentations: min = max, clipped to 2) is made
    vpc = Augmenter(parallel_augment=False, concat_original=False, min_augmentations=4, max_augmentations=4,
                    augment_prob=1.0, augmentations=[DropFreq(**VPC_DROP_FREQ), DropChunk(**VPC_DROP_CHUNK)])
    with seeded(7, 1, 2, wavs.device):
        theirs, _ = vpc(wavs, torch.ones(len(wavs)))
    with seeded(7, 1, 2, wavs.device):
        torch.randint(low=2, high=3, size=(1,))
        chain = DropChunk(**VPC_DROP_CHUNK)(DropFreq(**VPC_DROP_FREQ)(wavs), torch.ones(len(wavs)))
    assert vpc.replicate_labels(torch.arange(4)).tolist() == [0, 1, 2, 3]  # no copies, labels unchanged
    assert torch.equal(theirs, chain)


def test_augmentation_is_a_pure_function_of_seed_epoch_and_step():
    augment = Augmentation(attacker_config("ecapa_tiny", (VPC2026,)).training.augment, seed=3)
    wavs = speech()
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    first = augment(wavs, 0, 5)
    assert torch.equal(torch.rand(3), before)  # training's own random stream untouched
    assert torch.equal(augment(wavs, 0, 5), first)
    assert not torch.equal(augment(wavs, 0, 6), first) and not torch.equal(augment(wavs, 1, 5), first)
    other_seed = Augmentation(attacker_config("ecapa_tiny", (VPC2026,)).training.augment, seed=4)
    assert not torch.equal(other_seed(wavs, 0, 5), first)
    assert Augmentation([], seed=3)(wavs, 0, 5) is wavs and not Augmentation(OmegaConf.create([]), seed=3)



@pytest.mark.gpu
def test_augmentation_draws_the_same_on_cuda_as_on_cpu():
    augment = Augmentation(attacker_config("ecapa_tiny", (VPC2026,)).training.augment, seed=3)
    wavs = speech(8, 3.0)
    on_cpu, on_gpu = augment(wavs, 2, 9), augment(wavs.cuda(), 2, 9).cpu()
    assert torch.equal(on_cpu == 0, on_gpu == 0)  # the same chunks dropped
    torch.testing.assert_close(on_gpu, on_cpu, rtol=0, atol=1e-5)  # the same bands, up to float rounding

def test_augmentation_that_changes_the_batch_is_refused():
    doubling = OmegaConf.create([{"_target_": "speechbrain.augment.augmenter.Augmenter", "concat_original": True,
                                  "augmentations": [{"_target_": "speechbrain.augment.time_domain.DropChunk"}]}])
    with pytest.raises(VpevalError, match=r"attacker.training.augment\[0\]: turned crops of shape \(4, 16000\) into "
                                          r"\(8, 16000\)"):
        Augmentation(doubling, seed=0)(speech(), 0, 0)
    with pytest.raises(VpevalError, match=r"attacker.training.augment\[1\]: cannot build torch.nn.Nope"):
        Augmentation(OmegaConf.create([{"_target_": "torch.nn.Identity"}, {"_target_": "torch.nn.Nope"}]), seed=0)


# --- attacker.finetune ---------------------------------------------------------------------------

def test_finetune_key_and_init_must_agree_before_any_stage(tmp_path):
    assert problems(compose(["attacker.finetune=true"])) == [
        "attacker.finetune=true: needs attacker.init, the pretrained attacker folder to start from "
        "(add attacker.init=<folder>)"]
    assert problems(compose(["attacker.finetune=false", f"attacker.init={tmp_path}"])) == [
        f"attacker.finetune=false (train from scratch) but attacker.init={tmp_path} is set: unset one of them"]
    assert problems(compose(["attacker.finetune=true", f"attacker.init={tmp_path}"])) == []
    assert problems(compose(["attacker.finetune=false"])) == []


def test_finetune_without_init_stops_training_before_any_work(corpus, tmp_path):
    cfg = typed_attacker("ecapa_tiny", ("attacker.finetune=true",))
    with pytest.raises(VpevalError, match="attacker.finetune=true: needs attacker.init"):
        train_attacker(cfg, corpus[0], tmp_path / "out", device="cpu", seed=0, validate=lambda encoder: 0.5)
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> Path:
    """A tiny attacker folder (ecapa_tiny, random weights: every weight matters)."""
    torch.manual_seed(11)
    encoder = instantiate(attacker_config("ecapa_tiny").model)
    with torch.no_grad():
        for parameter in encoder.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    return encoder_folder(tmp_path_factory.mktemp("pretrained"), encoder)


def frozen(settings):
    """Attacker settings with learning rate 0 (weights that stay where they start): a test's
    device, set after the conversion, since the settings refuse lr 0 from a user."""
    settings.training.optimizer["lr"] = 0.0
    return settings


def test_training_starts_from_the_init_weights_with_a_new_head(corpus, pretrained, tmp_path, monkeypatch):
    from pipeline.asv import train

    folder = load_encoder(pretrained, "cpu")
    wavs = speech(3, 1.5)
    at_start = {}
    fit_start = train._Trainer.on_fit_start

    def embed_at_fit_start(self):  # after init (and resume), before the first step
        with torch.no_grad():
            at_start["embeddings"] = self.model.eval()(wavs)
        at_start["head"] = self.head.weight.detach().clone()
        fit_start(self)

    monkeypatch.setattr(train._Trainer, "on_fit_start", embed_at_fit_start)
    cfg = frozen(typed_attacker("ecapa_tiny", (*RUN, "attacker.training.epochs=1", f"attacker.init={pretrained}",
                                               "attacker.finetune=true")))
    out = train_attacker(cfg, corpus[0], tmp_path, device="cpu", seed=1, validate=lambda encoder: 0.5)
    with torch.no_grad():
        assert torch.equal(at_start["embeddings"], folder(wavs))
    assert at_start["head"].shape == (6, folder.embedding_dim)  # a new head: the 6 toy training speakers
    tuned, reference = load_encoder(out, "cpu"), folder.state_dict()
    # lr 0: every weight is still the folder's; only batch norm's running statistics moved to the
    # new data (as in VPC, which fine-tunes with SpeechBrain's modules in training mode)
    assert all(torch.equal(tensor, reference[name]) for name, tensor in tuned.named_parameters())
    assert any(not torch.equal(tensor, reference[name]) for name, tensor in tuned.state_dict().items()
               if name.endswith("running_mean"))
    scratch = train_attacker(frozen(typed_attacker("ecapa_tiny", (*RUN, "attacker.training.epochs=1"))),
                             corpus[0], tmp_path / "scratch", device="cpu", seed=1, validate=lambda encoder: 0.5)
    with torch.no_grad():
        assert not torch.allclose(load_encoder(scratch, "cpu")(wavs), tuned(wavs), atol=1e-3)


def test_tiny_vpc_2026_fine_tuning_lowers_the_training_loss(corpus, pretrained, tmp_path):
    cfg = typed_attacker("ecapa_tiny", (
        *RUN, "attacker.training.epochs=4", f"attacker.init={pretrained}", "attacker.finetune=true", VPC2026,
        "attacker.training.optimizer._target_=torch.optim.AdamW", "attacker.training.optimizer.lr=0.01",
        "attacker.training.optimizer.weight_decay=0.01",
        "attacker/scheduler@attacker.training.scheduler=cyclic_vpc2024", "attacker.training.scheduler.step_size_up=16"))
    out = train_attacker(cfg, corpus[0], tmp_path, device="cpu", seed=1986,
                         validate=lambda encoder: validation_eer(encoder, corpus[1]))
    log = read_log(out / "training_log.jsonl")
    assert [record["epoch"] for record in log] == [1, 2, 3, 4]
    assert log[-1]["loss"] < log[0]["loss"] - 1.0
    assert all(np.isfinite(record["loss"]) for record in log)


def test_augmented_run_resumed_mid_epoch_ends_bitwise_equal(corpus, tmp_path, monkeypatch):
    from pipeline.asv.crops import CropBatches

    cfg = typed_attacker("ecapa_tiny", (*RUN, "attacker.training.epochs=2", VPC2026))
    fetch, calls = CropBatches.__getitem__, []

    def killed_at_the_seventh_batch(self, step):
        calls.append(step)
        if len(calls) == 7:
            raise KeyboardInterrupt("simulated kill")
        return fetch(self, step)

    with monkeypatch.context() as patch:
        patch.setattr(CropBatches, "__getitem__", killed_at_the_seventh_batch)
        with pytest.raises(KeyboardInterrupt):
            train_attacker(cfg, corpus[0], tmp_path / "resumed", device="cpu", seed=5, validate=lambda encoder: 0.5)
    assert torch.load(tmp_path / "resumed" / "checkpoint.pt", weights_only=True)["step"] == 2  # mid-epoch 2
    resumed = train_attacker(cfg, corpus[0], tmp_path / "resumed", device="cpu", seed=5, validate=lambda encoder: 0.5)
    whole = train_attacker(cfg, corpus[0], tmp_path / "whole", device="cpu", seed=5, validate=lambda encoder: 0.5)
    plain = train_attacker(typed_attacker("ecapa_tiny", (*RUN, "attacker.training.epochs=2")), corpus[0],
                           tmp_path / "plain", device="cpu", seed=5, validate=lambda encoder: 0.5)
    a, b, c = (torch.load(out / "model.pt", weights_only=True) for out in (resumed, whole, plain))
    assert all(torch.equal(a[name], b[name]) for name in a)
    assert not all(torch.equal(a[name], c[name]) for name in a)  # the augmentation did change training

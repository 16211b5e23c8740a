"""Train the attacker's speaker encoder on (anonymised) training utterances.

`train_attacker` writes into `out_dir`::

    audio_cache/         decoded int16 audio (see `audio_cache`), unless training.cache_dir is set
    checkpoint.pt        latest state: model, head, optimiser, scheduler, grad scaler, epoch,
                         step within the epoch, RNG states, best validation EER, history
    model.pt, model.json the encoder with the best validation EER so far (weights-only state
                         dict) and what rebuilds it (`embed.load_encoder`)
    training_log.jsonl   one line per finished epoch: loss, accuracy, lr, val_eer, best, seconds

The same values, and the running loss and accuracy every `log_every` steps, also go to the
`curves` logger when one is given (`pipeline.runtime.curves`; x axis: optimiser steps).

A checkpoint is written atomically after every epoch and every `checkpoint_every` optimiser
steps. On start the run resumes from `checkpoint.pt`, mid-epoch included: batches are a pure
function of (seed, epoch, step), so the consumed ones are skipped and, on CPU, an
interrupted run ends with bitwise the same model as an uninterrupted one. A checkpoint written
with other result-affecting settings is refused with the differing keys named.

The attacker's settings are one typed object, `attacker_settings(cfg.attacker)` (the config
section as its schema, `pipeline.core.schemas.Attacker`), built once by the train stage and handed
as it is to every rank. The encoder starts from `attacker.init` when set
(`pipeline.asv.finetune`; the AAM head is always new); every batch of crops goes through
`attacker.training.augment` (`pipeline.asv.augment`).

Several ranks (a `World` of processes launched by torchrun, see `distributed` and `team`)
train one model with DistributedDataParallel: every rank builds the same (seed, epoch, step)
batch and takes its rows of it, so the global batch, and the model up to float rounding, do
not depend on the number of ranks; batch norm uses the statistics of the global batch
(`training.sync_batchnorm`). Rank 0 builds the audio cache first, writes the checkpoints,
the model and the log, and shows progress; every rank resumes from the same checkpoint;
validation runs on every rank (extraction sharded) and rank 0's EER decides the best model.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import math
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from pipeline.asv.audio_cache import INT16_SCALE, AudioCache, build_audio_cache
from pipeline.asv.augment import Augmentation
from pipeline.asv.crops import CropBatches, CropPlan
from pipeline.asv.embed import save_encoder
from pipeline.asv.encoder import check_encoder
from pipeline.asv.finetune import init_folder
from pipeline.asv.model import AAMSoftmaxHead
from pipeline.asv.speechbrain_folder import load_attacker_folder
from pipeline.core import faults
from pipeline.core.devices import compile_failed, compile_mode, out_of_memory
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import Attacker, typed
from pipeline.data.manifest import Utterance
from pipeline.runtime.checkpoint import differences
from pipeline.runtime.cpus import usable_cpus
from pipeline.runtime.curves import CurveLogger
from pipeline.runtime.distributed import World, use_global_batchnorm
from pipeline.runtime.precision import autocast_dtype
from pipeline.runtime.progress import progress
from pipeline.runtime.trainer import Trainer, write_log

CHECKPOINT_FORMAT = "vpeval-asv-checkpoint-1"
# Settings that change how fast a run goes, never what it computes: free to change on resume.
log = logging.getLogger(__name__)
OPERATIONAL_KEYS = ("num_workers", "cache_workers", "checkpoint_every", "log_every", "cache_dir", "compile")

Validate = Callable[[nn.Module], float]


def attacker_settings(cfg: DictConfig, key: str = "attacker") -> Attacker:
    """An attacker config (conf/attacker/*.yaml, at `key`) as the typed object training takes:
    resolved, values in their schema types, the `_target_` plugins (model, optimiser, ...) as
    plain dicts."""
    return typed(cfg, Attacker, key)


def train_attacker(cfg: Attacker, train_utts: Sequence[Utterance], out_dir: str | Path, *,
                   seed: int, validate: Validate, device: str | torch.device | None = None,
                   world: World | None = None, curves: CurveLogger | None = None) -> Path:
    """Train (or resume, or find finished) an attacker; return `out_dir`, which holds model.pt/json.

    `cfg` is an attacker's settings (`attacker_settings`); `validate(encoder)` returns the
    validation EER (lower is better) and is called once per epoch with the encoder in eval
    mode. Give `device` to train in this process alone, or `world` when every rank of a
    torchrun launch calls this with the same arguments (`validate` then runs on every rank).
    `curves` receives the training curves (rank 0's; none when not given).
    """
    if (device is None) == (world is None):
        raise ValueError("train_attacker needs either device or world")
    world = world or World.single(device)
    return _Trainer(cfg, train_utts, Path(out_dir), world, seed, validate, curves or CurveLogger()).fit()


@contextlib.contextmanager
def cudnn_autotuning(enabled: bool) -> Iterator[None]:
    """cuDNN autotuning on for the training steps only (fixed crop shapes: it picks the
    fastest kernels once), restored after, so validation and extraction, whose buckets each
    have their own padded length, never re-tune for every shape."""
    previous = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = enabled
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = previous


class _TrainingStep(nn.Module):
    """Encoder and AAM head as one module, what DDP wraps and torch.compile compiles:
    (int16-scaled crops, labels) -> (mean loss, cosines); the encoder under autocast."""

    def __init__(self, model: nn.Module, head: AAMSoftmaxHead, amp_dtype: torch.dtype | None):
        super().__init__()
        self.model, self.head, self.amp_dtype = model, head, amp_dtype

    def forward(self, wavs: torch.Tensor, labels: torch.Tensor,
                context: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type=wavs.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
            embeddings = self.model(wavs) if context is None else self.model(wavs, context=context)
        return self.head(embeddings, labels)


class _Trainer(Trainer):
    """One attacker training run, an epoch per unit: its model, optimisation state, data and checkpoint."""

    checkpoint_format, what = CHECKPOINT_FORMAT, "attacker"
    loaded_before_settings = ("model",)

    def __init__(self, cfg: Attacker, train_utts: Sequence[Utterance], out_dir: Path, world: World, seed: int,
                 validate: Validate, curves: CurveLogger):
        training = cfg.training
        self.cfg, self.out_dir, self.world, self.device = cfg, out_dir, world, world.device
        self.validate, self.curves = validate, curves
        device = world.device
        self.amp_dtype = autocast_dtype(training.precision, device, config_key="attacker.training.precision")
        self.compile_mode = compile_mode(training.compile, device, config_key="attacker.training.compile")
        torch.manual_seed(seed)
        # before any long work, so that a bad config fails at once
        self.model = check_encoder(instantiate(cfg.model), "attacker.model._target_")
        init = init_folder(cfg.init, cfg.finetune)
        if init:  # fine-tune a pretrained encoder (overridden by a checkpoint to resume); the head is new
            start_from(self.model, init)
        crop_samples = round(float(training.crop_seconds) * self.model.sample_rate)
        if crop_samples < self.model.min_samples:
            raise VpevalError(f"attacker.training.crop_seconds={training.crop_seconds} is shorter than "
                              f"the encoder's shortest input ({self.model.min_samples} samples)")
        self.augment = Augmentation(training.augment or [], seed)
        self.augment.probe(crop_samples)

        cache_dir = Path(training.cache_dir) if training.cache_dir else out_dir / "audio_cache"
        with world.main_first():
            self.cache = build_audio_cache(train_utts, cache_dir, sample_rate=self.model.sample_rate,
                                           workers=int(training.cache_workers), progress=None if world.is_main else False,
                                           folder_key="attacker.training.cache_dir")
        if len(self.cache.speakers) < 2:
            raise VpevalError(f"attacker training set has {len(self.cache.speakers)} speaker(s); at least 2 are needed")
        self.plan = CropPlan(self.cache.lengths, crop_samples, int(training.batch_size), seed,
                             str(training.examples_per_epoch))
        self.rows = world.rows(self.plan.crops_per_step)
        if world.size > 1 and training.sync_batchnorm:
            use_global_batchnorm(self.model)
        self.epochs = int(training.epochs)
        self.head = AAMSoftmaxHead(self.model.embedding_dim, len(self.cache.speakers),
                                   margin=float(cfg.head.margin), scale=float(cfg.head.scale))
        self.model.to(device)
        self.head.to(device)
        # frozen parts of the encoder (requires_grad off) get no gradient and no optimiser state
        parameters = [p for p in (*self.model.parameters(), *self.head.parameters()) if p.requires_grad]
        self.optimizer = instantiate(training.optimizer)(parameters)
        self.scheduler = instantiate(training.scheduler)(self.optimizer,
                                                         total_steps=self.epochs * self.plan.steps_per_epoch)
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.amp_dtype == torch.float16)
        self.run_identity = _run_identity(cfg, self.model, self.cache, seed)
        self.checkpoint_path = out_dir / "checkpoint.pt"
        self.checkpoint_every = int(training.checkpoint_every or 0)
        self.log_every = max(1, int(training.log_every or 10))
        cpus, why = usable_cpus()
        self.num_workers = min(int(training.num_workers), cpus)  # no more loaders than CPUs
        if self.num_workers < int(training.num_workers) and world.is_main:
            log.info("train: %d crop-loading workers, not attacker.training.num_workers=%d: %s usable CPU(s)",
                     self.num_workers, int(training.num_workers), why)
        self.epoch_started = time.monotonic()
        # Progress of the run; saved in every checkpoint. loss_sum / correct / seen cover the
        # current epoch's steps so far, over every rank.
        self.state = {"epoch": 0, "step": 0, "best_eer": math.inf, "best_epoch": 0, "history": [],
                      "loss_sum": 0.0, "correct": 0, "seen": 0}

    def checkpointed(self) -> dict:
        return {"model": self.model, "head": self.head, "optimizer": self.optimizer, "scheduler": self.scheduler,
                "scaler": self.scaler}

    def writes_checkpoint(self) -> bool:
        return self.world.is_main  # every rank reads the same checkpoint; rank 0 writes it

    def on_fit_start(self) -> None:
        self.step_module = self._step_module(self.amp_dtype)

    def finished(self) -> bool:
        return self.state["epoch"] >= self.epochs

    def fit_unit(self) -> None:
        """One epoch's remaining batches, then validation, the best model, the log and a checkpoint."""
        with cudnn_autotuning(self.device.type == "cuda"):
            self.train_epoch()
        self.end_epoch(float(self.validate(self.model.eval())))

    def on_fit_end(self) -> Path:
        self.world.barrier()  # rank 0's last files are written before any rank returns
        if not (self.out_dir / "model.pt").is_file():
            raise VpevalError(f"{self.out_dir}: no epoch gave a finite validation EER, so no model was kept "
                              f"(see {self.out_dir / 'training_log.jsonl'})")
        return self.out_dir

    def _step_module(self, amp_dtype: torch.dtype | None) -> nn.Module:
        """The training forward: DDP across ranks, torch.compile'd if asked (built after resuming)."""
        step: nn.Module = _TrainingStep(self.model, self.head, amp_dtype)
        if self.world.size > 1:
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            step = DistributedDataParallel(step, device_ids=device_ids, gradient_as_bucket_view=True)
        return torch.compile(step, mode=self.compile_mode) if self.compile_mode else step

    def _forward_backward(self, wavs: torch.Tensor, labels: torch.Tensor,
                          context: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(loss, cosines) of one batch, gradients accumulated; a torch.compile failure, or a batch
        that does not fit the device's memory, is one line (never split: that would change the result)."""
        if self.compile_mode:
            torch.compiler.cudagraph_mark_step_begin()  # CUDA graphs: this step's outputs are new
        try:
            loss, cosines = self.step_module(wavs, labels, context)
            self.optimizer.zero_grad(set_to_none=True)
            self.scaler.scale(loss).backward()
        except torch._dynamo.exc.TorchDynamoException as exc:
            raise compile_failed(exc, self.compile_mode, "attacker.training.compile") from None
        except torch.OutOfMemoryError as error:
            advice = ("lower attacker.training.batch_size or attacker.training.crop_seconds (either changes "
                      "the result)" + (", or set attacker.training.precision=bf16"
                                       if self.device.type == "cuda" and not self.amp_dtype else ""))
            raise out_of_memory(error, self.device, f"a training step of {len(wavs)} crops of "
                                f"{wavs.shape[-1] / self.model.sample_rate:g} s",
                                f"attacker.training.batch_size={self.cfg.training.batch_size}", advice) from None
        return loss, cosines

    def train_epoch(self) -> None:
        """The remaining batches of the current epoch (this rank's rows of each), with mid-epoch checkpoints."""
        state, device, steps_per_epoch, world = self.state, self.device, self.plan.steps_per_epoch, self.world
        epoch = state["epoch"]
        self.epoch_started = time.monotonic()
        # augmentation sees the whole global batch (its draws must not depend on the number of ranks)
        rows = slice(None) if self.augment else self.rows
        context_samples = int(getattr(self.model, "context_samples", 0))
        context = (context_samples, bool(getattr(self.model, "normalize_waveform", True))) if context_samples else None
        batches = CropBatches(self.cache.folder, self.cache.offsets, self.cache.labels, self.plan, epoch, rows, context)
        loader = DataLoader(batches, batch_size=None, sampler=range(state["step"], steps_per_epoch),
                            num_workers=self.num_workers, pin_memory=device.type == "cuda")
        # This rank's loss and correct-count sums since they were last added to `state`; they
        # stay on the device (no host sync per step) and are summed over ranks at checkpoints.
        sums = torch.zeros(2, dtype=torch.float64, device=device)
        self.step_module.train()
        bar = progress(loader, logger=log, total=steps_per_epoch, initial=state["step"], unit="batch",
                       desc=f"train: epoch {epoch + 1}/{self.epochs}", disable=not world.is_main)
        for crops, labels, *contexts in bar:
            wavs = crops.to(device, non_blocking=True).float() / INT16_SCALE
            labels = labels.to(device, non_blocking=True)
            context = contexts[0].to(device, non_blocking=True) if contexts else None
            if self.augment:  # the crops only: a context is clean audio (VPC augments the fbank branch's input)
                wavs, labels = self.augment(wavs, epoch, state["step"])[self.rows], labels[self.rows]
                context = None if context is None else context[self.rows]
            loss, cosines = self._forward_backward(wavs, labels, context)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.scheduler.step()
            sums += torch.stack([loss.detach().double() * len(labels), (cosines.argmax(dim=1) == labels).sum().double()])
            state["seen"] += self.plan.crops_per_step
            state["step"] += 1
            faults.hit("step")
            if world.is_main and (state["step"] % self.log_every == 0 or state["step"] == steps_per_epoch):
                loss_sum, correct = (sums * world.size).tolist()  # rank 0's rows stand in for the others'
                running = {"train/loss": (state["loss_sum"] + loss_sum) / state["seen"],
                           "train/accuracy": (state["correct"] + correct) / state["seen"],
                           "train/lr": self.scheduler.get_last_lr()[0]}
                bar.set_postfix(loss=f"{running['train/loss']:.3f}", acc=f"{running['train/accuracy']:.3f}")
                self.curves.log(epoch * steps_per_epoch + state["step"], **running)
            if self.checkpoint_every and (epoch * steps_per_epoch + state["step"]) % self.checkpoint_every == 0:
                self._add_sums(sums)
                self.save()
        bar.close()
        self._add_sums(sums)

    def _add_sums(self, sums: torch.Tensor) -> None:
        """Add every rank's loss and correct-count sums to `state` and reset them."""
        loss_sum, correct = self.world.sum(sums).tolist()
        self.state["loss_sum"] += loss_sum
        self.state["correct"] += int(correct)
        sums.zero_()

    def end_epoch(self, val_eer: float) -> None:
        """Keep the model if it is the best so far (rank 0's EER decides on every rank), log the
        epoch, checkpoint the next one's start."""
        state, main = self.state, self.world.is_main
        val_eer = self.world.broadcast(val_eer)
        is_best = val_eer < state["best_eer"]
        if is_best:
            state["best_eer"], state["best_epoch"] = val_eer, state["epoch"] + 1
            if main:
                _save_model(self.out_dir, self.model, self.cfg, state, n_speakers=len(self.cache.speakers))
        seen = max(state["seen"], 1)
        state["history"].append({
            "epoch": state["epoch"] + 1, "steps": self.plan.steps_per_epoch, "crops": state["seen"],
            "loss": state["loss_sum"] / seen, "accuracy": state["correct"] / seen,
            "lr": self.scheduler.get_last_lr()[0], "val_eer": val_eer, "best": is_best,
            "seconds": round(time.monotonic() - self.epoch_started, 3)})
        if main:
            write_log(self.out_dir / "training_log.jsonl", state["history"])
            epoch = state["history"][-1]
            self.curves.log(epoch["epoch"] * epoch["steps"], **{f"epoch/{key}": epoch[key] for key in
                                                                 ("loss", "accuracy", "lr", "val_eer")})
            log.info("train: epoch %d/%d loss %.3f accuracy %.3f validation EER %.2f %%%s (%.0f s)", epoch["epoch"],
                     self.epochs, epoch["loss"], epoch["accuracy"], 100 * val_eer, " best" if is_best else "",
                     epoch["seconds"])
        state.update(epoch=state["epoch"] + 1, step=0, loss_sum=0.0, correct=0, seen=0)
        self.save()


def start_from(model: nn.Module, folder: str) -> None:
    """Copy the weights of the attacker or SpeechBrain ECAPA folder `folder` (`attacker.init`)
    into `model`, whose architecture must be the folder's."""
    start = load_attacker_folder(folder)
    changed = differences(start.architecture, model.architecture)
    if changed:
        raise VpevalError(f"attacker.init={folder}: its encoder differs from attacker.model ({'; '.join(changed[:3])})")
    model.load_state_dict(start.state_dict())


def _run_identity(cfg: Attacker, model: nn.Module, cache: AudioCache, seed: int) -> dict:
    """Everything a checkpoint's numbers depend on, in checkpoint-safe types."""
    training = dataclasses.asdict(cfg.training)
    data = hashlib.sha256("\n".join(f"{utt}\t{cache.speakers[label]}" for utt, label
                                    in zip(cache.utterance_ids, cache.labels.tolist())).encode()).hexdigest()
    return {"architecture": dict(model.architecture), "head": dataclasses.asdict(cfg.head),
            "training": {key: value for key, value in training.items() if key not in OPERATIONAL_KEYS},
            "seed": int(seed), "data": data}


def _save_model(out_dir: Path, model: nn.Module, cfg: Attacker, state: Mapping[str, Any], *,
                n_speakers: int) -> None:
    """model.pt (weights only) then model.json (how to rebuild it, and where it came from)."""
    save_encoder(out_dir, model, name=cfg.name, epoch=state["best_epoch"], val_eer=state["best_eer"],
                 n_speakers=n_speakers)

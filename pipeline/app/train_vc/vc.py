"""Training recipe of the voice converter (content encoder + HiFi-GAN-NSF vocoder).

    vpeval train-vc vc --config-name small out=runs/vc_small
    vpeval train-vc vc --config-name gpu out=/scratch/vc data=librispeech data.root=...

Steps: the corpus (`data`, a conf/data config) through the pipeline's prepare stage; the
speaker encoder (`speaker_encoder.model_dir`, or an ECAPA-TDNN trained here on the corpus's
original speech by the pipeline's own split and train stages); L2-normalised utterance
embeddings; then reconstruction training on random segments: each segment is resynthesised
from its own content, F0 and utterance embedding, with multi-resolution STFT + mel L1 losses,
the VQ commitment loss, and optionally HiFi-GAN's discriminators (MPD + MSD, least squares,
feature matching). Finally the target pool (the training speakers, or `pool.source`) is
extracted and the model folder written.

`out` holds::

    checkpoint.pt        everything to resume (models, optimisers, schedulers, step, RNG states,
                         history), written atomically every `training.checkpoint_every` steps
    training_log.jsonl   one line per logged step, then one validation line
    curves/              the same values as training curves (`curves`: pipeline.runtime.curves)
    vc_model/            model.json, model.pt, speaker_encoder/, pool.pt: what `anonymizer.vc_model` names
    stages/              the prepare / split / train stage outputs of the recipe corpus

An interrupted run resumes from checkpoint.pt; batches are a pure function of (seed, step),
so on CPU a resumed run ends with the same weights as an uninterrupted one. Raising
`training.steps` continues a finished run.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import hydra
import numpy as np
import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf

from anonymizers.vc.checkpoints import WEIGHTS, build
from anonymizers.vc.content import LogMel
from pipeline.runtime.seeds import stable_seed
from anonymizers.vc.losses import (
    Discriminators,
    MelLoss,
    MultiResolutionSTFTLoss,
    discriminator_loss,
    generator_losses,
)
from anonymizers.vc.model import VoiceConverter, save_voice_converter
from anonymizers.vc.pool import (
    build_pool,
    pool_key,
    pool_utterances,
    save_pool,
    utterances_key,
)
from pipeline.app.train_vc.recipe import (
    prepared_corpus,
    speaker_encoder_dir,
    training_utterances,
    user_errors,
    utterance_embeddings,
)
from pipeline.asv.audio_cache import INT16_SCALE, build_audio_cache
from pipeline.asv.embed import load_encoder
from pipeline.core.cache import Cache
from pipeline.core.config_tree import TRAIN_VC_CONFIG_SOURCE
from pipeline.core.devices import out_of_memory, resolve_device
from pipeline.core.errors import VpevalError
from pipeline.core.layout import manifest_path
from pipeline.data.audio import read_audio
from pipeline.data.manifest import file_digest, read_manifest
from pipeline.runtime.cpus import use_usable_cpus
from pipeline.runtime.curves import CurveLogger, open_curves
from pipeline.runtime.precision import autocast_dtype
from pipeline.runtime.progress import progress
from pipeline.runtime.trainer import Trainer, write_log

log = logging.getLogger(__name__)
CHECKPOINT_FORMAT = "vpeval-vc-checkpoint-1"
# Settings that never change what a step computes: free to change on resume.
OPERATIONAL_KEYS = ("steps", "checkpoint_every", "log_every", "validation_utterances")
MODEL_DIR = "vc_model"
VALIDATION_SETS = ("dev_enrolls", "dev_trials_f", "dev_trials_m")
F0_GROSS_ERROR = 0.2  # a voiced frame's F0 is grossly wrong when off by more than 20 %


class SegmentSampler:
    """Batch `step` = (utterance indices, frame-aligned start samples), a pure function of
    (seed, step). Utterances shorter than a segment are not used."""

    def __init__(self, lengths: np.ndarray, segment: int, batch_size: int, seed: int, hop_length: int):
        self.lengths, self.segment, self.batch_size = np.asarray(lengths), int(segment), int(batch_size)
        self.seed, self.hop_length = int(seed), int(hop_length)
        self.eligible = np.flatnonzero(self.lengths >= self.segment)
        if len(self.eligible) == 0:
            raise VpevalError(f"no utterance is as long as a {segment}-sample segment "
                              f"(training.segment_seconds)")

    def batch(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(stable_seed(self.seed, f"vc-batch:{step}"))
        chosen = rng.choice(self.eligible, size=self.batch_size)
        slots = (self.lengths[chosen] - self.segment) // self.hop_length + 1
        return chosen, rng.integers(0, slots) * self.hop_length


class VCTrainer(Trainer):
    """One training run of the voice converter, a step per unit; `fit()` trains, resumes or
    finds it finished, and returns the model folder."""

    checkpoint_format, what = CHECKPOINT_FORMAT, "voice-conversion"

    def __init__(self, cfg: DictConfig, out_dir: Path, prepared: Path, device: torch.device, curves: CurveLogger):
        self.cfg, self.out_dir, self.device, self.curves = cfg, Path(out_dir), device, curves
        training = cfg.training
        self.seed = int(cfg.seed)
        self.stage_cache = Cache(self.out_dir / "stages")
        self.prepared = prepared
        self.utterances = training_utterances(self.prepared)
        self.encoder_dir = speaker_encoder_dir(cfg, self.stage_cache, self.prepared, str(device))
        self.encoder = load_encoder(self.encoder_dir, device)
        self.encoder_digest = file_digest(self.encoder_dir / WEIGHTS)
        self.embeddings = utterance_embeddings(self.utterances, self.encoder, self.encoder_dir,
                                               self.out_dir / "embeddings.pt", device=device)
        self.audio = build_audio_cache(self.utterances, self.out_dir / "audio_cache",
                                       sample_rate=int(cfg.model.sample_rate), progress=False, folder_key="out")
        self.spec = {**OmegaConf.to_container(cfg.model, resolve=True), "speaker_dim": self.encoder.embedding_dim}
        torch.manual_seed(self.seed)
        self.model: VoiceConverter = build(self.spec, Path("model"))
        self.model.to(device)
        self.sampler = SegmentSampler(self.audio.lengths, round(float(training.segment_seconds) * self.model.sample_rate),
                                      int(training.batch_size), self.seed, self.model.hop_length)
        self.amp_dtype = autocast_dtype(training.precision, device, config_key="training.precision")
        self.scaler = torch.amp.GradScaler(device.type, enabled=self.amp_dtype == torch.float16)
        optimizer = training.optimizer
        make_optimizer = lambda params: torch.optim.AdamW(  # noqa: E731
            params, lr=float(optimizer.lr), betas=tuple(optimizer.betas), weight_decay=float(optimizer.weight_decay))
        self.optimizer = make_optimizer(self.model.parameters())
        self.scheduler = torch.optim.lr_scheduler.ExponentialLR(self.optimizer, float(training.lr_decay))
        self.stft_loss = MultiResolutionSTFTLoss(training.losses.stft_resolutions).to(device)
        self.mel_loss = MelLoss(self.model.sample_rate, hop_length=self.model.hop_length).to(device)
        adversarial = training.adversarial
        self.adversarial = bool(adversarial.enabled)
        if self.adversarial:
            self.discriminators = Discriminators(**OmegaConf.to_container(adversarial.discriminator, resolve=True))
            self.discriminators.to(device)
            self.d_optimizer = make_optimizer(self.discriminators.parameters())
            self.d_scheduler = torch.optim.lr_scheduler.ExponentialLR(self.d_optimizer, float(training.lr_decay))
        self.checkpoint_path = self.out_dir / "checkpoint.pt"
        self.run_identity = self._run_identity()
        self.state = {"step": 0, "seconds": 0.0, "history": []}

    def _run_identity(self) -> dict:
        training = OmegaConf.to_container(self.cfg.training, resolve=True)
        return {"model": self.spec, "seed": self.seed,
                "training": {k: v for k, v in training.items() if k not in OPERATIONAL_KEYS},
                "data": utterances_key(self.utterances, "vc-training"),
                "speaker_encoder": self.encoder_digest}

    def checkpointed(self) -> dict:
        entries = {"model": self.model, "optimizer": self.optimizer, "scheduler": self.scheduler}
        if self.adversarial:
            entries.update(discriminators=self.discriminators, d_optimizer=self.d_optimizer,
                           d_scheduler=self.d_scheduler)
        return {**entries, "scaler": self.scaler}

    def segments(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, segment) waveforms and (B, D) their utterances' embeddings."""
        indices, starts = self.sampler.batch(step)
        offsets = self.audio.offsets[indices] + starts
        crops = np.stack([self.audio.audio[o:o + self.sampler.segment] for o in offsets]).astype(np.float32)
        waves = torch.from_numpy(crops / INT16_SCALE).to(self.device)
        return waves, torch.from_numpy(self.embeddings[indices]).to(self.device)

    def autocast(self):
        return torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None)

    def train_step(self, step: int) -> dict:
        training = self.cfg.training
        waves, speaker = self.segments(step)
        num_samples = torch.full((len(waves),), waves.shape[1], device=self.device)
        with self.autocast():
            output, vq_loss = self.model(waves, num_samples, speaker)
        output = output.float()[:, :waves.shape[1]]
        stft = self.stft_loss(output, waves)
        mel = self.mel_loss(output, waves)
        loss = float(training.losses.stft_weight) * stft + float(training.losses.mel_weight) * mel + vq_loss
        record = {"stft": stft.item(), "mel": mel.item(), "vq": vq_loss.item()}
        adversarial = training.adversarial
        if self.adversarial and step >= int(adversarial.start_step):
            with self.autocast():
                d_loss = discriminator_loss(self.discriminators(waves), self.discriminators(output.detach()))
            self.d_optimizer.zero_grad(set_to_none=True)
            self.scaler.scale(d_loss).backward()
            self.scaler.step(self.d_optimizer)
            self.d_scheduler.step()
            with self.autocast():
                gan, matching = generator_losses(self.discriminators(waves), self.discriminators(output))
            loss = loss + float(adversarial.weight) * gan + float(adversarial.feature_matching) * matching
            record.update(discriminator=d_loss.item(), adversarial=gan.item(), feature_matching=matching.item())
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), float(training.grad_clip))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        return {**record, "loss": loss.item()}

    def on_fit_start(self) -> None:
        steps, state = int(self.cfg.training.steps), self.state
        self.model_dir = self.out_dir / MODEL_DIR
        self.already_done = state["step"] >= steps and (self.model_dir / "model.json").is_file()
        if self.already_done:
            return
        self.model.train()
        self.bar = progress(logger=log, total=steps, initial=state["step"], desc="vc training")
        self.started = time.monotonic()

    def on_fit_stop(self) -> None:
        if not self.already_done:
            self.bar.close()

    def finished(self) -> bool:
        return self.already_done or self.state["step"] >= int(self.cfg.training.steps)

    def fit_unit(self) -> None:
        """One training step; logs every `log_every` steps, checkpoints every `checkpoint_every`."""
        training, state = self.cfg.training, self.state
        steps = int(training.steps)
        checkpoint_every = int(training.checkpoint_every or 0)
        log_every = max(1, int(training.log_every))
        try:
            record = self.train_step(state["step"])
        except torch.OutOfMemoryError as error:  # one line naming the batch, never a traceback (never split)
            advice = ("lower training.batch_size or training.segment_seconds (either changes the result)"
                      + (", or set training.precision=bf16" if self.device.type == "cuda" and not self.amp_dtype
                         else ""))
            raise out_of_memory(error, self.device, f"a voice-conversion training step of {self.sampler.batch_size} "
                                f"segments of {float(training.segment_seconds):g} s",
                                f"training.batch_size={int(training.batch_size)}", advice) from None
        state["step"] += 1
        self.bar.update(1)
        if state["step"] % log_every == 0 or state["step"] == steps:
            state["history"].append({"step": state["step"], **{k: round(v, 5) for k, v in record.items()},
                                     "lr": self.scheduler.get_last_lr()[0],
                                     "seconds": round(state["seconds"] + time.monotonic() - self.started, 2)})
            self.bar.set_postfix(loss=f"{record['loss']:.3f}", mel=f"{record['mel']:.3f}")
            self.curves.log(state["step"], **{f"train/{key}": value for key, value in record.items()},
                            **{"train/lr": self.scheduler.get_last_lr()[0]})
        if checkpoint_every and state["step"] % checkpoint_every == 0 and state["step"] < steps:
            self.save_progress(self.started)
            self.started = time.monotonic()

    def on_fit_end(self) -> Path:
        """Validate, write the log and the model folder (unless the run was already done)."""
        if self.already_done:
            return self.model_dir
        state = self.state
        state["seconds"] += time.monotonic() - self.started
        self.save()  # before validation, which draws excitation noise from the RNG
        validation = self.validate()
        self.curves.log(state["step"], **{f"validation/{key}": value for key, value in validation.items()
                                          if key != "utterances"})
        write_log(self.out_dir / "training_log.jsonl", [*state["history"], {"validation": validation}])
        self.write_model(self.model_dir, validation)
        return self.model_dir

    def save_progress(self, started: float) -> None:
        self.state["seconds"] += time.monotonic() - started
        write_log(self.out_dir / "training_log.jsonl", self.state["history"])
        self.save()

    @torch.no_grad()
    def validate(self) -> dict:
        """Reconstruction quality on held-out speakers (the corpus's dev utterances):
        log-mel L1, F0 gross-error rate and voicing agreement, ECAPA cosine to the original."""
        utterances = sorted((u for name in VALIDATION_SETS for u in read_manifest(manifest_path(self.prepared, name))),
                            key=lambda u: u.id)[:int(self.cfg.training.validation_utterances)]
        self.model.eval()
        mel = LogMel(self.model.sample_rate, hop_length=self.model.hop_length).to(self.device)
        totals = {"mel_l1": 0.0, "f0_gross_error": 0.0, "voicing_agreement": 0.0, "speaker_cosine": 0.0}
        for utt in utterances:
            wave = torch.from_numpy(read_audio(utt.path, self.model.sample_rate)).to(self.device)[None]
            count = torch.tensor([wave.shape[1]], device=self.device)
            speaker = F.normalize(self.encoder(wave, None), dim=-1)
            analysis = self.model.analyse(wave, count)  # what forward() does, keeping the input's F0
            f0, voiced = analysis.f0, analysis.voiced
            output = self.model.synthesise(analysis.content.features, f0, voiced, speaker,
                                           analysis.frames)[:, :wave.shape[1]]
            totals["mel_l1"] += F.l1_loss(mel(output), mel(wave)).item()
            f0_out, voiced_out = self.model.pitch(output, count)
            both = voiced & voiced_out
            totals["f0_gross_error"] += ((f0_out[both] / f0[both] - 1).abs() > F0_GROSS_ERROR).float().mean().nan_to_num().item()
            totals["voicing_agreement"] += (voiced == voiced_out).float().mean().item()
            totals["speaker_cosine"] += F.cosine_similarity(F.normalize(self.encoder(output, None), dim=-1), speaker).item()
        self.model.train()
        return {"utterances": len(utterances), **{k: round(v / max(len(utterances), 1), 4) for k, v in totals.items()}}

    def write_model(self, model_dir: Path, validation: dict) -> None:
        pool_cfg = self.cfg.pool
        utterances = (pool_utterances(pool_cfg.source, pool_cfg.get("subsets")) if pool_cfg.get("source")
                      else self.utterances)
        key = pool_key(utterances, self.encoder_digest, self.model.pitch)
        save_pool(model_dir / "pool.pt", build_pool(utterances, self.encoder, self.model.pitch, key, device=self.device))
        self.model.eval()
        save_voice_converter(model_dir, self.model, self.spec, self.encoder_dir, {
            "steps": self.state["step"], "training_seconds": round(self.state["seconds"], 1),
            "device": str(self.device), "validation": validation})


def train_vc(cfg: DictConfig, out_dir: str | Path, device: str | torch.device = "auto") -> Path:
    """Train (or resume, or find finished) the recipe; returns the model folder."""
    device = device if isinstance(device, torch.device) else resolve_device(str(device))
    prepared = prepared_corpus(cfg, Cache(Path(out_dir) / "stages"))  # a bad corpus stops before anything is written
    with open_curves(cfg.get("curves"), Path(out_dir) / "curves", "vc") as curves:
        return VCTrainer(cfg, Path(out_dir), prepared, device, curves).fit()


@hydra.main(config_path=TRAIN_VC_CONFIG_SOURCE, config_name="small", version_base="1.3")
def main(cfg: DictConfig) -> None:
    use_usable_cpus(log)
    with user_errors("vc"):
        model_dir = train_vc(cfg, Path(cfg.out), cfg.device)
    summary = json.loads((model_dir / "model.json").read_text())
    log.info("validation: %s", summary["validation"])
    print(model_dir, flush=True)


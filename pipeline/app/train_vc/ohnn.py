"""Training recipe of the OHNN speaker-embedding map (Miao et al. 2023; C1 of panariello2025).

    vpeval train-vc ohnn --config-name ohnn_small out=runs/ohnn vc_model=runs/vc_small/vc_model

The map is trained on the L2-normalised utterance embeddings of a corpus's training speakers,
extracted with the voice converter's own speaker encoder. Objective (ours, after Miao et al.,
whose OHNN is trained with a speaker-classification loss on the anonymised vectors plus a
loss pushing them away from the originals):

- a frozen cosine classifier over the K training speakers, its weights the speakers'
  normalised mean embeddings (so its classes are regions of the original distribution);
- every speaker k gets a fixed pseudo-speaker class pi(k) != k, a seeded derangement (within
  the speaker's gender with `same_gender_targets`);
- classification loss: additive-angular-margin softmax of OHNN(x) against pi(k), which moves
  the image of every speaker into another real speaker's region (inside the distribution,
  distinct per speaker, so speakers stay distinguishable after anonymisation);
- similarity loss: mean of max(0, cos(x, OHNN(x)) - similarity_margin), which pushes each
  image away from its source.

loss = classification + similarity_weight * similarity. The map is orthogonal whatever its
weights, so norms and angles are kept. `out` holds checkpoint.pt (resumable, atomic),
training_log.jsonl (per epoch, with held-out utterances' target accuracy and cosines), the
same values as training curves in curves/ (`curves`: pipeline.runtime.curves) and
ohnn_model/ (model.json, model.pt) for `anonymizer.ohnn_model`.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import hydra
import numpy as np
import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf

from anonymizers.vc.checkpoints import save_module
from anonymizers.vc.householder import OHNN_FORMAT, HouseholderMap
from anonymizers.vc.model import SPEAKER_ENCODER, load_voice_converter
from anonymizers.vc.pool import speaker_genders, utterances_key
from pipeline.runtime.seeds import stable_seed
from pipeline.app.train_vc.recipe import (
    prepared_corpus,
    training_utterances,
    user_errors,
    utterance_embeddings,
)
from pipeline.core.cache import Cache
from pipeline.core.config_tree import TRAIN_VC_CONFIG_SOURCE
from pipeline.core.devices import out_of_memory, resolve_device
from pipeline.core.errors import VpevalError
from pipeline.runtime.cpus import use_usable_cpus
from pipeline.runtime.curves import CurveLogger, open_curves
from pipeline.runtime.trainer import Trainer, write_log

log = logging.getLogger(__name__)
CHECKPOINT_FORMAT = "vpeval-ohnn-checkpoint-1"
MODEL_DIR = "ohnn_model"


@dataclass
class EmbeddingSet:
    """Utterance embeddings (N, D), speaker labels (N,), and per label its gender."""

    embeddings: torch.Tensor
    labels: torch.Tensor
    genders: list[str]


def pseudo_targets(genders: list[str], seed: int, same_gender: bool) -> torch.Tensor:
    """pi: speaker label -> another speaker's label (a seeded derangement, within gender)."""
    groups = {g: [k for k, gk in enumerate(genders) if gk == g] for g in sorted(set(genders))} if same_gender \
        else {"all": list(range(len(genders)))}
    targets = torch.empty(len(genders), dtype=torch.long)
    for name, members in groups.items():
        if len(members) < 2:
            raise VpevalError(f"{len(members)} training speaker(s) in group {name!r}; need 2 or more "
                              f"for distinct pseudo-speaker targets")
        order = np.random.default_rng(stable_seed(seed, f"ohnn-targets:{name}")).permutation(members)
        for i, k in enumerate(order):
            targets[k] = int(order[(i + 1) % len(order)])
    return targets


def objective(ohnn: HouseholderMap, x: torch.Tensor, labels: torch.Tensor, centroids: torch.Tensor,
              targets: torch.Tensor, *, margin: float, scale: float, similarity_weight: float,
              similarity_margin: float, mapped: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The OHNN loss on a batch of normalised embeddings (`mapped`: their images, when
    already computed); returns its parts and the total."""
    mapped = ohnn(x) if mapped is None else mapped
    cosines = F.linear(F.normalize(mapped, dim=-1), centroids)
    goal = targets[labels]
    target_cos = cosines.gather(1, goal[:, None]).clamp(-1 + 1e-6, 1 - 1e-6)
    with_margin = torch.cos(torch.acos(target_cos) + margin)
    logits = scale * cosines.scatter(1, goal[:, None], with_margin)
    classification = F.cross_entropy(logits, goal)
    source_cos = F.cosine_similarity(x, mapped, dim=-1)
    similarity = F.relu(source_cos - similarity_margin).mean()
    return {"loss": classification + similarity_weight * similarity, "classification": classification,
            "similarity": similarity, "target_accuracy": (cosines.argmax(1) == goal).float().mean(),
            "source_accuracy": (cosines.argmax(1) == labels).float().mean(), "source_cosine": source_cos.mean()}


def held_out_split(labels: torch.Tensor, fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, validation) indices: `fraction` of every speaker's utterances held out (at least one
    when the speaker has two or more)."""
    train, val = [], []
    for label in labels.unique().tolist():
        own = torch.nonzero(labels == label).flatten().numpy()
        own = np.random.default_rng(stable_seed(seed, f"ohnn-split:{label}")).permutation(own)
        count = min(len(own) - 1, max(1, round(fraction * len(own)))) if len(own) > 1 else 0
        val.extend(own[:count].tolist())
        train.extend(own[count:].tolist())
    return torch.tensor(sorted(train)), torch.tensor(sorted(val))


class OHNNTrainer(Trainer):
    """Fits a HouseholderMap to an EmbeddingSet, an epoch per unit; resumable from `checkpoint_path`."""

    checkpoint_format, what = CHECKPOINT_FORMAT, "OHNN"
    entry_labels = {"model": "OHNN"}

    def __init__(self, data: EmbeddingSet, model_spec: dict, training: dict, seed: int, checkpoint_path: Path | None,
                 device: torch.device, run_identity: dict | None = None, curves: CurveLogger | None = None):
        self.data, self.training, self.seed, self.device = data, training, int(seed), device
        self.curves = curves or CurveLogger()
        self.model_spec = model_spec
        self.ohnn = HouseholderMap(**{k: v for k, v in model_spec.items() if k != "_target_"}).to(device)
        x, labels = data.embeddings.to(device), data.labels.to(device)
        self.x, self.labels = F.normalize(x, dim=-1), labels
        speakers = len(data.genders)
        self.centroids = F.normalize(torch.stack([self.x[labels == k].mean(0) for k in range(speakers)]), dim=-1)
        self.targets = pseudo_targets(data.genders, self.seed, bool(training["same_gender_targets"])).to(device)
        self.train_index, self.val_index = held_out_split(data.labels, float(training["val_fraction"]), self.seed)
        self.optimizer = torch.optim.Adam(self.ohnn.parameters(), lr=float(training["lr"]))
        self.checkpoint_path = checkpoint_path
        self.run_identity = {"model": model_spec, "seed": self.seed, "training": dict(training), **(run_identity or {})}
        self.state = {"epoch": 0, "history": []}

    def loss_options(self) -> dict:
        t = self.training
        return {"margin": float(t["margin"]), "scale": float(t["scale"]),
                "similarity_weight": float(t["similarity_weight"]), "similarity_margin": float(t["similarity_margin"])}

    def checkpointed(self) -> dict:
        return {"model": self.ohnn, "optimizer": self.optimizer}

    @torch.no_grad()
    def evaluate(self, index: torch.Tensor) -> dict:
        """Objective parts on `index`, and how consistent each speaker's images are (mean
        cosine of a speaker's mapped utterances to their mean)."""
        if len(index) == 0:
            return {}
        index = index.to(self.device)
        images = self.ohnn(self.x[index])
        parts = objective(self.ohnn, self.x[index], self.labels[index], self.centroids, self.targets,
                          mapped=images, **self.loss_options())
        mapped = F.normalize(images, dim=-1)
        labels = self.labels[index]
        consistency = torch.stack([F.cosine_similarity(mapped[labels == k], F.normalize(mapped[labels == k].mean(0), dim=0)[None]).mean()
                                   for k in labels.unique()]).mean()
        return {**{k: round(float(v), 5) for k, v in parts.items()}, "speaker_consistency": round(float(consistency), 5)}

    def finished(self) -> bool:
        return self.state["epoch"] >= int(self.training["epochs"])

    def fit_unit(self) -> None:
        """One epoch of minibatches in a seeded order, evaluated on both splits, then checkpointed."""
        epoch, batch_size = self.state["epoch"], int(self.training["batch_size"])
        generator = torch.Generator().manual_seed(stable_seed(self.seed, f"ohnn-epoch:{epoch}"))
        order = self.train_index[torch.randperm(len(self.train_index), generator=generator)].to(self.device)
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            try:
                parts = objective(self.ohnn, self.x[batch], self.labels[batch], self.centroids, self.targets,
                                  **self.loss_options())
                self.optimizer.zero_grad(set_to_none=True)
                parts["loss"].backward()
                self.optimizer.step()  # its first call allocates Adam's state
            except torch.OutOfMemoryError as error:  # one line naming the batch, never a traceback
                raise out_of_memory(error, self.device, f"an OHNN training step of {len(batch)} embeddings",
                                    f"training.batch_size={batch_size}",
                                    "lower training.batch_size (it changes the result)") from None
        self.state["history"].append({"epoch": epoch + 1, "train": self.evaluate(self.train_index),
                                      "validation": self.evaluate(self.val_index)})
        record = self.state["history"][-1]
        self.curves.log(epoch + 1, **{f"{part}/{key}": value for part in ("train", "validation")
                                      for key, value in record[part].items()},
                        **{"train/lr": self.optimizer.param_groups[0]["lr"]})
        self.state["epoch"] = epoch + 1
        self.save()

    def on_fit_end(self) -> dict:
        """The last epoch's record (empty when no epoch was run)."""
        return self.state["history"][-1] if self.state["history"] else {}


def train_ohnn(cfg: DictConfig, out_dir: str | Path, device: str | torch.device = "auto") -> Path:
    """Train (or resume, or find finished) the OHNN recipe; returns the model folder."""
    device = device if isinstance(device, torch.device) else resolve_device(str(device))
    out_dir = Path(out_dir)
    vc_model = Path(str(cfg.vc_model))
    _, encoder, vc_spec = load_voice_converter(vc_model, device)
    prepared = prepared_corpus(cfg, Cache(out_dir / "stages"))
    utterances = training_utterances(prepared)
    embeddings = utterance_embeddings(utterances, encoder, vc_model / SPEAKER_ENCODER, out_dir / "embeddings.pt",
                                      device=device)
    genders = speaker_genders(utterances)
    speakers = sorted(genders)
    label_of = {s: k for k, s in enumerate(speakers)}
    data = EmbeddingSet(torch.from_numpy(embeddings), torch.tensor([label_of[u.speaker] for u in utterances]),
                        [genders[s] for s in speakers])
    model_spec = {**OmegaConf.to_container(cfg.model, resolve=True), "dim": encoder.embedding_dim}
    training = OmegaConf.to_container(cfg.training, resolve=True)
    with open_curves(cfg.get("curves"), out_dir / "curves", "ohnn") as curves:
        trainer = OHNNTrainer(data, model_spec, training, int(cfg.seed), out_dir / "checkpoint.pt", device,
                              {"data": utterances_key(utterances, "ohnn"),
                               "speaker_encoder": vc_spec["speaker_encoder_sha256"]}, curves)
        final = trainer.fit()
    write_log(out_dir / "training_log.jsonl", trainer.state["history"])
    model_dir = out_dir / MODEL_DIR
    save_module(model_dir, trainer.ohnn.cpu(), model_spec, {
        "format": OHNN_FORMAT, "speaker_encoder_sha256": vc_spec["speaker_encoder_sha256"],
        "epochs": trainer.state["epoch"], "speakers": len(speakers), "final": final})
    return model_dir


@hydra.main(config_path=TRAIN_VC_CONFIG_SOURCE, config_name="ohnn_small", version_base="1.3")
def main(cfg: DictConfig) -> None:
    use_usable_cpus(log)
    with user_errors("ohnn"):
        model_dir = train_ohnn(cfg, Path(cfg.out), cfg.device)
    log.info("final epoch: %s", json.loads((model_dir / "model.json").read_text())["final"])
    print(model_dir, flush=True)


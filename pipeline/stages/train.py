"""Stage 4 — train: the attacker (ECAPA-TDNN) on a split's training data.

Model selection uses the split's *selection* protocol (validation speakers disjoint from
those of the reported EER_val, see `pipeline.stages.split`): after every epoch the encoder
embeds its enrolment and trial utterances, cosine scores the trials and the epoch with the
lowest ROCCH-EER is kept. Checkpoints make an interrupted training resume where it stopped.
With a team (`distributed.gpus_per_node` / `nodes` > 1) every rank trains (DDP) and
validates its share of the validation utterances; see `pipeline.runtime.team`.

Output folder: `model.pt` (weights only), `model.json` (architecture), `training_log.jsonl`.
`imported` instead copies a pretrained encoder (`attacker.pretrained`: a SpeechBrain ECAPA
folder, e.g. a VPC 2024 ASV model, or an attacker folder) into an attacker folder.
Training curves (`curves`, see `pipeline.runtime.curves`) go to the run's folder, never to
the stage's: they are no part of its key or its result.
"""
from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from pipeline.asv.embed import embed_utterances, save_encoder
from pipeline.asv.scoring import CosineBackend, score_trials
from pipeline.asv.speechbrain_folder import folder_files, load_attacker_folder
from pipeline.asv.train import OPERATIONAL_KEYS, train_attacker
from pipeline.core.cache import Cache
from pipeline.core.layout import manifest_path, trials_path
from pipeline.core.schemas import Attacker
from pipeline.data.manifest import file_digest, read_manifest, read_trials
from pipeline.metrics import eer
from pipeline.runtime.curves import CurveLogger, open_curves
from pipeline.runtime.distributed import World
from pipeline.runtime.team import Team, run_on_ranks

VALIDATION_AUDIO = "validation_audio"  # decoded validation audio, used while training only


def validation_eer(held_out: Path, world: World, batch_seconds: float, audio_cache: Path | None = None):
    """A function encoder -> EER on the split's selection protocol (cosine scoring); on
    several ranks each embeds its share of the utterances and every rank gets the EER. With
    `audio_cache` the validation audio is decoded once, not every epoch."""
    enrolls = read_manifest(manifest_path(held_out, "select_enrolls"))
    trial_utts = read_manifest(manifest_path(held_out, "select_trials"))
    trials = read_trials(trials_path(held_out, "select_trials"))
    labels = [t.target for t in trials]

    def validate(encoder) -> float:
        kwargs = dict(batch_seconds=batch_seconds, progress=False, world=world, audio_cache=audio_cache,
                      audio_cache_key="paths.cache")
        _, enroll_emb = embed_utterances(encoder, enrolls, **kwargs)
        ids, trial_emb = embed_utterances(encoder, trial_utts, **kwargs)
        scores = score_trials(CosineBackend(), enrolls, enroll_emb, dict(zip(ids, trial_emb)), trials)
        return eer(scores[labels], scores[[not x for x in labels]])

    return validate


def train_on_rank(world: World, attacker: Attacker, held_out: Path, out: Path, seed: int, curves: dict | None) -> None:
    """This rank's part of training (all of it on a single process); rank 0 logs the curves."""
    validate = validation_eer(held_out, world, attacker.extraction.batch_seconds, audio_cache=out / VALIDATION_AUDIO)
    logger = open_curves(curves, curves["folder"], f"attacker_{out.name}", main=world.is_main) if curves \
        else CurveLogger()
    with logger:
        train_attacker(attacker, read_manifest(manifest_path(held_out, "train")), out, seed=seed, validate=validate,
                       world=world, curves=logger)


# extraction settings that do not change the trained attacker: reading threads and the audio cache
# change how fast the validation lists are embedded; the validation embeds in float32, eager,
# whatever `precision` and `compile` say (the extract stage's key holds the precision)
NOT_TRAINING_EXTRACTION_KEYS = ("workers", "audio_cache", "precision", "compile")


def run(attacker: Attacker, held_out: Path, cache: Cache, *, seed: int, device: str, team: Team | None = None,
        curves: dict | None = None) -> Path:
    """Train (or resume, or reuse) the attacker on `held_out` (a split-stage folder), on `team`'s
    ranks when given, else in this process on `device`. `attacker`: its settings
    (`attacker_settings(cfg.attacker)`). `curves`: the `curves` config and the `folder` the
    curves go to (None: no curves)."""
    # pretrained (never trained here), an unset init and finetune (init decides it) are left out, so that
    # they do not change the folder
    settings = asdict(attacker)
    params = {**{k: v for k, v in settings.items() if k not in ("name", "pretrained", "init", "finetune")},
              "training": {k: v for k, v in settings["training"].items() if k not in OPERATIONAL_KEYS},
              "extraction": {k: v for k, v in settings["extraction"].items() if k not in NOT_TRAINING_EXTRACTION_KEYS},
              "seed": seed}
    inputs = {name: file_digest(manifest_path(held_out, name)) for name in ("train", "select_enrolls", "select_trials")}
    inputs["select_trial_list"] = file_digest(trials_path(held_out, "select_trials"))
    if attacker.init:
        params["init"] = str(attacker.init)
        inputs["init"] = {path.name: file_digest(path) for path in folder_files(attacker.init)}
    inputs |= model_weight_files(attacker.model)

    def build(out: Path) -> dict:
        run_on_ranks(team, device, train_on_rank, attacker=attacker, held_out=held_out, out=out, seed=seed,
                     curves=curves)
        # its sub-folders are keyed by the audio files' paths and times: not part of the result
        shutil.rmtree(out / VALIDATION_AUDIO, ignore_errors=True)
        return {"attacker": attacker.name}

    return cache.build("train", params, inputs, build, code=__name__)


def model_weight_files(model: Mapping) -> dict:
    """Digests of the files the model's path arguments name (e.g. ecapa_ssl's frozen WavLM), so
    that another file at the same path is another attacker: {"model.<key>": digest(s)}."""
    found = {}
    for key, value in model.items():
        path = Path(value) if isinstance(value, str) else None
        if path is not None and path.is_file():
            found[f"model.{key}"] = file_digest(path)
        elif path is not None and path.is_dir():
            found[f"model.{key}"] = {str(p.relative_to(path)): file_digest(p) for p in sorted(path.rglob("*"))
                                     if p.is_file()}
    return found


def imported(folder: str, cache: Cache) -> Path:
    """An attacker folder holding the encoder of `folder` (SpeechBrain ECAPA or attacker folder),
    checked and converted once (cached by the folder's file contents)."""
    encoder = load_attacker_folder(folder)  # every check (and its one-line error) before the cache

    def build(out: Path) -> dict:
        save_encoder(out, encoder, name=f"imported:{Path(folder).name}", source=str(folder))
        return {"source": str(folder)}

    inputs = {path.name: file_digest(path) for path in folder_files(folder)}
    return cache.build("import", {"frontend": encoder.architecture["frontend"]}, inputs, build, code=__name__)

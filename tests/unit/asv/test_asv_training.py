"""Audio cache, crops, training (learning, resume, best model, bad checkpoints), extraction, configs.

The toy corpus (the `corpus` fixture of conftest.py): a few synthetic "speakers", harmonic voices
with their own F0 range, vocal tract length (formant scale) and spectral tilt; each utterance
varies pitch, formants and rhythm (`tests.helpers.toy_voice`). Written as 16-bit FLAC.
"""
import json
import pickle
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from pipeline.asv.audio_cache import build_audio_cache, open_audio_cache
from pipeline.asv.crops import CropBatches, CropPlan, take_context, take_crops
from pipeline.asv.embed import extract_embeddings, length_buckets, load_encoder
from pipeline.asv.model import SpeakerEncoder
from pipeline.asv.scoring import length_normalise
from pipeline.asv.train import attacker_settings, train_attacker
from pipeline.core.cache import content_hash
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.core.fileio import write_text
from pipeline.core.layout import manifest_path, trials_path
from pipeline.core.schemas import Attacker, Training
from pipeline.data.audio import read_audio, write_audio
from pipeline.data.manifest import Utterance
from pipeline.stages import extract as extract_stage
from pipeline.stages import train as train_stage
from tests.helpers import TOY_RATE, attacker_config, read_log, typed_attacker, validation_eer

# Tiny-config overrides used by every training run here: 4 steps per epoch, a mid-epoch
# checkpoint every 3 steps.
RUN_OVERRIDES = ["attacker.training.batch_size=8", "attacker.training.epochs=4", "attacker.training.checkpoint_every=3"]


pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory) -> Path:
    """One uninterrupted tiny training run."""
    train, val = corpus
    out_dir = tmp_path_factory.mktemp("trained")
    cfg = typed_attacker(overrides=tuple(RUN_OVERRIDES))
    return train_attacker(cfg, train, out_dir, device="cpu", seed=1986,
                          validate=lambda encoder: validation_eer(encoder, val))


# --- audio cache and crops -------------------------------------------------------------------

def test_audio_cache_round_trip_and_reuse(corpus, tmp_path):
    train, _ = corpus
    cache = build_audio_cache(train, tmp_path / "cache", workers=2, progress=False)
    assert cache.audio.dtype == np.int16 and isinstance(cache.audio, np.memmap)
    assert cache.utterance_ids == [utt.id for utt in train]
    assert cache.speakers == sorted({utt.speaker for utt in train})
    for index, utt in enumerate(train):
        np.testing.assert_array_equal(cache.waveform(index), read_audio(utt.path, TOY_RATE))
        assert cache.speakers[cache.labels[index]] == utt.speaker
    written = (tmp_path / "cache" / "audio.npy").stat().st_mtime_ns
    again = build_audio_cache(train, tmp_path / "cache", workers=2, progress=False)
    assert (tmp_path / "cache" / "audio.npy").stat().st_mtime_ns == written
    np.testing.assert_array_equal(again.offsets, cache.offsets)
    fewer = build_audio_cache(train[1:], tmp_path / "cache", workers=2, progress=False)
    assert fewer.utterance_ids == [utt.id for utt in train[1:]]
    assert open_audio_cache(tmp_path / "cache").offsets[-1] == cache.offsets[-1] - len(cache.waveform(0))


def test_unreadable_audio_stops_the_cache_with_the_file_named(corpus, tmp_path):
    bad = tmp_path / "bad.flac"
    bad.write_bytes(b"not audio")
    utts = [*corpus[0][:2], Utterance("bad", "s9", "f", str(bad), 1.0)]
    with pytest.raises(VpevalError, match="bad.flac"):
        build_audio_cache(utts, tmp_path / "cache", workers=2, progress=False)
    assert not (tmp_path / "cache" / "cache.json").exists()


def test_crops_are_reproducible_from_seed_epoch_and_step():
    lengths = np.array([5000, 12000, 30000, 800, 16000])
    plan = CropPlan(lengths, crop_samples=4000, batch_size=4, seed=11, examples_per_epoch="chunks")
    assert len(plan.examples) == 1 + 3 + 7 + 1 + 4 and plan.steps_per_epoch == 4
    again = CropPlan(lengths, crop_samples=4000, batch_size=4, seed=11, examples_per_epoch="chunks")
    for epoch, step in [(0, 0), (0, 3), (2, 1)]:
        for first, second in zip(plan.batch(epoch, step), again.batch(epoch, step)):
            np.testing.assert_array_equal(first, second)
    assert not np.array_equal(plan.batch(0, 0)[1], plan.batch(1, 0)[1]) or \
        not np.array_equal(plan.batch(0, 0)[0], plan.batch(1, 0)[0])
    with pytest.raises(VpevalError, match=r"^attacker.training.batch_size=0: must be an integer >= 1$"):  # the setting's rule
        CropPlan(lengths, crop_samples=4000, batch_size=0, seed=11)
    epoch_utterances = np.concatenate([plan.batch(0, step)[0] for step in range(plan.steps_per_epoch)])
    assert len(epoch_utterances) == 16 and np.bincount(epoch_utterances, minlength=5).tolist() == [1, 3, 7, 1, 4]
    per_utterance = CropPlan(lengths, crop_samples=4000, batch_size=2, seed=11, examples_per_epoch="utterances")
    assert per_utterance.steps_per_epoch == 2  # 5 examples, last incomplete batch dropped
    with pytest.raises(IndexError):
        plan.batch(0, plan.steps_per_epoch)


def test_crop_contents_and_short_utterances_wrap():
    audio = np.arange(100, dtype=np.int16)
    offsets = np.array([0, 60, 100])  # utterance 0: 0..59, utterance 1: 60..99 (shorter than the crop)
    crops = take_crops(audio, offsets, np.array([0, 1]), np.array([7, 30]), crop_samples=50)
    np.testing.assert_array_equal(crops[0], np.arange(7, 57))
    np.testing.assert_array_equal(crops[1], 60 + (30 + np.arange(50)) % 40)


def test_contexts_are_whole_utterance_normalised_then_cut_or_padded():
    """VPC 2026's fine-tuning WavLM input: layer_norm over the whole file, then a random
    segment (uniform start) or zero padding."""
    rng = np.random.default_rng(0)
    audio = (rng.standard_normal(300) * 3000 + 500).astype(np.int16)
    offsets = np.array([0, 200, 300])  # utterance 0: 200 samples, utterance 1: 100 (shorter than the context)
    contexts = take_context(audio, offsets, np.array([0, 1]), np.array([37, 0]), 150, normalize=True)
    for row, (utt, start) in enumerate([(0, 37), (1, 0)]):
        whole = torch.from_numpy(audio[offsets[utt]:offsets[utt + 1]].astype(np.float32) / 32768)
        expected = torch.nn.functional.layer_norm(whole, whole.shape)[start:start + 150]
        torch.testing.assert_close(torch.from_numpy(contexts[row, :len(expected)]), expected, rtol=0, atol=1e-6)
    assert not contexts[1, 100:].any()
    plan = CropPlan(np.array([200, 100]), crop_samples=50, batch_size=2, seed=5)
    utterances, _ = plan.batch(0, 0)
    starts = plan.context_starts(0, 0, utterances, 150)
    np.testing.assert_array_equal(starts, CropPlan(np.array([200, 100]), 50, 2, 5).context_starts(0, 0, utterances, 150))
    assert all(0 <= start <= max(plan.lengths[u] - 150, 0) for u, start in zip(utterances, starts))


def test_crop_batches_are_the_plan_and_pickle_without_audio(corpus, tmp_path):
    cache = build_audio_cache(corpus[0], tmp_path / "cache", workers=2, progress=False)
    plan = CropPlan(cache.lengths, 8000, 5, seed=3)
    batches = CropBatches(cache.folder, cache.offsets, cache.labels, plan, epoch=2)
    crops, labels = batches[1]
    utterances, starts = plan.batch(2, 1)
    assert crops.shape == (5, 8000) and crops.dtype == torch.int16
    np.testing.assert_array_equal(labels.numpy(), cache.labels[utterances])
    np.testing.assert_array_equal(crops[0].numpy(), cache.audio[cache.offsets[utterances[0]] + starts[0]:][:8000])
    copy = pickle.loads(pickle.dumps(batches))
    assert copy._audio is None
    np.testing.assert_array_equal(copy[1][0].numpy(), crops.numpy())
    with_context = CropBatches(cache.folder, cache.offsets, cache.labels, plan, epoch=2, context=(12000, True))
    crops_too, _, contexts = with_context[1]
    assert torch.equal(crops_too, crops) and contexts.shape == (5, 12000) and contexts.dtype == torch.float32
    expected = take_context(cache.audio, cache.offsets, utterances, plan.context_starts(2, 1, utterances, 12000),
                            12000, normalize=True)
    np.testing.assert_array_equal(contexts.numpy(), expected)


# --- training --------------------------------------------------------------------------------

def test_tiny_training_learns_the_toy_speakers(trained, corpus):
    log = read_log(trained / "training_log.jsonl")
    assert [record["epoch"] for record in log] == [1, 2, 3, 4]
    assert log[-1]["accuracy"] > log[0]["accuracy"] + 0.2
    assert log[-1]["loss"] < log[0]["loss"]
    best = min(record["val_eer"] for record in log)
    assert best < 0.25  # chance is 0.5
    encoder = load_encoder(trained, "cpu")
    assert validation_eer(encoder, corpus[1]) == pytest.approx(best)
    untrained = SpeakerEncoder(**{k: v for k, v in attacker_config().model.items() if k != "_target_"}).eval()
    assert validation_eer(untrained, corpus[1]) > best


def test_finished_run_is_not_trained_again(trained, corpus):
    def must_not_validate(encoder):
        raise AssertionError("a finished run trained again")

    cfg = typed_attacker(overrides=tuple(RUN_OVERRIDES))
    assert train_attacker(cfg, corpus[0], trained, device="cpu", seed=1986,
                          validate=must_not_validate) == trained


def test_interrupted_run_resumes_mid_epoch_to_the_same_model(trained, corpus, tmp_path, monkeypatch):
    train, val = corpus
    cfg = typed_attacker(overrides=tuple(RUN_OVERRIDES))
    fetch = CropBatches.__getitem__
    calls = []

    def killed_at_the_eighth_batch(self, step):
        calls.append((self.epoch, step))
        if len(calls) == 8:
            raise KeyboardInterrupt("simulated kill")
        return fetch(self, step)

    with monkeypatch.context() as patch:
        patch.setattr(CropBatches, "__getitem__", killed_at_the_eighth_batch)
        with pytest.raises(KeyboardInterrupt):
            train_attacker(cfg, train, tmp_path, device="cpu", seed=1986,
                           validate=lambda encoder: validation_eer(encoder, val))
    checkpoint = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert (checkpoint["epoch"], checkpoint["step"]) == (1, 2)  # mid-epoch: 6 steps done, 4 per epoch

    fetches, validations = [], []

    def killed_in_the_second_validation(encoder):
        validations.append(1)
        if len(validations) == 2:
            raise KeyboardInterrupt("simulated kill")
        return validation_eer(encoder, val)

    with monkeypatch.context() as patch:
        patch.setattr(CropBatches, "__getitem__",
                      lambda self, step: fetches.append((self.epoch, step)) or fetch(self, step))
        with pytest.raises(KeyboardInterrupt):
            train_attacker(cfg, train, tmp_path, device="cpu", seed=1986,
                           validate=killed_in_the_second_validation)
        assert fetches[0] == (1, 2)  # consumed batches skipped
        checkpoint = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
        assert (checkpoint["epoch"], checkpoint["step"]) == (2, 4)  # every batch of epoch 3 done, not validated
        fetches.clear()
        train_attacker(cfg, train, tmp_path, device="cpu", seed=1986,
                       validate=lambda encoder: validation_eer(encoder, val))
        assert fetches[0] == (3, 0)  # went straight to epoch 3's validation, then on

    uninterrupted = torch.load(trained / "model.pt", weights_only=True)
    resumed = torch.load(tmp_path / "model.pt", weights_only=True)
    assert uninterrupted.keys() == resumed.keys()
    for name in uninterrupted:
        assert torch.equal(uninterrupted[name], resumed[name]), name
    final_a = torch.load(trained / "checkpoint.pt", weights_only=True)
    final_b = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    for name in final_a["head"]:
        assert torch.equal(final_a["head"][name], final_b["head"][name])
    for key in ("loss", "accuracy", "lr", "val_eer", "best"):
        assert [r[key] for r in read_log(trained / "training_log.jsonl")] == \
            [r[key] for r in read_log(tmp_path / "training_log.jsonl")], key


def test_best_validation_model_is_kept(corpus, tmp_path):
    cfg = typed_attacker(overrides=(*RUN_OVERRIDES, "attacker.training.epochs=3"))
    scripted = iter([0.30, 0.10, 0.10])
    snapshots = []

    def validate(encoder):
        snapshots.append({name: tensor.clone() for name, tensor in encoder.state_dict().items()})
        return next(scripted)

    train_attacker(cfg, corpus[0], tmp_path, device="cpu", seed=1986, validate=validate)
    kept = torch.load(tmp_path / "model.pt", weights_only=True)
    assert all(torch.equal(kept[name], snapshots[1][name]) for name in kept)
    assert not all(torch.equal(kept[name], snapshots[2][name]) for name in kept)  # a tie does not replace
    described = json.loads((tmp_path / "model.json").read_text())
    assert described["epoch"] == 2 and described["val_eer"] == 0.10 and described["name"] == "ecapa_tiny"
    assert [record["best"] for record in read_log(tmp_path / "training_log.jsonl")] == [True, True, False]


def test_checkpoint_of_another_architecture_is_refused(trained, corpus, tmp_path):
    shutil.copy(trained / "checkpoint.pt", tmp_path / "checkpoint.pt")
    cfg = typed_attacker(overrides=(*RUN_OVERRIDES, "attacker.model.channels=[32,32,32,64,96]"))
    with pytest.raises(VpevalError, match=r"checkpoint\.pt: model is from another architecture: .*shape mismatches"
                                          r" \[.*expected .* found"):
        train_attacker(cfg, corpus[0], tmp_path, device="cpu", seed=1986, validate=lambda e: 0.0)
    cfg = typed_attacker(overrides=(*RUN_OVERRIDES, "attacker.model.dilations=[1,2,3,3,1]"))
    with pytest.raises(VpevalError, match=r"other settings \(architecture\.dilations: \[1, 2, 3, 4, 1\] -> "):
        train_attacker(cfg, corpus[0], tmp_path, device="cpu", seed=1986, validate=lambda e: 0.0)
    with pytest.raises(VpevalError, match=r"training\.epochs: 4 -> 5"):
        train_attacker(typed_attacker(overrides=(*RUN_OVERRIDES, "attacker.training.epochs=5")), corpus[0],
                       tmp_path, device="cpu", seed=1986, validate=lambda e: 0.0)

    shutil.copy(trained / "model.pt", tmp_path / "model.pt")
    other = attacker_config(overrides=("attacker.model.embedding_dim=16",)).model
    (tmp_path / "model.json").write_text(json.dumps({"model": OmegaConf.to_container(other)}))
    with pytest.raises(VpevalError, match=r"model\.pt: model is from another architecture: .*"
                                          r"ecapa\.fc\.conv\.weight: expected \(16, 192, 1\) found \(32, 192, 1\)"):
        load_encoder(tmp_path, "cpu")


def test_checkpoint_with_a_pickled_object_is_refused(trained, corpus, tmp_path):
    torch.save({"format": "vpeval-asv-checkpoint-1", "note": Fraction(1, 3)}, tmp_path / "checkpoint.pt")
    cfg = typed_attacker(overrides=tuple(RUN_OVERRIDES))
    with pytest.raises(VpevalError, match=r"checkpoint\.pt: refused to load"):
        train_attacker(cfg, corpus[0], tmp_path, device="cpu", seed=1986, validate=lambda e: 0.0)
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "model.json").write_text((trained / "model.json").read_text())
    torch.save({"weights": Fraction(2, 3)}, model_dir / "model.pt")
    with pytest.raises(VpevalError, match=r"model\.pt: refused to load"):
        load_encoder(model_dir, "cpu")


# --- extraction ------------------------------------------------------------------------------

def test_extraction_does_not_depend_on_batching(trained, corpus):
    utts = corpus[1] + corpus[0][:6]
    ids, one_by_one = extract_embeddings(trained, utts, device="cpu", batch_seconds=0.1, progress=False)
    assert ids == [utt.id for utt in utts] and one_by_one.dtype == np.float32 and one_by_one.shape == (24, 32)
    _, batched = extract_embeddings(trained, utts, device="cpu", batch_seconds=30, progress=False)
    _, middle = extract_embeddings(trained, utts, device="cpu", batch_seconds=5, progress=False)
    np.testing.assert_allclose(batched, one_by_one, rtol=0, atol=1e-5)
    np.testing.assert_allclose(middle, one_by_one, rtol=0, atol=1e-5)


def test_length_buckets_respect_the_budget():
    durations = np.random.default_rng(2).uniform(0.5, 6.0, size=50).tolist()
    batches = length_buckets(durations, batch_seconds=12.0)
    assert sorted(i for batch in batches for i in batch) == list(range(50))
    for batch in batches:
        assert len(batch) == 1 or len(batch) * max(durations[i] for i in batch) <= 12.0


def test_too_short_utterance_names_the_file(trained, tmp_path):
    path = write_audio(tmp_path / "click.flac", np.zeros(100, dtype=np.float32), TOY_RATE)
    with pytest.raises(VpevalError, match="click.flac: utterance 'click' has 100 samples"):
        extract_embeddings(trained, [Utterance("click", "x", "f", str(path), 0.006)], device="cpu", progress=False)


# --- configs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ecapa", "ecapa_vpc2024", "ecapa_small", "ecapa_tiny"])
def test_attacker_configs_compose_and_instantiate(name):
    cfg = attacker_config(name)
    assert cfg.name == name
    model = instantiate(cfg.model)
    assert isinstance(model, SpeakerEncoder)
    optimizer = instantiate(cfg.training.optimizer)(model.parameters())
    scheduler = instantiate(cfg.training.scheduler)(optimizer, total_steps=100)
    for _ in range(100):
        optimizer.step()
        scheduler.step()
    assert cfg.training.precision in ("fp32", "bf16", "fp16")
    assert cfg.extraction.batch_seconds > 0


def test_ecapa_config_has_the_vpc_2024_sizes():
    cfg = attacker_config("ecapa")
    assert list(cfg.model.channels) == [512, 512, 512, 512, 1536] and cfg.model.embedding_dim == 192
    assert cfg.model.n_mels == 80 and (cfg.head.margin, cfg.head.scale) == (0.2, 30.0)
    training = cfg.training
    assert (training.epochs, training.batch_size, training.crop_seconds) == (10, 256, 3.0)
    assert (training.optimizer.lr, training.optimizer.weight_decay) == (0.01, 2e-6)
    vpc = attacker_config("ecapa_vpc2024").training.scheduler
    assert (vpc.base_lr, vpc.step_size_up, vpc._target_) == (1e-8, 65000, "pipeline.asv.schedules.cyclic")
    assert cfg.model.frontend._target_ == "pipeline.asv.features.KaldiFbank"
    assert attacker_config("ecapa_vpc2024").model.frontend._target_ == "pipeline.asv.speechbrain_fbank.SpeechBrainFbank"


def test_attacker_settings_are_one_typed_object_that_crosses_to_the_ranks_as_it_is():
    settings = typed_attacker(overrides=("attacker.training.crop_seconds=2",))
    assert isinstance(settings, Attacker) and isinstance(settings.training, Training)
    assert settings.training.crop_seconds == 2.0 and isinstance(settings.training.crop_seconds, float)
    assert settings.model["_target_"] == "pipeline.asv.model.SpeakerEncoder"  # plugins: plain dicts
    assert pickle.loads(pickle.dumps(settings)) == settings  # what a team task carries


class KeyOnly:
    """A cache that records the key a stage asks for and builds nothing."""

    def build(self, stage, params, inputs, builder, *, code):
        self.params, self.inputs = params, inputs
        return Path("unbuilt")


def test_the_train_stage_keys_its_typed_settings(tmp_path):
    """The train stage's folder is keyed by the typed settings (issue 39): a number written as an
    integer or as a float is one key (the config as written gave two folders for one attacker); a
    setting that changes training is another key; operational settings are not in it."""
    for name in ("train", "select_enrolls", "select_trials"):
        write_text(manifest_path(tmp_path, name), f"{name}\n")
    write_text(trials_path(tmp_path, "select_trials"), "trials\n")

    def key(*overrides: str) -> tuple[str, str]:
        cfg, cache = compose(list(overrides)), KeyOnly()
        train_stage.run(attacker_settings(cfg.attacker), tmp_path, cache, seed=cfg.seed, device="cpu")
        return content_hash(cache.params), content_hash(cache.inputs)

    base = key()  # crop_seconds: 2.0 in the config
    assert key("attacker.training.crop_seconds=2") == base  # as written, a096f744... and 7d36905c...
    assert key("attacker.training.crop_seconds=3") == key("attacker.training.crop_seconds=3.0") != base
    assert key("attacker.training.num_workers=3", "attacker.training.log_every=7") == base
    assert key("attacker.training.epochs=5")[0] != base[0] and key("seed=7") != base
    # regression: extraction's reading threads, audio-cache folder and precision keyed the attacker, so
    # giving the evaluation an audio cache, or embedding in bf16, retrained it (the validation embeds in
    # float32 whatever the precision; the extract stage keys it, below); its batches still do
    assert key("attacker.extraction.workers=7", "attacker.extraction.audio_cache=/tmp/decoded") == base
    assert key("attacker.extraction.precision=bf16", "attacker.extraction.compile=true") == base
    assert key("attacker.extraction.batch_seconds=100")[0] != base[0]


def test_an_attacker_config_written_before_extraction_compile_still_loads():
    """Regression: the new key was required, so a user's attacker config without it (the
    architecture table's toy attacker) stopped with "attacker.extraction.compile: required"."""
    from pipeline.core.schemas import Extraction, typed

    extraction = typed({"batch_seconds": 30, "precision": "fp32", "workers": 2, "audio_cache": None}, Extraction,
                       "attacker.extraction")
    assert extraction.compile is None


def test_the_extract_stage_keys_the_precision_not_the_speed_settings(tmp_path):
    """bf16 embeddings are other numbers than float32 ones: another extract folder of the same
    attacker (the precision used to key the attacker folder instead, retraining it)."""
    manifest = write_text(tmp_path / "trials.txt", "utterances\n")

    def key(*overrides: str) -> str:
        cache = KeyOnly()
        extract_stage.run(tmp_path / "attacker", manifest, cache, device="cpu",
                          extraction=attacker_settings(compose(list(overrides)).attacker).extraction)
        return content_hash({"params": cache.params, "inputs": cache.inputs})

    base = key()
    assert key("attacker.extraction.precision=bf16") != base
    assert key("attacker.extraction.workers=7", "attacker.extraction.audio_cache=/tmp/decoded",
               "attacker.extraction.batch_seconds=100", "attacker.extraction.compile=reduce-overhead") == base


@pytest.mark.gpu
def test_tiny_training_and_extraction_on_cuda_in_bf16(corpus, tmp_path):
    train, val = corpus
    cfg = typed_attacker(overrides=(*RUN_OVERRIDES, "attacker.training.precision=bf16",
                                    "attacker.training.num_workers=2"))
    model_dir = train_attacker(cfg, train, tmp_path, device="cuda", seed=1986,
                               validate=lambda encoder: validation_eer(encoder, val))
    log = read_log(model_dir / "training_log.jsonl")
    assert all(np.isfinite(record["loss"]) for record in log) and log[-1]["accuracy"] > log[0]["accuracy"]
    _, on_cpu = extract_embeddings(model_dir, val, device="cpu", progress=False)
    _, on_gpu = extract_embeddings(model_dir, val, device="cuda", precision="bf16", progress=False)
    cosine = (length_normalise(on_cpu) * length_normalise(on_gpu)).sum(axis=1)
    assert cosine.min() > 0.99

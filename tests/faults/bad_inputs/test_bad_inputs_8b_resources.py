"""Bad inputs: a corpus or a batch too big for the machine (disk, device memory; issue 36)."""
import shutil
from collections import namedtuple

import pytest
import torch

from pipeline.asv import audio_cache
from anonymizers.vc.model import VoiceConverter
from pipeline.app.train_vc.ohnn import EmbeddingSet, OHNNTrainer
from pipeline.app.train_vc.vc import train_vc
from pipeline.asv.audio_cache import build_audio_cache, cache_bytes
from pipeline.asv.embed import embed_utterances
from pipeline.asv.model import SpeakerEncoder
from pipeline.asv.train import _TrainingStep, train_attacker
from tests.faults.bad_inputs.catalogue import RATE, raised, record
from tests.faults.bad_inputs.conftest import utt
from tests.helpers import encoder_folder, training_config, typed_attacker

OOM = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB"


def utterances(tmp_path):
    return [utt(tmp_path, f"{speaker}-{index}", speaker, "f") for speaker in ("t1", "t2") for index in range(3)]


def test_audio_cache_larger_than_the_free_disk_space(tmp_path, monkeypatch):
    utts = utterances(tmp_path)
    folder = tmp_path / "cache" / "audio_cache"
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10 ** 9, 10 ** 9 - 20_000, 20_000))
    monkeypatch.setattr(audio_cache, "read_audio", lambda *args: pytest.fail("decoded before the space check"))
    message = raised(build_audio_cache, utts, folder, sample_rate=RATE, folder_key="attacker.training.cache_dir")
    assert not folder.exists()
    record("disk-space-cache", "a corpus whose decoded audio cache would not fit the free disk space",
           "audio cache (before decoding; training, validation, extraction)", message, tmp_path,
           "audio_cache", "needs 63.0 kB", "20.0 kB free", "attacker.training.cache_dir")
    monkeypatch.undo()
    built = build_audio_cache(utts, folder, sample_rate=RATE)  # the estimate is an upper bound
    assert (folder / "audio.npy").stat().st_size < cache_bytes(utts, RATE) and len(built) == len(utts)


def test_training_batch_larger_than_the_device_memory(tmp_path, monkeypatch):
    def out_of_memory(self, wavs, labels, context=None):
        raise torch.OutOfMemoryError(OOM)
    monkeypatch.setattr(_TrainingStep, "forward", out_of_memory)
    cfg = typed_attacker(overrides=("attacker.training.batch_size=4", "attacker.training.crop_seconds=0.25"))
    message = raised(train_attacker, cfg, utterances(tmp_path), tmp_path / "attacker", seed=1, device="cpu",
                     validate=lambda encoder: 0.5)
    record("oom-training", "a training batch that does not fit the device's memory (CUDA out of memory)",
           "train (each step; never split, which would change the result)", message, tmp_path,
           "attacker.training.batch_size=4", "4 crops", "memory", "lower attacker.training.batch_size")


def test_extraction_utterance_larger_than_the_device_memory(tmp_path, monkeypatch):
    def out_of_memory(self, wavs, lengths):
        raise torch.OutOfMemoryError(OOM)
    monkeypatch.setattr(SpeakerEncoder, "embed_samples", out_of_memory)
    encoder = SpeakerEncoder(channels=[16, 16, 48], kernel_sizes=[5, 3, 1], dilations=[1, 2, 1],
                             attention_channels=8, se_channels=8, embedding_dim=12, res2net_scale=4)
    message = raised(embed_utterances, encoder, utterances(tmp_path), batch_seconds=60, progress=False)
    record("oom-extraction", "an utterance that does not fit the device's memory even alone (batches that do "
           "not fit are split in halves first)", "extraction (each batch)", message, tmp_path,
           "attacker.extraction.batch_seconds=60", "one 0.3 s utterance", "memory", "shorter")


def test_voice_converter_training_batch_larger_than_the_device_memory(tmp_path, monkeypatch):
    def out_of_memory(self, *args, **kwargs):
        raise torch.OutOfMemoryError(OOM)
    encoder = encoder_folder(tmp_path / "encoder", SpeakerEncoder(
        channels=[16, 16, 48], kernel_sizes=[5, 3, 1], dilations=[1, 2, 1], attention_channels=8, se_channels=8,
        embedding_dim=12, res2net_scale=4))
    cfg = training_config("tiny", [f"paths.data={tmp_path / 'data'}", "out=unused",
                                   f"speaker_encoder.model_dir={encoder}", "training.steps=2"])
    monkeypatch.setattr(VoiceConverter, "forward", out_of_memory)
    message = raised(train_vc, cfg, tmp_path / "vc", device="cpu")
    assert not (tmp_path / "vc" / "model").exists()
    record("oom-train-vc", "a voice-conversion training batch that does not fit the device's memory",
           "train-vc (each step; never split)", message, tmp_path, "training.batch_size=2",
           "2 segments", "memory", "lower training.batch_size")


def test_ohnn_training_batch_larger_than_the_device_memory(tmp_path, monkeypatch):
    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError(OOM)
    monkeypatch.setattr("pipeline.app.train_vc.ohnn.objective", out_of_memory)
    data = EmbeddingSet(torch.nn.functional.normalize(torch.randn(40, 16), dim=-1),
                        torch.arange(4).repeat_interleave(10), ["f", "m", "f", "m"])
    training = {"epochs": 1, "batch_size": 16, "lr": 0.02, "margin": 0.2, "scale": 30.0, "similarity_weight": 1.0,
                "similarity_margin": 0.0, "same_gender_targets": True, "val_fraction": 0.2}
    spec = {"_target_": "anonymizers.vc.householder.HouseholderMap", "dim": 16, "reflections": None, "seed": 0}
    trainer = OHNNTrainer(data, spec, training, 0, tmp_path / "checkpoint.pt", torch.device("cpu"))
    message = raised(trainer.fit)
    assert not (tmp_path / "checkpoint.pt").exists()
    record("oom-train-ohnn", "an OHNN training batch that does not fit the device's memory",
           "train-vc ohnn (each step)", message, tmp_path, "training.batch_size=16", "16 embeddings", "memory",
           "lower training.batch_size")

"""VPC 2026 Track 2's Whisper: transformers' speech recognition pipeline as VPC's
InferenceWhisperASR calls it, an utterance over 30 s in 30 s chunks with 5 s strides, shorter
ones as one batch; a random-weight tiny Whisper saved by transformers' classes."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.config import compose, instantiate, without

transformers = pytest.importorskip("transformers")
from tests.helpers import utility_experiment  # noqa: E402
from tests.helpers import whisper_folder  # noqa: E402

RATE = 16000


def recogniser(folder, *extra: str):
    asr = compose(["data=synthetic_tiny", "asr=whisper_vpc2026", f"asr.folder='{folder}'", *extra]).asr
    return instantiate(without(asr, "name"))


def spy_on_features(monkeypatch) -> list:
    """Every input the feature extractor gets (the pipeline gives it one utterance or chunk at a time)."""
    seen = []
    original = transformers.WhisperFeatureExtractor.__call__

    def record(self, raw_speech, *args, **kwargs):
        seen.append(raw_speech)
        return original(self, raw_speech, *args, **kwargs)

    monkeypatch.setattr(transformers.WhisperFeatureExtractor, "__call__", record)
    return seen


def vpc_chunks(samples: int, chunk_s: float = 30, stride_s: float = 5) -> list[tuple[int, int]]:
    """Chunk bounds by the rule VPC relies on: chunks of 30 s starting every 30 - 2 x 5 = 20 s,
    the last one reaching the end."""
    chunk, step = int(chunk_s * RATE), int((chunk_s - 2 * stride_s) * RATE)
    bounds = []
    for start in range(0, samples, step):
        bounds.append((start, min(start + chunk, samples)))
        if start + chunk >= samples:
            return bounds
    return bounds


def test_chunk_boundaries_of_a_70_s_and_a_30_s_plus_one_sample_utterance(tmp_path, monkeypatch):
    model = recogniser(whisper_folder(tmp_path / "whisper"))
    rng = np.random.default_rng(0)
    long, just_over, short = (0.1 * rng.standard_normal(n).astype(np.float32) for n in (70 * RATE, 30 * RATE + 1,
                                                                                        5 * RATE))
    assert vpc_chunks(len(long)) == [(0, 480000), (320000, 800000), (640000, 1120000)]
    assert vpc_chunks(len(just_over)) == [(0, 480000), (320000, 480001)]
    seen = spy_on_features(monkeypatch)
    texts = model.transcribe([long, short, just_over])
    expected = [short] + [wave[a:b] for wave in (long, just_over) for a, b in vpc_chunks(len(wave))]
    assert len(seen) == len(expected) == 6  # the short one whole, then 3 + 2 chunks
    for got, want in zip(seen, expected):
        np.testing.assert_array_equal(np.asarray(got, dtype=np.float32), want)
    assert len(texts) == 3 and all(isinstance(text, str) for text in texts)


def test_texts_are_the_pipelines_as_vpc_calls_it(tmp_path):
    """VPC: pipe(long, chunk_length_s=30, stride_length_s=5) and pipe(short files, batch_size=n)."""
    folder = whisper_folder(tmp_path / "whisper")
    model = recogniser(folder)
    rng = np.random.default_rng(1)
    long, short = (0.1 * rng.standard_normal(n).astype(np.float32) for n in (45 * RATE, 7 * RATE))
    reference = transformers.pipeline("automatic-speech-recognition", model=str(folder), device="cpu")
    options = {"generate_kwargs": {"language": "en", "task": "transcribe"}}
    expected = [reference({"raw": long, "sampling_rate": RATE}, chunk_length_s=30, stride_length_s=5,
                          **options)["text"], reference({"raw": short, "sampling_rate": RATE}, **options)["text"]]
    assert model.transcribe([long, short]) == expected and all(text.strip() for text in expected)



def test_vpc2026_whisper_text_rule_by_hand():
    from pipeline.metrics.wer import whisper_normalise, word_errors

    assert whisper_normalise(" ¿Qué?  The well-known «cat's» hat…") == "¿qué the wellknown cat's hat"
    references, hypotheses = ["the well known cat's hat"], [" The well-known cat's hat."]
    assert word_errors(references, hypotheses, "vpc2026_whisper").errors == 2  # wellknown for well, known deleted
    assert word_errors(references, hypotheses).errors == 0                     # vpc: the hyphen splits


def test_wer_step_counts_words_and_errors_by_the_configured_rule(tmp_path, monkeypatch):
    """Errors and reference words counted by utility.wer_text (VPC 2026 Track 2 keeps the ¿ of ¿qué)."""
    from types import SimpleNamespace

    from pipeline.app import utility
    from pipeline.data.manifest import Utterance, write_manifest

    hypotheses = {"u1": "¿Qué hora es?", "u2": "buenos días"}
    manifest = write_manifest(tmp_path / "m.jsonl", [
        Utterance(id="u1", speaker="s", gender="f", path="u1.flac", duration=1.0, text="qué hora es"),
        Utterance(id="u2", speaker="s", gender="f", path="u2.flac", duration=1.0, text="buenos - días")])
    monkeypatch.setattr(utility, "transcribe", SimpleNamespace(run=lambda *a: None, load=lambda *a: hypotheses))
    lists, sets = {"test_f": {"original": manifest, "anonymized": manifest}}, {"test_f": ("test", "x")}
    found = {}
    for rule in ("vpc", "vpc2026_whisper"):
        result = {"sets": {"test_f": {}}, "splits": {}}
        experiment = utility_experiment(["data=vpc", "detect.bootstrap.n_resamples=20", f"utility.wer_text={rule}"],
                                        tmp_path / "cache")
        utility.word_error_rates(experiment, lists, sets, result)
        found[rule] = (result["sets"]["test_f"]["words"], result["splits"]["test"]["wer_original"])
    assert found == {"vpc": (5, 0.0), "vpc2026_whisper": (5, 1 / 5)}

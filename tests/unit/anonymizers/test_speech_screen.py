"""The output check's speech screen (pipeline.signal.speech, anonymizers.base.check_speech):
speech passes, every kind of non-speech fails, and a system whose output is not speech is
refused by the anonymize stage, cached or not, unless `output_check.speech` is false."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from anonymizers.base import Anonymizer, Batch, check_speech
from pipeline.core.cache import Cache
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import OutputCheck
from pipeline.data.audio import write_audio
from pipeline.data.manifest import Utterance, write_manifest
from pipeline.signal.speech import screen
from pipeline.stages import anonymize
from tests.helpers import tone, waves

RATE = 16000


def non_speech(seconds: float = 2.0, seed: int = 0) -> dict[str, np.ndarray]:
    rng, n = np.random.default_rng(seed), int(seconds * RATE)
    clicks = np.zeros(n)
    clicks[rng.integers(0, n, 8)] = 0.8
    t = np.arange(n) / RATE
    return {
        "white noise -70 dBFS": rng.normal(0, 10 ** (-70 / 20), n),
        "white noise -10 dBFS": rng.normal(0, 10 ** (-10 / 20), n),
        "silence with dither": rng.integers(-1, 2, n) / 32768,
        "clicks": clicks,
        "tone 150 Hz": 0.3 * np.sin(2 * np.pi * 150 * t),
        "tone 1 kHz": 0.3 * np.sin(2 * np.pi * 1000 * t),
        "harmonic tone": tone(seconds, 120).astype(np.float64),
        "brown noise": np.cumsum(rng.normal(0, 1e-3, n)),
    }


@pytest.mark.parametrize("seed", range(4))
def test_speech_passes(seed):
    speech = waves((2.0, seed))[0]
    assert screen(speech, RATE).speech
    assert screen(1e-3 * speech, RATE).speech  # scale-free


@pytest.mark.parametrize("case", list(non_speech()))
def test_each_kind_of_non_speech_fails(case):
    found = screen(non_speech()[case], RATE)
    assert not found.speech and found.reason()


def test_time_reversed_speech_counts_as_speech():
    """Documented limit: reversed speech is voiced and dynamic; the screen is acoustic."""
    assert screen(waves((2.0, 1))[0][::-1], RATE).speech


def test_too_short_or_empty_input_is_not_speech():
    assert not screen(np.zeros(0), RATE).speech and not screen(np.ones(10), RATE).speech


def verdicts(outputs: dict[str, bool], inputs: dict[str, bool] | None = None) -> dict[str, dict]:
    return {u: {"speech": ok, "voiced": 0.5 if ok else 0.0, "dynamics_db": 30.0 if ok else 1.0,
                "input_speech": True if inputs is None else inputs[u]} for u, ok in outputs.items()}


def test_refused_above_the_share_with_one_line_naming_share_ids_and_key():
    screens = verdicts({f"u{i}": i >= 3 for i in range(10)})  # 3 of 10 fail
    check_speech("sys", "train", screens, OutputCheck(speech=True, max_non_speech=0.3))  # 30 % is not above 0.3
    with pytest.raises(VpevalError) as caught:
        check_speech("sys", "train", screens)  # the default, 0.2
    message = str(caught.value)
    assert "\n" not in message and message.startswith("sys: output is not speech for 3 of the 10 utterance(s) of train")
    assert "(30 % > output_check.max_non_speech=0.2): u0, u1, u2 (u0: 0 % voiced frames" in message
    assert "output_check.speech=false" in message
    check_speech("sys", "train", screens, OutputCheck(speech=False, max_non_speech=0.2))  # the override


def test_input_that_is_not_speech_is_not_the_systems_fault():
    screens = verdicts({"u1": False, "u2": True}, inputs={"u1": False, "u2": True})
    check_speech("sys", "train", screens, OutputCheck(speech=True, max_non_speech=0))


class Noise(Anonymizer):
    """What issue 38 found: an 'anonymiser' writing white noise at -70 dBFS."""

    def anonymize(self, batch: Batch) -> list[torch.Tensor]:
        return [torch.as_tensor(np.random.default_rng(s).normal(0, 10 ** (-70 / 20), len(w)), dtype=torch.float32)
                for s, w in zip(batch.seeds, batch.waves)]


class Identity(Anonymizer):
    """Returns its input: every output is its own utterance."""

    def anonymize(self, batch: Batch) -> list[torch.Tensor]:
        return [wave.clone() for wave in batch.waves]


def test_run_batch_screens_input_and_output():
    _, _, screens = Noise(device="cpu").run_batch(waves((1.5, 0)), ["u1"], ["s1"], RATE)
    assert screens[0]["input_speech"] and not screens[0]["speech"] and screens[0]["voiced"] == 0.0


def test_a_batch_is_screened_on_torch_threads_in_its_order(monkeypatch):
    """The screens of a batch run on a pool of torch's thread count (on the H200 the stage was
    one busy core, the GPU idle; benchmarks/bench_anonymize_io.py), their order kept."""
    import threading

    import anonymizers.base as base

    threads = set()

    def recorded(wave, rate):
        threads.add(threading.get_ident())
        return screen(wave, rate)

    monkeypatch.setattr(base, "screen", recorded)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    inputs = waves(*[(0.5, i) for i in range(8)])
    _, _, screens = Noise(device="cpu").run_batch(inputs, [f"u{i}" for i in range(8)], ["s"] * 8, RATE)
    assert threading.get_ident() not in threads and 1 <= len(threads) <= 3
    assert [s["input_speech"] for s in screens] == [screen(w, RATE).speech for w in inputs]
    assert all(not s["speech"] for s in screens)


def test_the_stage_reads_and_writes_a_batch_on_torch_threads_in_order(tmp_path, monkeypatch):
    """The anonymize stage decodes and encodes a batch's files off the main thread, on pools of
    torch's thread count (the H200 rehearsal's one busy core), each output where its utterance's
    path says (the writes ran on the main thread before)."""
    import threading

    calls = {"read": set(), "write": set()}
    real_read, real_write = anonymize.read_audio, anonymize.write_audio

    def read(*args, **kwargs):
        calls["read"].add(threading.get_ident())
        return real_read(*args, **kwargs)

    def write(*args, **kwargs):
        calls["write"].add(threading.get_ident())
        return real_write(*args, **kwargs)

    monkeypatch.setattr(anonymize, "read_audio", read)
    monkeypatch.setattr(anonymize, "write_audio", write)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    sources = waves(*[(0.5 + 0.1 * i, i) for i in range(6)])
    utts = [Utterance(f"s0-{i}", "s0", "f", str(real_write(tmp_path / f"{i}.flac", w, RATE)), 0.5 + 0.1 * i)
            for i, w in enumerate(sources)]
    manifest = write_manifest(tmp_path / "train.jsonl", utts)
    system = OmegaConf.create({"name": "identity", "_target_": f"{__name__}.Identity"})
    out = anonymize.run(system, manifest, Cache(tmp_path / "cache"), list_name="train", seed=1, device="cpu")
    main = threading.get_ident()
    assert calls["read"] and calls["write"] and main not in calls["read"] | calls["write"]
    for utt, wave in zip(utts, sources):
        np.testing.assert_allclose(real_read(anonymize.output_path(out, utt)), wave, atol=1 / 2 ** 15)


def test_stage_refuses_a_noise_system_every_time_unless_told(tmp_path):
    utts = [Utterance(f"s{i % 2}-{i}", f"s{i % 2}", "fm"[i % 2],
                      str(write_audio(tmp_path / f"{i}.flac", w, RATE)), 1.5) for i, w in
            enumerate(waves(*[(1.5, i) for i in range(4)]))]
    manifest, cache = write_manifest(tmp_path / "train.jsonl", utts), Cache(tmp_path / "cache")
    system = OmegaConf.create({"name": "noise", "_target_": f"{__name__}.Noise"})
    run = lambda check: anonymize.run(system, manifest, cache, list_name="train", seed=1,  # noqa: E731
                                      device="cpu", output_check=check)
    for _ in range(2):  # built, then cached: refused both times
        with pytest.raises(VpevalError, match=r"^noise: output is not speech for 4 of the 4 utterance\(s\) of train"):
            run(OutputCheck(speech=True, max_non_speech=0.2))
    out = run(OutputCheck(speech=False, max_non_speech=0.2))
    folders = [f for f in (tmp_path / "cache" / "anonymize").iterdir() if f.is_dir()]
    assert folders == [out] and (out / "manifest.jsonl").is_file()  # one build: the check is no part of its key

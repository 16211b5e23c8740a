"""Built-in synthetic corpus: determinism, LibriSpeech layout, atomicity, identity cues."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from pipeline.core.errors import VpevalError
from pipeline.data import phones, synthetic
from pipeline.data.synthetic import generate_corpus
from pipeline.signal import synthesis

TINY = {
    "train-x": {"female": 2, "male": 2, "utterances": 4},
    "test-x": {"female": 1, "male": 1, "utterances": 2},
}
DURATION = (0.8, 1.4)


def tiny(root: Path, **options) -> Path:
    options = {"seed": 3, "subsets": TINY, "duration": DURATION, "workers": 1, "progress": False, **options}
    return generate_corpus(root, **options)


def digest(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under `root`."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def speakers_txt(root: Path) -> dict[str, tuple[str, str, float]]:
    """SPEAKERS.TXT parsed the way LibriSpeech readers do: id -> (sex, subset, minutes)."""
    rows = {}
    for line in (root / "SPEAKERS.TXT").read_text().splitlines():
        if line.startswith(";"):
            continue
        fields = [f.strip() for f in line.split("|")]
        assert len(fields) == 5, line
        rows[fields[0]] = (fields[1], fields[2], float(fields[3]))
    return rows


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return tiny(tmp_path_factory.mktemp("synthetic") / "corpus")


def test_same_seed_same_bytes_and_worker_count_does_not_matter(corpus, tmp_path):
    again = tiny(tmp_path / "again", workers=2)
    assert digest(again) == digest(corpus)


def test_different_seed_differs(corpus, tmp_path):
    def audio(root: Path) -> set[str]:
        return {sha for path, sha in digest(root).items() if path.endswith(".flac")}

    assert audio(tiny(tmp_path / "other", seed=4)).isdisjoint(audio(corpus))


def test_speakers_txt_layout_and_genders(corpus):
    rows = speakers_txt(corpus)
    for subset, sizes in TINY.items():
        ids = [spk for spk, (_, s, _) in rows.items() if s == subset]
        assert sorted(ids) == sorted(p.name for p in (corpus / subset).iterdir())
        assert all(spk.isdigit() for spk in ids)
        sexes = [rows[spk][0] for spk in ids]
        assert sexes.count("F") == sizes["female"] and sexes.count("M") == sizes["male"]
    assert len(rows) == sum(s["female"] + s["male"] for s in TINY.values())  # disjoint subsets


def test_chapters_transcripts_and_audio(corpus):
    rows = speakers_txt(corpus)
    for spk, (_, subset, minutes) in rows.items():
        chapters = sorted((corpus / subset / spk).iterdir())
        assert len(chapters) == 2 and all(c.name.isdigit() for c in chapters)
        seconds = 0.0
        for chapter in chapters:
            stem = f"{spk}-{chapter.name}"
            lines = (chapter / f"{stem}.trans.txt").read_text().splitlines()
            ids = [line.split(" ", 1)[0] for line in lines]
            flacs = sorted(p.stem for p in chapter.glob("*.flac"))
            assert ids == flacs == [f"{stem}-{i:04d}" for i in range(len(flacs))]
            for line in lines:
                text = line.split(" ", 1)[1]
                assert text == text.upper() and text.replace(" ", "").isalpha()
            for flac in chapter.glob("*.flac"):
                info = sf.info(str(flac))
                assert (info.samplerate, info.channels, info.format, info.subtype) == (16000, 1, "FLAC", "PCM_16")
                assert DURATION[0] <= info.duration <= DURATION[1]
                seconds += info.duration
        assert minutes == pytest.approx(seconds / 60, abs=0.006)
    assert sum(len(list((corpus / s).rglob("*.flac"))) for s in TINY) == sum(
        (s["female"] + s["male"]) * s["utterances"] for s in TINY.values())


def test_alignment_covers_each_utterance(corpus):
    labels = {p.label for p in phones.PHONES} | {"SIL"}
    vowels = {p.label for p in phones.VOWELS}
    for align in corpus.rglob("*.align.txt"):
        segments: dict[str, list] = {}
        for line in align.read_text().splitlines():
            utt, start, end, label = line.split()
            segments.setdefault(utt, []).append((float(start), float(end), label))
        trans = align.with_name(align.name.replace(".align.", ".trans."))
        assert list(segments) == [line.split()[0] for line in trans.read_text().splitlines()]
        for utt, segs in segments.items():
            assert segs[0][0] == 0.0 and all(a[1] == b[0] for a, b in zip(segs, segs[1:]))
            assert all(start < end and label in labels for start, end, label in segs)
            assert segs[0][2] == "SIL" and segs[-1][2] == "SIL"
            assert any(label in vowels for *_, label in segs)
            frames = sf.info(str(align.parent / f"{utt}.flac")).frames
            assert abs(segs[-1][1] * 16000 - frames) <= 1


def test_utterances_differ_in_content(corpus):
    texts = [line.split(" ", 1)[1] for t in corpus.rglob("*.trans.txt") for line in t.read_text().splitlines()]
    assert len(set(texts)) == len(texts)


def test_existing_corpus_is_reused_and_other_options_refused(corpus, tmp_path):
    marker = (corpus / "synthetic.json").stat().st_mtime_ns
    assert tiny(corpus) == corpus
    assert (corpus / "synthetic.json").stat().st_mtime_ns == marker
    with pytest.raises(VpevalError, match="other options"):
        tiny(corpus, seed=5)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(VpevalError, match="not a complete synthetic corpus"):
        tiny(foreign)
    assert (foreign / "notes.txt").read_text() == "mine"


def test_generation_is_atomic(tmp_path, monkeypatch):
    root = tmp_path / "corpus"
    calls = []
    real = synthetic.synthesise_speaker

    def crash_on_third_speaker(task):
        calls.append(task.speaker)
        assert not root.exists()
        if len(calls) == 3:
            raise RuntimeError("simulated crash")
        return real(task)

    monkeypatch.setattr(synthetic, "synthesise_speaker", crash_on_third_speaker)
    with pytest.raises(RuntimeError, match="simulated crash"):
        tiny(root)
    assert os.listdir(tmp_path) == []  # no corpus and no staging folder left behind
    monkeypatch.setattr(synthetic, "synthesise_speaker", real)
    tiny(root)
    assert json.loads((root / "synthetic.json").read_text())["seed"] == 3


def test_staging_left_by_a_killed_generation_is_removed(tmp_path):
    """Regression: a SIGKILLed generation left its staging folder (~100 MB) behind for ever."""
    root = tmp_path / "corpus"
    exited = subprocess.Popen(["true"])  # its process id is free once it has exited
    exited.wait()
    stale = tmp_path / f"{synthetic.staging_prefix(root)}{exited.pid}-abc"
    live = tmp_path / f"{synthetic.staging_prefix(root)}{os.getpid()}-def"
    other_host = tmp_path / f".corpus.partial-elsewhere-{exited.pid}-ghi"
    for folder in (stale, live, other_host):
        (folder / "train-synth").mkdir(parents=True)
    tiny(root)
    assert not stale.exists() and live.exists() and other_host.exists()


def test_other_sample_rate(tmp_path):
    root = tiny(tmp_path / "c", sample_rate=8000, subsets={"s": {"female": 1, "male": 0, "utterances": 2}})
    for flac in root.rglob("*.flac"):
        info = sf.info(str(flac))
        assert info.samplerate == 8000 and DURATION[0] <= info.duration <= DURATION[1]


@pytest.mark.parametrize("options, problem", [
    ({"seed": -1}, "seed"),
    ({"subsets": {"a": {"female": 1, "male": 0}}}, "exactly the keys"),
    ({"subsets": {"a": {"female": 0, "male": 0, "utterances": 2}}}, "no speakers"),
    ({"subsets": {"../a": {"female": 1, "male": 0, "utterances": 2}}}, "plain folder name"),
    ({"subsets": {"a": {"female": 1, "male": 0, "utterances": 1}}}, "chapters_per_speaker"),
    ({"duration": (3.0, 2.0)}, "duration"),
])
def test_bad_options_are_named(tmp_path, options, problem):
    with pytest.raises(VpevalError, match=problem):
        tiny(tmp_path / "corpus", **options)
    assert not (tmp_path / "corpus").exists()


def _voice_statistics(wav: np.ndarray, rate: int) -> tuple[float, np.ndarray]:
    """Median cepstral F0 and the level-free log spectrum (24 bands) of the loud frames."""
    frames = np.lib.stride_tricks.sliding_window_view(wav, 640)[::160]
    energy = (frames ** 2).mean(axis=1)
    power = np.abs(np.fft.rfft(frames[energy > 0.3 * energy.max()] * np.hanning(640), axis=1)) ** 2
    lags = np.arange(rate // 400, rate // 70)
    cepstrum = np.fft.irfft(np.log(power + 1e-12), axis=1)
    f0 = float(np.median(rate / lags[cepstrum[:, lags].argmax(axis=1)]))
    edges = np.searchsorted(np.fft.rfftfreq(640, 1 / rate), np.geomspace(100, 7000, 25))
    bands = np.log([power[:, a:b].sum() for a, b in zip(edges[:-1], edges[1:])])
    return f0, bands - bands.mean()


def test_speakers_differ_more_than_utterances_of_one_speaker(tmp_path):
    """Identity cues are real: the audio's F0 follows each speaker's F0 level, and the spectral
    shape alone (vocal tract, tilt) picks the right speaker far above chance within a gender."""
    root = tiny(tmp_path / "c", subsets={"s": {"female": 8, "male": 8, "utterances": 4}}, duration=(1.2, 1.6))
    genders = {spk: sex for spk, (sex, *_) in speakers_txt(root).items()}
    log_f0s: dict[str, list] = {}
    spectra: dict[str, list] = {}
    for flac in sorted(root.rglob("*.flac")):
        wav, rate = sf.read(str(flac), dtype="float32")
        f0, spectrum = _voice_statistics(wav, rate)
        log_f0s.setdefault(flac.name.split("-")[0], []).append(np.log(f0))
        spectra.setdefault(flac.name.split("-")[0], []).append(spectrum)
    for sex in "FM":
        speakers = [spk for spk in genders if genders[spk] == sex]
        drawn = [np.log(synthetic.speaker_voice(3, int(spk), sex.lower()).f0_hz) for spk in speakers]
        measured = [np.mean(log_f0s[spk]) for spk in speakers]
        assert np.corrcoef(drawn, measured)[0, 1] > 0.6
    gender_f0 = {sex: np.mean([np.mean(log_f0s[spk]) for spk in log_f0s if genders[spk] == sex]) for sex in "FM"}
    assert gender_f0["F"] > gender_f0["M"] + np.log(1.4)

    shapes = {spk: np.array(values) for spk, values in spectra.items()}
    scale = np.sqrt(np.mean([x.var(axis=0, ddof=1) for x in shapes.values()], axis=0))
    hits = []  # leave-one-out nearest speaker mean among speakers of the same gender
    for spk, probes in shapes.items():
        for i, probe in enumerate(probes):
            candidates = {other: np.delete(x, i, axis=0) if other == spk else x
                          for other, x in shapes.items() if genders[other] == genders[spk]}
            nearest = min(candidates, key=lambda other: np.sum(((candidates[other].mean(0) - probe) / scale) ** 2))
            hits.append(nearest == spk)
    assert np.mean(hits) > 3 / 8, np.mean(hits)  # chance: 1 / 8


def _glottal(seconds: float, jitter: float, f0_hz: float, seed: int):
    from dataclasses import replace

    voice = replace(synthetic.draw_voice(np.random.default_rng(0), "f"), jitter=jitter)
    t = np.arange(max(1, int(seconds * RATE_16K))) / RATE_16K
    f0 = f0_hz * (1.0 + 0.3 * np.sin(2 * np.pi * 0.7 * t))
    return synthesis.glottal_source(np.random.default_rng(seed), voice, f0, RATE_16K), len(t)


RATE_16K = 16000


def test_glottal_source_regression_jitter_past_the_last_period():
    """Regression: jittered periods could end after the unjittered ones, and shimmer, drawn per
    unjittered period, was indexed past its end (IndexError in corpus generation)."""
    (pulses, open_phase), n = _glottal(12.597432884488953, 0.015, 257.4790986310801, 25)  # the corpus's largest jitter
    assert pulses.shape == open_phase.shape == (n,) and np.isfinite(pulses).all()


hypothesis = pytest.importorskip("hypothesis")


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(seconds=hypothesis.strategies.floats(0.0, 20.0), jitter=hypothesis.strategies.floats(0.0, 0.5),
                  f0_hz=hypothesis.strategies.floats(40.0, 500.0), seed=hypothesis.strategies.integers(0, 2 ** 32 - 1))
def test_glottal_source_any_duration_and_jitter(seconds, jitter, f0_hz, seed):
    (pulses, open_phase), n = _glottal(seconds, jitter, f0_hz, seed)
    assert pulses.shape == open_phase.shape == (n,)
    assert np.isfinite(pulses).all() and set(np.unique(open_phase)) <= {0.0, 1.0}


def test_corpus_folder_follows_the_umask(tmp_path):
    """Regression: the corpus folder was made mode 0700, so the other users of a shared VPEVAL_DATA
    could not read it."""
    old = os.umask(0o022)
    try:
        root = tiny(tmp_path / "corpus", subsets={"test-x": {"female": 1, "male": 0, "utterances": 2}})
    finally:
        os.umask(old)
    assert root.stat().st_mode & 0o777 == 0o755

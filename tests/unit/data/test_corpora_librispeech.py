"""LibriSpeech through the prepare stage: conversion of non-conforming audio, and every bad input
named (one line, `file:line`), or skipped and listed with data.skip_bad."""
import re

import numpy as np
import pytest
import soundfile as sf

from pipeline.core.cache import Cache, summary_of
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.core.layout import manifest_path
from pipeline.core.schemas import Data, typed
from pipeline.data.audio import write_audio
from pipeline.data.librispeech import LibriSpeech
from pipeline.data.manifest import read_manifest
from pipeline.stages import prepare, validate
from tests.helpers import librispeech_tree, tone

SPEAKERS = {
    "train-clean-360": {"11": "F", "12": "F", "13": "M", "14": "M"},
    "dev-clean": {"21": "F", "22": "F", "23": "M", "24": "M"},
    "test-clean": {"31": "F", "32": "F", "33": "M", "34": "M"},
}


def libri_cfg(root, *overrides):
    """The shipped conf/data/librispeech.yaml, with a protocol sized for 4 utterances per speaker."""
    return typed(compose([f"data.root={root}", "data.workers=2", "data.protocol.enroll_fraction=0.5",
                          "data.protocol.enroll_utterances=2", *overrides], config_name="data/librispeech").data,
                 Data, "data")


def flac(root, utt):
    speaker, chapter, _ = utt.split("-")
    subset = next(s for s, speakers in SPEAKERS.items() if speaker in speakers)
    return root / subset / speaker / chapter / f"{utt}.flac"


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def empty_audio(path):
    """A well-formed file with no samples (libsndfile reads the format from the content)."""
    sf.write(str(path.with_suffix(".wav")), np.zeros(0, np.float32), 16000, format="WAV")
    path.with_suffix(".wav").rename(path)


def garbage(path):
    path.write_bytes(b"this is not audio at all" * 10)


@pytest.fixture
def corpus(tmp_path):
    return librispeech_tree(tmp_path / "LibriSpeech", SPEAKERS)


def test_stereo_and_other_rates_are_converted_once_conforming_audio_stays_in_place(corpus, tmp_path):
    write_audio(flac(corpus, "21-100-0001"), tone(0.5, 120, 24000), 24000)
    stereo = np.stack([tone(0.5, 130), tone(0.5, 140)], axis=1)
    sf.write(str(flac(corpus, "12-100-0003")), stereo, 16000, subtype="PCM_16")
    out = prepare.run(libri_cfg(corpus), Cache(tmp_path / "cache"))
    utts = {u.id: u for name in ("train", "dev_enrolls", "dev_trials_f")
            for u in read_manifest(manifest_path(out, name))}
    for utt_id in ("21-100-0001", "12-100-0003"):
        info = sf.info(utts[utt_id].path)
        assert utts[utt_id].path == str(out / "audio" / utt_id.split("-")[0] / f"{utt_id}.flac")
        assert (info.samplerate, info.channels, utts[utt_id].duration) == (16000, 1, pytest.approx(0.5, abs=1e-3))
    assert utts["11-100-0000"].path == str(flac(corpus, "11-100-0000").resolve())
    assert summary_of(out)["converted"] == 2
    result = validate.check(out, workers=2)
    assert result.problems == [] and "2 file(s) were converted" in result.render()


BAD_AUDIO = [
    ("22-100-0002", lambda p: p.unlink(), r"22-100.trans.txt:3: audio file 22-100-0002.flac is missing"),
    ("13-100-0001", garbage, r"13-100.trans.txt:2: .*13-100-0001.flac: cannot read audio header"),
    ("31-100-0000", empty_audio, r"31-100.trans.txt:1: .*31-100-0000.flac is empty \(0 samples\)"),
]


@pytest.mark.parametrize("utt, damage, message", BAD_AUDIO)
def test_bad_audio_is_named(corpus, tmp_path, utt, damage, message):
    damage(flac(corpus, utt))
    with pytest.raises(VpevalError, match=message + r".*set data.skip_bad=true"):
        prepare.run(libri_cfg(corpus), Cache(tmp_path / "cache"))


def test_bad_audio_is_skipped_and_listed(corpus, tmp_path):
    """Truncated audio keeps a header promising every sample: with skip_bad, preparation decodes."""
    for utt, damage, _ in BAD_AUDIO:
        damage(flac(corpus, utt))
    truncate(flac(corpus, "14-100-0002"))
    out = prepare.run(libri_cfg(corpus, "data.skip_bad=true"), Cache(tmp_path / "cache"))
    skipped = (out / "skipped.txt").read_text()
    for *_, message in BAD_AUDIO:
        assert re.search(message, skipped)
    assert "utterance 14-100-0002: cannot decode" in skipped
    assert summary_of(out)["skipped"] == {"utterances": 4, "trials": 0}
    listed = {u.id for n in ("train", "dev_enrolls", "dev_trials_f", "test_enrolls", "test_trials_f")
              for u in read_manifest(manifest_path(out, n))}
    assert not listed & {"22-100-0002", "13-100-0001", "31-100-0000", "14-100-0002"}
    result = validate.check(out, workers=2)
    assert result.problems == [] and "Preparation skipped 4 bad utterance(s)" in result.render()


def test_wrong_rate_and_stereo_are_errors_without_conversion(corpus, tmp_path):
    write_audio(flac(corpus, "21-100-0001"), tone(0.5, 120, 24000), 24000)
    sf.write(str(flac(corpus, "12-100-0003")), np.stack([tone(0.5, 130)] * 2, axis=1), 16000)
    with pytest.raises(VpevalError, match=r"12-100.trans.txt:4: .* has 2 channels, expected mono .*"
                                          r"\(2 bad inputs in all, listed in .*problems.txt\)"):
        prepare.run(libri_cfg(corpus, "data.convert_audio=false"), Cache(tmp_path / "cache"))
    listing = next((tmp_path / "cache" / "prepare").glob("*/problems.txt")).read_text()
    assert "21-100.trans.txt:2: " in listing and "is 24000 Hz, expected 16000 Hz" in listing


def test_duplicate_ids_are_named(corpus, tmp_path):
    trans = corpus / "test-clean/33/100/33-100.trans.txt"
    trans.write_text(trans.read_text() + "33-100-0001 SAID TWICE\n")
    with pytest.raises(VpevalError, match=r"33-100.trans.txt:5: duplicate utterance id '33-100-0001' "
                                          r"\(first at .*33-100.trans.txt:2\)"):
        prepare.run(libri_cfg(corpus), Cache(tmp_path / "cache"))


def test_truncated_audio_is_found_by_validation(corpus, tmp_path):
    """Preparation reads headers only (without skip_bad); validation decodes every file."""
    truncate(flac(corpus, "14-100-0002"))
    out = prepare.run(libri_cfg(corpus), Cache(tmp_path / "cache"))
    problems = validate.check(out, workers=2).problems
    assert len(problems) == 1 and re.search(r"train.jsonl: utterance 14-100-0002: cannot decode", problems[0])


@pytest.mark.parametrize("layout, message", [
    (lambda root: (root / "SPEAKERS.TXT").unlink(), "SPEAKERS.TXT: SPEAKERS.TXT not found"),
    (lambda root: (root / "SPEAKERS.TXT").write_text("11 | X | train | 1 | A\n"), r"SPEAKERS.TXT:1: expected"),
    (lambda root: (root / "dev-clean/22/100/22-100.trans.txt").write_text("99-100-0000 HI\n"),
     r"22-100.trans.txt:1: utterance '99-100-0000' does not belong to speaker 22"),
    (lambda root: __import__("shutil").rmtree(root / "test-clean"), r"test-clean: subset folder not found"),
])
def test_bad_layouts_are_named(corpus, tmp_path, layout, message):
    layout(corpus)
    with pytest.raises(VpevalError, match=message):
        prepare.run(libri_cfg(corpus, "data.skip_bad=true"), Cache(tmp_path / "cache"))


def test_reader_utterances_api_is_unchanged(corpus):
    utts = LibriSpeech(corpus).utterances("test-clean")
    assert len(utts) == 16 and utts[0].duration == pytest.approx(0.5) and utts[0].sample_rate == 16000
    flac(corpus, "32-100-0003").unlink()
    with pytest.raises(VpevalError, match=r"32-100.trans.txt:4: audio file 32-100-0003.flac is missing"):
        LibriSpeech(corpus).utterances("test-clean")


def test_protocol_needs_a_target(corpus, tmp_path):
    with pytest.raises(VpevalError, match=r"data.protocol has no _target_"):
        prepare.run(libri_cfg(corpus, "~data.protocol._target_"), Cache(tmp_path / "cache"))


def test_a_root_one_level_too_high_names_the_folder_below(tmp_path):
    """Regression: `data.root` one level above LibriSpeech/ said only "subset folder not found"."""
    librispeech_tree(tmp_path / "corpora" / "LibriSpeech", SPEAKERS)
    with pytest.raises(VpevalError, match=rf"^{tmp_path}/corpora/train-clean-360: subset folder not found \(there is "
                                          rf"{tmp_path}/corpora/LibriSpeech/train-clean-360: data.root="
                                          rf"{tmp_path}/corpora/LibriSpeech\?\)$"):
        LibriSpeech(tmp_path / "corpora").entries("train-clean-360")


def test_audio_without_a_transcript_line_is_named(corpus, caplog):
    """Regression: a FLAC file with no transcript line was left out without a word."""
    chapter = next((corpus / "dev-clean").glob("*/*"))
    trans = next(chapter.glob("*.trans.txt"))
    lines = trans.read_text().splitlines()
    trans.write_text("".join(f"{line}\n" for line in lines[1:]))
    with caplog.at_level("WARNING", logger="pipeline.data.librispeech"):
        entries = LibriSpeech(corpus).entries("dev-clean")
    assert lines[0].split()[0] not in {e.id for e in entries}
    assert f"1 audio file(s) have no transcript line and are not read, e.g. {chapter / lines[0].split()[0]}.flac" \
        in caplog.text

"""Utility metrics: ρF0 (hand-computed tracks, pitch-shifted and constant-F0 signals), emotion
UAR with a SpeechBrain folder of random weights, their bad inputs, and the report. WER is in
test_utility_wer.py."""
import json
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from pipeline.core.cache import Cache
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.data.audio import read_audio, write_audio
from pipeline.data.manifest import Utterance, write_manifest
from pipeline.metrics.pitch_correlation import (correlation, describe, f0_track, pitch_correlation, stretched, track,
                                                vpc2022_correlation)
from pipeline.metrics.results import JudgedPair
from pipeline.metrics.uar import unweighted_average_recall
from pipeline.recognition.emotion import EmotionClassifier, read_emotion_data
from pipeline.report.utility import semi_informed_points
from pipeline.stages import emotion, pitch, report
from tests.helpers import EMOTIONS, emotion_folder, kaldi_dir, run_summary

RATE = 16000


def glide(f_start: float, f_end: float, seconds: float = 1.0) -> np.ndarray:
    """A harmonic tone whose F0 moves linearly from f_start to f_end."""
    t = np.arange(int(seconds * RATE)) / RATE
    phase = 2 * np.pi * np.cumsum(np.linspace(f_start, f_end, t.size)) / RATE
    wave = sum(np.sin(k * phase) / k for k in range(1, 5))
    return (0.3 * wave / np.abs(wave).max()).astype(np.float32)


# ρF0

def test_pitch_correlation_of_hand_computed_tracks():
    a = np.array([100.0, 110, 0, 130, 600, 120])   # 600 Hz is out of range: unvoiced
    b = np.array([150.0, 200, 170, 190, 200, 0])
    # frames voiced in both: (100, 150), (110, 200), (130, 190)
    da, db = np.array([100, 110, 130]) - 340 / 3, np.array([150, 200, 190]) - 180
    assert pitch_correlation(a, b) == pytest.approx((da @ db) / np.sqrt((da @ da) * (db @ db)))
    assert pitch_correlation(a, b) == pytest.approx(0.6186, abs=1e-4)


def test_constant_or_too_short_tracks_correlate_zero_as_vpc_fills_nan():
    assert pitch_correlation(np.full(10, 150.0), np.linspace(100, 200, 10)) == 0.0
    assert pitch_correlation(150 + np.linspace(0, 0.9, 10), np.linspace(100, 200, 10)) == 0.0  # spans < 1 Hz
    assert pitch_correlation(np.array([100.0, 0, 0]), np.array([120.0, 130, 140])) == 0.0


def test_shorter_track_is_stretched_to_the_longer():
    assert stretched(np.array([100.0, 200.0]), 5).tolist() == [100, 125, 150, 175, 200]
    assert pitch_correlation(np.array([100.0, 200.0]), np.linspace(150, 250, 5)) == pytest.approx(1.0)


def test_pitch_shifted_copy_correlates_one_and_a_mirrored_glide_minus_one():
    original = f0_track(glide(120, 200), RATE)
    assert original[20] == pytest.approx(120 + 80 * 0.2, rel=0.03)
    assert pitch_correlation(original, f0_track(glide(156, 260), RATE)) > 0.99     # shifted up 30 %
    assert pitch_correlation(original, f0_track(glide(200, 120), RATE)) < -0.99


def test_constant_f0_signal_has_no_defined_correlation():
    constant = f0_track(glide(150, 150), RATE)
    assert np.count_nonzero(constant) > 80 and np.ptp(constant[constant > 0]) < 1
    assert pitch_correlation(f0_track(glide(120, 200), RATE), constant) == 0.0


def test_vpc2022_rule_shifts_the_anonymised_track_and_counts_unvoiced_frames_as_zero():
    a = np.array([0.0, 100, 120, 0, 0, 140])
    b = np.array([100.0, 120, 0, 0, 140, 0])   # a, one frame early
    assert vpc2022_correlation(a, b) == pytest.approx(1.0)
    assert pitch_correlation(a, b) == 0.0      # unshifted, one frame is voiced in both: undefined
    c = np.array([100.0, 100, 600, 130, 0, 0])  # 600 Hz is out of range: 0 under both rules
    za, zc = a - a.mean(), np.array([100.0, 100, 0, 130, 0, 0])
    lag = int(np.argmax(np.correlate(a, zc, "full"))) - 5
    zc = np.roll(zc, lag) - np.roll(zc, lag).mean()
    assert vpc2022_correlation(a, c) == pytest.approx((za @ zc) / np.sqrt((za @ za) * (zc @ zc)))
    assert vpc2022_correlation(np.zeros(6), a) == 0.0 and vpc2022_correlation(np.full(6, 150.0), a) == 0.0


def test_rule_and_tracker_names():
    assert correlation(np.array([100.0, 0, 120]), np.array([0.0, 100, 120]), "voiced") == 0.0
    assert describe("praat", "vpc2022").startswith("Praat's F0, every frame")
    with pytest.raises(VpevalError, match=r"^utility.pitch_rule='pearson': not a ρF0 rule \(one of voiced, vpc2022\)$"):
        correlation(np.ones(3), np.ones(3), "pearson")
    with pytest.raises(VpevalError, match=r"^utility.pitch_tracker='crepe': not a pitch tracker \(one of yin_viterbi, yin, praat\)$"):
        track(glide(120, 200), RATE, "crepe")


def test_praat_track_of_audio_shorter_than_its_window_is_unvoiced():
    """Regression: Praat raised PraatError (not a VpevalError) on audio under about 40 ms, and the
    run stopped before its report."""
    pytest.importorskip("parselmouth")
    short = track(glide(120, 200, seconds=0.025), RATE, "praat")
    assert len(short) >= 1 and not short.any()
    assert correlation(short, track(glide(120, 200), RATE, "praat"), "vpc2022") == 0.0


def test_vpc2022_rule_of_empty_or_one_frame_tracks_is_zero():
    assert vpc2022_correlation(np.array([]), np.array([])) == 0.0
    assert vpc2022_correlation(np.array([120.0]), np.array([130.0])) == 0.0


def test_praat_tracker_without_parselmouth_is_one_line(monkeypatch):
    import builtins

    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *args, **kwargs: (_ for _ in ()).throw(ImportError(name))
                        if name == "parselmouth" else real_import(name, *args, **kwargs))
    with pytest.raises(VpevalError, match=r"^utility.pitch_tracker=praat needs the praat-parselmouth package"):
        track(glide(120, 200), RATE, "praat")


def test_pitch_stage_averages_utterances_and_names_a_missing_version(tmp_path):
    def manifest(name: str, waves: dict[str, np.ndarray]) -> Path:
        utts = [Utterance(id=u, speaker="s", gender="f", path=str(write_audio(tmp_path / name / f"{u}.flac", w, RATE)),
                          duration=1.0) for u, w in waves.items()]
        return write_manifest(tmp_path / name / "manifest.jsonl", utts)

    original = manifest("o", {"u1": glide(120, 200), "u2": glide(200, 120)})
    shifted = manifest("a", {"u1": glide(156, 260), "u2": glide(120, 200)})
    cache = Cache(tmp_path / "cache")
    found = pitch.load(pitch.run(original, shifted, cache))
    assert (found["tracker"], found["rule"]) == ("yin_viterbi", "voiced")
    assert found["utterances"]["u1"] > 0.99 and found["utterances"]["u2"] < -0.99
    by_vpc = pitch.load(pitch.run(original, shifted, cache, rule="vpc2022"))  # its own cache folder
    assert by_vpc["rule"] == "vpc2022" and by_vpc["utterances"]["u1"] > 0.99
    assert by_vpc["utterances"]["u2"] != found["utterances"]["u2"]
    assert found["mean"] == pytest.approx(np.mean(list(found["utterances"].values())))
    partial = manifest("p", {"u1": glide(156, 260)})
    with pytest.raises(VpevalError, match=r"p/manifest.jsonl: no anonymised version of utterance u2$"):
        pitch.run(original, partial, cache)


# Emotion

def emotion_data(folder: Path, labels: bool = True) -> Path:
    rows = [(f"e{i}", f"spk{i % 2}", "fm"[i % 2], str(write_audio(folder / f"e{i}.flac", glide(100 + 20 * i, 150), RATE)))
            for i in range(4)]
    kaldi_dir(folder, rows)
    if labels:
        (folder / "utt2emo").write_text("".join(f"e{i} {EMOTIONS[i]}\n" for i in range(4)))
    return folder


def test_unweighted_average_recall_by_hand():
    assert unweighted_average_recall(["a", "a", "b", "c"], ["a", "b", "b", "a"]) == pytest.approx((0.5 + 1 + 0) / 3)


def test_emotion_stage_with_a_speechbrain_folder(tmp_path, monkeypatch):
    model = emotion_folder(tmp_path / "model")
    cfg = OmegaConf.merge(compose(["data=synthetic_tiny"]).emotion, {"folder": str(model),
                                                                     "data": str(emotion_data(tmp_path / "iemocap"))})
    cache = Cache(tmp_path / "cache")
    prepared = emotion.prepare(cfg.data, cache)
    truth = emotion.load(prepared, "utt2emo")
    assert truth == {f"e{i}": EMOTIONS[i] for i in range(4)}
    predicted = emotion.load(emotion.run(cfg, prepared / "manifest.jsonl", cache))
    direct = EmotionClassifier(str(model)).classify([read_audio(tmp_path / "iemocap" / f"e{i}.flac") for i in range(4)])
    assert [predicted[f"e{i}"] for i in range(4)] == direct and set(direct) <= set(EMOTIONS)
    with monkeypatch.context() as patched:  # issue 39: a cached list never builds its model
        patched.setattr(EmotionClassifier, "__init__", lambda *a, **k: pytest.fail("the cached list loaded its model"))
        assert emotion.load(emotion.run(cfg, prepared / "manifest.jsonl", cache)) == predicted


def test_emotion_data_without_labels_or_with_an_unlabelled_utterance(tmp_path):
    with pytest.raises(VpevalError, match=r"bare/utt2emo: not found: an emotion dataset needs"):
        read_emotion_data(emotion_data(tmp_path / "bare", labels=False))
    data = emotion_data(tmp_path / "some")
    (data / "utt2emo").write_text("e0 ang\ne1 hap\ne2 neu\n")
    with pytest.raises(VpevalError, match=r"some/utt2emo: utterance e3 \(.*wav.scp:4\) has no emotion label$"):
        read_emotion_data(data)
    with pytest.raises(VpevalError, match=r"emotion.folder folder not found$"):
        EmotionClassifier(str(tmp_path / "nomodel"))


# Report

def utility_result(wer: bool = True) -> dict:
    sets = {"test_f": {"pitch_correlation": 0.8, "pitch_correlation_std": 0.1, "utterances": 3},
            "test_m": {"pitch_correlation": 0.6, "pitch_correlation_std": 0.2, "utterances": 3}}
    splits = {"test": {"pitch_correlation": 0.7, "pitch_correlation_std": 0.2, "pitch_correlation_ci": [0.6, 0.8]}}
    if wer:
        for values in (*sets.values(), *splits.values()):
            values.update(wer_original=0.1, wer_anonymized=0.3)
        splits["test"]["wer_anonymized_ci"] = [0.25, 0.35]
    skipped = {} if wer else {"wer": "the built-in synthetic corpus has no words (its transcripts spell random phones)"}
    return {"sets": sets, "splits": splits, "emotion": {}, "skipped": {**skipped, "emotion": "off: set emotion.folder"},
            "asr": "pocketsphinx"}


DETECTION = [JudgedPair("AA", "mcadams", "mcadams", eer_val=0.2, eer_test=0.2, eer_test_ci=[0.15, 0.25]),
             JudgedPair("OO", "original", "original", eer_val=0.02, eer_test=0.02, eer_test_ci=[0.01, 0.03])]


def test_privacy_utility_points_are_matched_anonymised_pairs():
    points = semi_informed_points(DETECTION, {"mcadams": utility_result()})
    assert points == [{"system": "mcadams", "eer": 0.2, "eer_ci": [0.15, 0.25], "wer": 0.3, "wer_ci": [0.25, 0.35],
                       "pitch_correlation": 0.7, "pitch_correlation_ci": [0.6, 0.8]}]


@pytest.mark.parametrize("wer", [True, False])
def test_report_has_the_utility_table_and_says_what_was_skipped(tmp_path, wer):
    out = report.run(tmp_path / "report", run_summary(anonymizer="mcadams", detection=DETECTION,
                                                      utility=utility_result(wer),
                                                      detection_fit=[{"group": "", "reason": "too few points"}]))
    text = (out / "report.md").read_text()
    assert "## Utility metrics" in text and "| mcadams | test (pooled) | 0.700 |" in text
    assert ("WER anonymised %" in text) and (("| 30.00 |" in text) == wer)
    assert "| [0.600, 0.800] |" in text and (("| [25.00, 35.00] |" in text) == wer)
    assert "emotion skipped: off: set emotion.folder." in text
    assert ("wer skipped: the built-in synthetic corpus has no words (its transcripts spell random phones)." in text) != wer
    assert (out / "figures" / "privacy_utility.png").is_file()
    assert json.loads((out / "results.json").read_text())["utility"]["asr"] == "pocketsphinx"
    assert (out / "utility.csv").read_text().count("\n") == 4


def test_report_names_how_its_rho_f0_was_computed(tmp_path):
    summary = run_summary(anonymizer="mcadams", detection=DETECTION,
                          utility={**utility_result(), "pitch": {"tracker": "praat", "rule": "vpc2022"}},
                          detection_fit=[{"group": "", "reason": "too few points"}])
    text = (report.run(tmp_path / "vpc", summary) / "report.md").read_text()
    assert "Praat's F0, every frame, unvoiced as 0, after the VPC 2022 toolkit's cross-correlation shift" in text
    older = run_summary(anonymizer="mcadams", detection=DETECTION, utility=utility_result(),  # no "pitch": YIN
                        detection_fit=[{"group": "", "reason": "too few points"}])
    assert "vpeval's YIN F0 frame by frame (measured to lower ρF0 on female voices by octave errors: docs/utility.md), " \
        "frames voiced in both" in (report.run(tmp_path / "old", older) / "report.md").read_text()
    viterbi = run_summary(anonymizer="mcadams", detection=DETECTION,
                          utility={**utility_result(), "pitch": {"tracker": "yin_viterbi", "rule": "voiced"}},
                          detection_fit=[{"group": "", "reason": "too few points"}])
    text = (report.run(tmp_path / "viterbi", viterbi) / "report.md").read_text()
    assert "vpeval's YIN F0, its path by Viterbi, frames voiced in both" in text and "octave errors" not in text


def test_a_sweep_mixing_old_and_praat_results_names_both_methods(tmp_path):
    from pipeline.report.utility import utility_section

    section = utility_section([], {}, [], [], tmp_path, [{}, {"tracker": "praat", "rule": "voiced"}, {}])
    assert section.text.count("YIN F0") == 1 and "Praat's F0, frames voiced in both" in section.text


def test_the_utility_text_names_the_wer_rule_of_each_run(tmp_path):
    from pipeline.report.utility import utility_section

    section = utility_section([], {}, [], [], tmp_path, [{}], ["vpc_speechbrain", "vpc", "vpc_speechbrain"])
    assert "WER on original and anonymised speech (text rule utility.wer_text=vpc_speechbrain, vpc);" in section.text
    assert "text rule" not in utility_section([], {}, [], [], tmp_path).text  # results written before name none


def test_an_empty_utility_panel_says_why():
    """Regression (issue 27): the privacy-utility figure showed an empty WER panel with no note."""
    from pipeline.app.utility import NO_WORDS
    from pipeline.report.utility import privacy_utility_plot

    points = semi_informed_points(DETECTION, {"mcadams": utility_result(wer=False)})
    figure = privacy_utility_plot(points, {"wer": NO_WORDS})
    wer_panel, pitch_panel = figure.axes
    assert [t.get_text().replace("\n", " ") for t in wer_panel.texts] == [f"no WER of anonymised speech: {NO_WORDS}"]
    assert [t.get_text() for t in pitch_panel.texts] == ["mcadams"]  # its point's label, no note


def test_a_recogniser_failing_on_original_speech_is_flagged(tmp_path, caplog):
    """Issue 27: pocketsphinx gave 61-131 % WER on original speech of a small real corpus and the
    report printed the anonymised WER beside it as if it meant something."""
    import logging

    from pipeline.app.utility import MEANINGFUL_WER, flag_weak_recogniser, skip

    result = utility_result()
    result["sets"]["test_f"]["wer_original"] = 0.61
    flag_weak_recogniser(result)
    assert "61.0 %, above 30 %" in result["sets"]["test_f"]["wer_note"] and MEANINGFUL_WER == 0.30
    assert "wer_note" not in result["sets"]["test_m"] and "wer_note" not in result["splits"]["test"]
    out = report.run(tmp_path / "report", run_summary(anonymizer="mcadams", detection=DETECTION, utility=result,
                                                      detection_fit=[{"group": "", "reason": "too few points"}]))
    assert "WER not meaningful for mcadams test_f: the recogniser's WER on original speech is 61.0 %" in \
        (out / "report.md").read_text()
    caplog.set_level(logging.INFO, logger="pipeline.app.utility")
    from pipeline.app.utility import NO_WORDS

    skip({"skipped": {}}, "wer", NO_WORDS)
    skip({"skipped": {}}, "wer", "asr.folder=x: not found")
    assert [r.levelname for r in caplog.records if "skipped" in r.getMessage()] == ["INFO", "WARNING"]


def test_class_recalls_by_hand_are_vpcs_per_emotion_accuracies():
    from pipeline.metrics.uar import class_recalls

    assert class_recalls(["sad", "sad", "ang", "neu"], ["sad", "ang", "ang", "sad"]) == {"ang": 1.0, "neu": 0.0,
                                                                                        "sad": 0.5}

"""The report flags results whose utility says the anonymised speech was lost (issue 38:
a noise 'anonymiser' read as excellent privacy, ρF0 = 0.000 the only hint)."""
import json

from pipeline.report.utility import LOST_PITCH, LOST_WER, speech_lost, speech_lost_sections
from tests.helpers import condition, run_summary

RECORDS = [condition({"attack": a, "set": s, "trials": t}) for a, t in (("OO", "original"), ("AA", "anonymized"))
           for s in ("test_f", "test_m", "val")]


def test_lost_pitch_or_words_are_flagged_on_anonymised_trials_only():
    utility = {"sets": {"test_f": {"pitch_correlation": 0.0, "wer_original": 0.1, "wer_anonymized": 0.97},
                        "test_m": {"pitch_correlation": 0.72, "wer_original": 0.1, "wer_anonymized": 0.2}}}
    flags = speech_lost(RECORDS, utility)
    assert [(f["attack"], f["set"]) for f in flags] == [("AA", "test_f")]
    assert flags[0]["reason"] == f"ρF0 0.000 < {LOST_PITCH:g}; WER of anonymised speech 97.00 % >= 90 % (original 10.00 %)"
    section = speech_lost_sections(flags)[0]
    assert "lost the speech" in section.title and "do not show privacy" in section.text


def test_a_weak_recogniser_raises_no_wer_flag_and_thresholds_are_strict():
    utility = {"sets": {"test_f": {"pitch_correlation": LOST_PITCH, "wer_original": 0.95,
                                   "wer_anonymized": 1.0, "wer_note": "weak recogniser"},
                        "test_m": {"pitch_correlation": None, "wer_anonymized": LOST_WER - 0.01}}}
    assert speech_lost(RECORDS, utility) == [] and speech_lost(RECORDS, None) == []
    assert speech_lost_sections([]) == []


def test_the_report_warns_first_and_results_json_lists_the_flags(tmp_path):
    from pipeline.stages import report

    records = [{"attack": "AA", "set": "test_f", "anonymizer": "external", "attacker_anonymizer": "external",
                "enroll": "anonymized", "trials": "anonymized", "eer": 0.44}]
    utility = {"sets": {"test_f": {"pitch_correlation": 0.0, "utterances": 8}}, "splits": {}, "skipped": {}}
    out = report.run(tmp_path / "report", run_summary(records, anonymizer="external", utility=utility))
    text = (out / "report.md").read_text()
    assert text.index("Warning: output that lost the speech") < text.index("Settings")
    assert "| AA | test_f | ρF0 0.000 < 0.1 |" in text
    assert json.loads((out / "results.json").read_text())["speech_lost"] == [
        {"attack": "AA", "set": "test_f", "reason": "ρF0 0.000 < 0.1"}]
    assert (out / "utility.csv").is_file()

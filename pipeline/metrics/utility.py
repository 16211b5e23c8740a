"""The utility metrics (`contract.UtilityMetric`): what each measures, its columns and its source.

Their values come from stages on the original and anonymised versions of the same utterances
(`pipeline.app.utility` runs them): ρF0 and the WER per evaluation set and pooled per split,
the emotion UAR on the emotion data. Each column's key is a key of the utility results
(results.json's `utility`, utility.csv); a column with a header is printed in the report.
"""
from __future__ import annotations

from pipeline.core.vocabulary import ANONYMIZED, ORIGINAL
from pipeline.metrics.contract import EMOTION_DATA, TRANSCRIBED_TRIAL_AUDIO, TRIAL_AUDIO, Column, UtilityMetric
from pipeline.metrics.pitch_correlation import pitch_correlation
from pipeline.metrics.uar import unweighted_average_recall
from pipeline.metrics.wer import word_errors

PITCH_CORRELATION = UtilityMetric(
    "pitch_correlation", TRIAL_AUDIO,
    (Column("pitch_correlation", "ρF0", digits=3), Column("pitch_correlation_std", "ρF0 std", digits=3),
     Column("pitch_correlation_ci", "ρF0 CI", digits=3), Column("utterances", "# utterances")),
    pitch_correlation, higher_is_better=True,
    description="Pearson correlation of the original and anonymised F0 (utility.pitch_tracker: vpeval's YIN, by "
                "its Viterbi path or frame by frame, or Praat) over the frames voiced in both "
                "(utility.pitch_rule=voiced) or by the VPC 2022 toolkit's rule (vpc2022), mean over utterances",
    reference="VoicePrivacy 2022 (pitch_correlation.py)")

WORD_ERROR_RATE = UtilityMetric(
    "wer", TRANSCRIBED_TRIAL_AUDIO,
    (Column(f"wer_{ORIGINAL}", "WER original %", scale=100, digits=2),
     Column(f"wer_{ANONYMIZED}", "WER anonymised %", scale=100, digits=2), Column(f"wer_{ORIGINAL}_ci"),
     Column(f"wer_{ANONYMIZED}_ci", "WER anonymised CI %", scale=100, digits=2), Column("words", "# words"),
     Column("wer_note")),
    word_errors, higher_is_better=False,
    description="word errors of the recogniser `asr` over the reference words, on original and anonymised speech",
    reference="VoicePrivacy 2020-2024 ASR evaluation (Kaldi's compute-wer counts)")

EMOTION_RECALL = UtilityMetric(
    "emotion", EMOTION_DATA,
    (Column(f"uar_{ORIGINAL}", "UAR original %", scale=100, digits=2),
     Column(f"uar_{ANONYMIZED}", "UAR anonymised %", scale=100, digits=2), Column(f"class_recall_{ORIGINAL}"),
     Column(f"class_recall_{ANONYMIZED}"), Column("utterances", "# utterances"), Column("left_out", "# left out"),
     Column("classes", "classes"),
     Column("uar_rule", "UAR over"), Column("models", "classifiers"), Column("data", "emotion data")),
    unweighted_average_recall, higher_is_better=True,
    description="unweighted average recall of the emotion model `emotion.folder` on `emotion.data`, original and "
                "anonymised (VPC's fold models: each speaker by the model of its fold), over every utterance "
                "(utility.uar_rule=pooled), per speaker, then averaged (vpc), or over every utterance labelled "
                "ang, hap, neu or sad with sklearn's macro recall (vpc_track2)",
    reference="VoicePrivacy 2024 and 2026 (SER)")

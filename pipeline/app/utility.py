"""Utility metrics of an experiment, measured beside its privacy metrics (README.md, "Utility").

The metrics are those of `pipeline.metrics.registry.UTILITY_METRICS`, and the result holds their
columns only. For every evaluation set `<split>_<gender>` whose trial utterances the evaluated system
anonymises: ρF0 (VPC 2022, `stages.pitch`) and the word error rate of the recogniser
`asr` on the original and the anonymised utterances (VPC 2020-2024, `stages.transcribe`);
and, when `emotion.folder` and `emotion.data` are set, the emotion recognition UAR of that
data, original and anonymised (VPC 2024, `stages.emotion`). A metric that cannot be
measured (no reference transcripts, a missing model folder, unlabelled data...) is skipped
with its one-line reason in `skipped`, and the privacy part of the run goes on.

>>> measure(Experiment(cfg))["sets"]["test_f"]["pitch_correlation"]  # doctest: +SKIP
0.71
"""
from __future__ import annotations

import logging

import numpy as np

from pipeline.core.errors import VpevalError
from pipeline.core.vocabulary import ANONYMIZED, CONDITIONS, ORIGINAL
from pipeline.data.manifest import GENDERS, read_manifest
from pipeline.metrics.uar import emotion_recall, scored
from pipeline.metrics.utility import EMOTION_RECALL, PITCH_CORRELATION, WORD_ERROR_RATE
from pipeline.metrics.wer import ratio_interval, text_rule, word_errors
from pipeline.stages import anonymize, emotion, pitch, transcribe

log = logging.getLogger(__name__)
NO_WORDS = "the built-in synthetic corpus has no words (its transcripts spell random phones)"
EXPECTED_SKIPS = (NO_WORDS,)  # logged at INFO: nothing the user did wrong
# A recogniser above this WER on original speech fails on the corpus itself: the anonymised
# WER beside it measures that failure more than the system (VPC 2024's recogniser: 1.8 % on
# LibriSpeech test-clean; pocketsphinx on a small corpus of real voices: 61-131 %).
MEANINGFUL_WER = 0.30
WEAK_RECOGNISER = ("the recogniser's WER on original speech is {wer:.1f} %, above {limit:.0f} %: it fails on this "
                   "corpus itself, so the anonymised WER beside it says little about the system (use a stronger "
                   "asr, README.md \"Utility\")")


def measure(experiment) -> dict:
    """{"sets": {set: metrics}, "splits": {split: pooled metrics}, "emotion": {...},
    "skipped": {metric: reason}, "asr": name, "pitch": {"tracker", "rule"} (when ρF0 is measured),
    "wer_text": the WER's text rule (when the WER is measured)}
    of an `pipeline.app.experiment.Experiment`."""
    cfg = experiment.cfg
    result = {"sets": {}, "splits": {}, "emotion": {}, "skipped": {}, "asr": cfg.asr.name if "asr" in cfg else None}
    if not experiment.evaluates_anonymized():
        result["skipped"]["utility"] = "no attack evaluates speech anonymised by the evaluated system"
        return result
    sets = {f"{split}_{g}": (split, f"{split}_trials_{g}") for split in cfg.eval_splits for g in GENDERS}
    lists = {name: {kind: experiment.data(kind, trials, experiment.evaluated) for kind in CONDITIONS}
             for name, (_, trials) in sets.items()}
    result["sets"] = {name: {} for name in sets}
    metrics = {PITCH_CORRELATION.name: pitch_correlations, WORD_ERROR_RATE.name: word_error_rates}
    for metric, measure_metric in metrics.items():
        if not getattr(experiment.utility, metric):
            result["skipped"][metric] = f"off (utility.{metric}=false)"
            continue
        try:
            measure_metric(experiment, lists, sets, result)
        except VpevalError as error:
            skip(result, metric, str(error))
    try:
        emotion_recognition(experiment, result)
    except VpevalError as error:
        skip(result, EMOTION_RECALL.name, str(error))
    return result  # every key a column of UTILITY_METRICS: tests check it (unlisted_utility_keys)


def skip(result: dict, metric: str, reason: str) -> None:
    """Record a metric that could not be measured; logged at INFO when expected (the built-in
    corpus has no words), else as a warning (the run goes on)."""
    log.log(logging.INFO if reason in EXPECTED_SKIPS else logging.WARNING, "utility: %s skipped: %s", metric, reason)
    result["skipped"][metric] = reason


def interval(experiment, numerators, denominators) -> list[float]:
    """Utterance-bootstrap interval with the settings of `detect.bootstrap` and the run's seed."""
    boot = experiment.detect.bootstrap
    return list(ratio_interval(numerators, denominators, n_resamples=boot.n_resamples, confidence=boot.confidence,
                               seed=int(experiment.cfg.seed)))


def pitch_correlations(experiment, lists: dict, sets: dict, result: dict) -> None:
    """ρF0 per set (mean and std over its utterances) and per split (over all its utterances,
    with the bootstrap interval of the mean)."""
    values = {}
    result["pitch"] = {"tracker": experiment.utility.pitch_tracker, "rule": experiment.utility.pitch_rule}
    for name, pair in lists.items():
        found = pitch.load(pitch.run(pair[ORIGINAL], pair[ANONYMIZED], experiment.cache,
                                     tracker=experiment.utility.pitch_tracker, rule=experiment.utility.pitch_rule))
        values[name] = list(found["utterances"].values())
        result["sets"][name].update(pitch_correlation=found["mean"], pitch_correlation_std=found["std"],
                                    utterances=len(values[name]))
    for split in dict.fromkeys(split for split, _ in sets.values()):
        pooled = [v for name, (s, _) in sets.items() if s == split for v in values[name]]
        result["splits"].setdefault(split, {}).update(pitch_correlation=float(np.mean(pooled)),
                                                      pitch_correlation_std=float(np.std(pooled)),
                                                      pitch_correlation_ci=interval(experiment, pooled,
                                                                                    np.ones(len(pooled))))


def word_error_rates(experiment, lists: dict, sets: dict, result: dict) -> None:
    """WER of the original and the anonymised trial utterances per set and pooled per split
    (with the utterance-bootstrap interval), each split's lists transcribed as one (VPC's batches).
    The references are checked before any recogniser is loaded."""
    if experiment.data_settings.generate is not None:  # the built-in corpus (conf/data/synthetic*.yaml)
        raise VpevalError(NO_WORDS)
    rule = experiment.utility.wer_text
    normalise = text_rule(rule)
    references = {}
    for name, pair in lists.items():
        utts = read_manifest(pair[ORIGINAL])
        untranscribed = [u.id for u in utts if not u.text.strip()]
        if len(untranscribed) == len(utts):
            raise VpevalError(f"{pair[ORIGINAL]}: no utterance has a reference transcript (text)")
        if untranscribed:
            raise VpevalError(f"{pair[ORIGINAL]}: {len(untranscribed)} of {len(utts)} utterances have no reference "
                              f"transcript, first {untranscribed[0]}")
        references[name] = {u.id: u.text for u in utts}
    for split in dict.fromkeys(split for split, _ in sets.values()):
        names = [name for name, (s, _) in sets.items() if s == split]
        words = [len(normalise(text).split()) for name in names for text in references[name].values()]
        for kind in CONDITIONS:  # a split's lists transcribed as one, as VPC's combined trial dir
            manifests = [lists[name][kind] for name in names]
            hypotheses = transcribe.load(transcribe.run(experiment.cfg.asr, manifests, experiment.cache), manifests)
            errors = []
            for name in names:
                ids = list(references[name])
                counts = word_errors([references[name][u] for u in ids], [hypotheses[u] for u in ids], rule)
                result["sets"][name].update({f"wer_{kind}": counts.wer, "words": counts.words})
                errors += counts.per_utterance
            result["splits"].setdefault(split, {}).update({f"wer_{kind}": sum(errors) / sum(words),
                                                           f"wer_{kind}_ci": interval(experiment, errors, words)})
    result["wer_text"] = rule
    flag_weak_recogniser(result)


def flag_weak_recogniser(result: dict) -> None:
    """A `wer_note` on every set and split whose original-speech WER is above MEANINGFUL_WER."""
    for values in (*result["sets"].values(), *result["splits"].values()):
        original = values.get(f"wer_{ORIGINAL}")
        if original is not None and original > MEANINGFUL_WER:
            values["wer_note"] = WEAK_RECOGNISER.format(wer=100 * original, limit=100 * MEANINGFUL_WER)
            log.warning("utility: %s", values["wer_note"])


def emotion_recognition(experiment, result: dict) -> None:
    """UAR of the labelled emotion data, original and anonymised; off without folder and data."""
    settings = experiment.cfg.get("emotion")
    if not settings or not settings.get("folder") or not settings.get("data"):
        result["skipped"][EMOTION_RECALL.name] = "off: set emotion.folder (an emotion model) and emotion.data"
        return
    prepared = emotion.prepare(settings.data, experiment.cache)
    original = prepared / "manifest.jsonl"
    truth = emotion.load(prepared, emotion.LABELS)
    speakers = {u.id: u.speaker for u in read_manifest(original)}
    rule = experiment.utility.uar_rule
    folds = emotion.load_folds(prepared)
    found = {ORIGINAL: emotion.load(emotion.run(settings, original, experiment.cache, folds))}  # a bad model stops here
    anonymized = anonymize.run(experiment.evaluated, original, experiment.cache, list_name="emotion",
                               seed=int(experiment.cfg.anonymization_seed), device=experiment.device,
                               sample_rate=experiment.data_settings.sample_rate,
                               output_check=experiment.output_check)
    found[ANONYMIZED] = emotion.load(emotion.run(settings, anonymized / "manifest.jsonl", experiment.cache, folds))
    for kind, predicted in found.items():
        uar, recalls = emotion_recall(list(truth.values()), [predicted[u] for u in truth], [speakers[u] for u in truth],
                                      rule)
        result["emotion"][f"uar_{kind}"], result["emotion"][f"class_recall_{kind}"] = uar, recalls
    result["emotion"]["uar_rule"] = rule
    result["emotion"]["models"] = emotion.classifiers(settings, folds)
    result["emotion"]["data"] = str(settings.data)
    counted = [label for label, kept in zip(truth.values(), scored(list(truth.values()), rule)) if kept]
    result["emotion"]["utterances"] = len(counted)
    result["emotion"]["left_out"] = len(truth) - len(counted)  # vpc_track2: labels other than ang, hap, neu, sad
    result["emotion"]["classes"] = sorted(set(counted))

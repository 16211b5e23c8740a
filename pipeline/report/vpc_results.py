"""EERs in the layout of the VoicePrivacy 2024 toolkit's `results<suffix>.csv`.

VPC's `evaluate_asv` writes, for one ASV model, a pandas CSV (index column first) with the
columns dataset, split, gender, enrollment, trial, EER: one row per trial list and per
scenario (oo, oa, aa in that order), lists in the order dev f, dev m, test f, test m, EER in
percent rounded to 3 decimals (`round(EER * 100, 3)`, SpeechBrain's threshold-sweep EER:
vpeval's `eer_threshold`). VPC keeps one such file per ASV model (`exp/asv_orig`,
`exp/asv_anon<suffix>`); vpeval writes one per attacker: `asv_orig/results_<system>.csv` for
the attacker trained on original data (OO, OA, AA-lazy), `asv_anon_<attacker system>/
results_<system>.csv` for the retrained one (AA), so each can be diffed against VPC's file
of the same model.

>>> vpc_row("libri", "dev_common", "f", "anonymized", "anonymized", 0.0251234)
['libri', 'dev', 'f_common', 'anon', 'anon', '2.512']
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from pipeline.core.fileio import write_lines
from pipeline.core.vocabulary import ANONYMIZED, ORIGINAL, VPC_LABELS
from pipeline.metrics.results import ConditionResult

HEADER = ",dataset,split,gender,enrollment,trial,EER"
MODEL_FOLDERS = {ORIGINAL: "asv_orig", ANONYMIZED: "asv_anon_{attacker_system}"}
SCENARIO_ORDER = [(ORIGINAL, ORIGINAL), (ORIGINAL, ANONYMIZED), (ANONYMIZED, ORIGINAL),
                  (ANONYMIZED, ANONYMIZED)]  # oo, oa, (ao), aa as VPC lists them


def vpc_row(dataset: str, split_name: str, gender: str, enroll: str, trials: str, eer: float) -> list[str]:
    """One row's fields (without the index): VPC splits `<tag>_<split>_trials_<g>[_common]` on '_'."""
    split, _, variant = split_name.partition("_")
    return [dataset, split, f"{gender}_{variant}" if variant else gender,
            VPC_LABELS[enroll], VPC_LABELS[trials],
            repr(round(eer * 100, 3))]


def write_vpc_results(folder: Path, records: Sequence[ConditionResult], attacks: Mapping[str, Mapping], *, dataset: str,
                      system: str, attacker_system: str, eval_splits: Sequence[str],
                      genders: Sequence[str]) -> list[Path]:
    """Write `<folder>/<model>/results_<system>.csv` for each attacker of the run; returns the files.

    `records` are the run's results (attack, set, metric eer_threshold), `attacks` the attack
    specs (enroll, trials, attacker: original | anonymized)."""
    eers = {(r.attack, r.set): float(r.metrics["eer_threshold"]) for r in records}
    written = []
    for kind, model in MODEL_FOLDERS.items():
        scenarios = sorted(((name, spec) for name, spec in attacks.items() if spec["attacker"] == kind),
                           key=lambda item: SCENARIO_ORDER.index((item[1]["enroll"], item[1]["trials"])))
        if not scenarios:
            continue
        rows = [vpc_row(dataset, split_name, g, spec["enroll"], spec["trials"], eers[(name, f"{split_name}_{g}")])
                for split_name in eval_splits for g in genders for name, spec in scenarios]
        path = folder / model.format(attacker_system=attacker_system) / f"results_{system}.csv"
        write_lines(path, [HEADER, *(",".join([str(i), *row]) for i, row in enumerate(rows))])
        written.append(path)
    return written

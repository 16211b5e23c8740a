"""The re-identification metrics as `Metric`s of the contract, the rates built from the grid of
the `reidentification` config section: `singling_out_rate` and `identification_rate`
(`pipeline.metrics.legal`) and `rank_disclosure` (`pipeline.metrics.rank_disclosure`).

Their columns follow the grid (`contract.rate_key`): `singling_out_rate_N<N>_L<L>` and
`identification_rate_N<N'>_L<L>`, each with `_low` and `_high` (the Student-t
interval over speakers), and a `_detail` column with every estimate's chance
level, per-speaker rates and the speakers left out (results.json stores each cell
structured, `pipeline.metrics.results.RateCell`); `rank_disclosure_bits`,
`rank_disclosure_worst_bits` (histogram), `rank_disclosure_bb_bits`,
`rank_disclosure_bb_worst_bits` (beta-binomial) and `rank_disclosure_detail`. Rank disclosure
needs no grid: it is in the list of every run (`pipeline.metrics.registry.METRICS`); the rates
join it when `reidentification.enabled` (`registry.metric_list`).

The candidates of a condition are its enrolled speakers that its trial list tries (VPC
lists are per gender, so the speakers of the set's gender). A condition whose speakers
cannot serve the grid (a validation set, say) gives None with the reason; the evaluation
sets are checked before any work (`pipeline.app.experiment.check_reidentification`).
"""
from __future__ import annotations

import numpy as np

from pipeline.core.schemas import Reidentification
from pipeline.metrics.contract import EMBEDDINGS, Column, Condition, Metric, rate_key
from pipeline.metrics.inputs import UndefinedMetricError
from pipeline.metrics.legal import Grid, identification_rate, singling_out_rate
from pipeline.metrics.rank_disclosure import embedding_rank_disclosure

GRID_KEYS = ("populations", "candidates", "lengths", "calibration_conversations", "runs", "confidence",
             "short_speakers")
SINGLING_OUT, IDENTIFICATION = "singling_out_rate", "identification_rate"  # the rates over the grid
DISCLOSURE_KEYS = ("rank_disclosure_bits", "rank_disclosure_worst_bits", "rank_disclosure_bb_bits",
                   "rank_disclosure_bb_worst_bits")


def grid_of(settings: Reidentification, seed: int) -> Grid:
    """The typed `reidentification` section as the metrics' grid."""
    values = {k: getattr(settings, k) for k in GRID_KEYS}
    return Grid(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}, seed=seed)


def tried_enrolment(condition: Condition) -> tuple:
    """(trial embeddings, trial speakers, enrolment embeddings, enrolment speakers) with the
    enrolment cut to the speakers the trial list tries, and how many enrolled speakers it cut."""
    e = condition.embeddings
    tried = np.isin(np.asarray(e.enroll_speakers, dtype=str), np.asarray(e.trial_speakers, dtype=str))
    cut = len(set(np.asarray(e.enroll_speakers, dtype=str)[~tried].tolist()))
    return (e.trial, np.asarray(e.trial_speakers, dtype=str), e.enroll[tried],
            np.asarray(e.enroll_speakers, dtype=str)[tried]), cut


def rate_metric(name: str, cells: list[tuple[int, int]], estimate, settings: dict) -> Metric:
    """A rate over grid cells (size, L); `estimate(arrays, size, length)` -> (Estimate, left out)."""
    keys = [rate_key(name, n, length) for n, length in cells]

    def compute(condition: Condition) -> dict:
        arrays, cut = tried_enrolment(condition)
        values, detail = {}, {"enrolled_not_tried": cut}
        for key, (n, length) in zip(keys, cells):
            try:
                found, left_out = estimate(arrays, n, length)
            except ValueError as reason:
                raise UndefinedMetricError(f"{name} at N={n}, L={length}: {reason}") from None
            values.update({key: found.value, f"{key}_low": found.low, f"{key}_high": found.high})
            detail[key] = {**found.as_dict(), "left_out": left_out}
        return {**values, f"{name}_detail": detail}

    columns = tuple(Column(f"{key}{end}") for key in keys for end in ("", "_low", "_high"))
    return Metric(name, EMBEDDINGS, (*columns, Column(f"{name}_detail")), compute, built_with=settings,
                  cells=tuple(cells))


def reidentification_metrics(settings: Reidentification | None, seed: int) -> tuple[Metric, ...]:
    """The metrics of the typed `reidentification` section (none when it is absent or off)."""
    if settings is None or not settings.enabled:
        return ()
    grid = grid_of(settings, seed)
    key = {**{k: getattr(settings, k) for k in GRID_KEYS}, "seed": seed}
    m = grid.calibration_conversations

    def singling_out(arrays, n, length):
        return singling_out_rate(*arrays, n, length, m, grid.runs, seed, grid.confidence, grid.short_speakers)

    def identification(arrays, n, length):
        return identification_rate(*arrays, n, length, grid.runs, seed, grid.confidence)

    found = [rate_metric(SINGLING_OUT, [(n, length) for length in grid.lengths for n in grid.populations],
                         singling_out, key),
             rate_metric(IDENTIFICATION, [(n, length) for length in grid.lengths for n in grid.candidates],
                         identification, key)]
    return tuple(metric for metric in found if metric.keys != (f"{metric.name}_detail",))


def disclosure_of(condition: Condition) -> dict:
    arrays, cut = tried_enrolment(condition)
    if len(set(arrays[3].tolist())) < 2:
        raise UndefinedMetricError("rank disclosure needs at least 2 enrolled speakers that the trial list tries")
    found, left_out = embedding_rank_disclosure(*arrays)
    values = (found["histogram"]["average"], found["histogram"]["worst"], found["beta_binomial"]["average"],
              found["beta_binomial"]["worst"])
    return {**dict(zip(DISCLOSURE_KEYS, values)),
            "rank_disclosure_detail": {**found, "left_out": {**left_out, "enrolled_not_tried": cut}}}


RANK_DISCLOSURE = Metric(
    "rank_disclosure", EMBEDDINGS,
    (Column("rank_disclosure_bits", "rank disclosure (bits)", "SRD bits", digits=3),
     Column("rank_disclosure_worst_bits", "worst-case rank disclosure (bits)", "SRD worst", digits=3),
     Column("rank_disclosure_bb_bits"), Column("rank_disclosure_bb_worst_bits"), Column("rank_disclosure_detail")),
    disclosure_of)

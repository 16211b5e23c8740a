"""The metric contract: what a metric needs, how it computes, how it prints, its version.

A metric is a `Metric`: a name, what it needs (`SCORES`; `SPEAKERS`: scores with the
enrolment speaker of every trial; `EMBEDDINGS`: enrolment and trial embeddings with their
speakers), a `compute(condition) -> {key: value}`, the `Column`s it fills (every key it
returns, in order; a column with a header is printed in the report, in the table its
`section` names, and in `vpeval metrics`; every column goes to results.json and
results.csv), a `version` to raise whenever its numbers change, and `built_with`: the config
settings a metric built from the config was made with (the re-identification grid), part of
the evaluate stage's key, and, for a rate over that grid, its `cells` (results.json stores each
cell structured, `pipeline.metrics.results.RateCell`). `pipeline.metrics.registry.METRICS` lists them all; the summary, the
report, `vpeval metrics`, results.csv and the evaluate stage's cache key iterate that list.

A value a metric cannot give for legal input is `Undefined(reason)`: the runner stores None
and the reason under the column's key in `notes` (as a raised `UndefinedMetricError` does
for every column of the metric).

A utility metric (how much of the speech an anonymiser keeps) is a `UtilityMetric`: it is
measured on the original and the anonymised version of the same utterances, not on scores,
by stages (`pipeline.app.utility` runs them); it declares its name (the key under which a
skipped one gives its reason), what it needs, the `Column`s it fills in the utility results
(the report's utility tables print those with a header), which direction is better, the
function that computes its value, and its source. `registry.UTILITY_METRICS` lists them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

import numpy as np

from pipeline.metrics.inputs import UndefinedMetricError, as_scores
from pipeline.metrics.roc import PavBins, ScoreGroups, group_scores, pav_bins

SCORES, SPEAKERS, EMBEDDINGS = "scores", "speakers", "embeddings"
NEEDS = (SCORES, SPEAKERS, EMBEDDINGS)
# What a utility metric needs: the trial utterances of every evaluation set, original and anonymised
# (with reference transcripts for TRANSCRIBED), or labelled emotion data (`emotion.data`), original and anonymised.
TRIAL_AUDIO, TRANSCRIBED_TRIAL_AUDIO, EMOTION_DATA = "trial audio", "transcribed trial audio", "emotion data"
UTILITY_NEEDS = (TRIAL_AUDIO, TRANSCRIBED_TRIAL_AUDIO, EMOTION_DATA)
UTILITY = "Utility metrics"  # the report section of the utility metrics
DEFAULT_SETTINGS = {"p_target": 0.01, "c_miss": 1.0, "c_fa": 1.0, "omega": 1.0}
MISSING = {SPEAKERS: "needs the enrolment speaker of every trial (a `score label` file has none)",
           EMBEDDINGS: "needs enrolment and trial embeddings with their speakers (the evaluate stage of a run)"}


@dataclass(frozen=True)
class Undefined:
    """A value a metric has no number for, with the reason (goes to `notes`)."""

    reason: str


@dataclass(frozen=True)
class Column:
    """One value of a metric: its results key; its report header and `vpeval metrics` header
    (`short`, the header by default; no header: results.json / results.csv only); printed
    times `scale` with `digits` decimals (None: as text, lists joined by commas)."""

    key: str
    header: str | None = None
    short: str | None = None
    scale: float = 1.0
    digits: int | None = None

    @property
    def cli_header(self) -> str | None:
        return self.short or self.header

    def format(self, value: Any) -> str:
        """The value as a table cell ('-' when missing)."""
        if value is None:
            return "-"
        if isinstance(value, (list, tuple)):
            return ", ".join(str(v) for v in value) or "-"
        if self.digits is None or isinstance(value, str):
            return str(value)
        return f"{self.scale * value:.{self.digits}f}"


@dataclass(frozen=True)
class Embeddings:
    """Speaker embeddings of one condition: every enrolment and trial utterance (rows) with its speaker."""

    enroll: np.ndarray
    enroll_speakers: np.ndarray
    trial: np.ndarray
    trial_speakers: np.ndarray

    def __post_init__(self):
        for name, vectors, speakers in (("enrolment", self.enroll, self.enroll_speakers),
                                        ("trial", self.trial, self.trial_speakers)):
            if np.ndim(vectors) != 2 or len(vectors) != len(speakers):
                raise ValueError(f"{name} embeddings {np.shape(vectors)} for {len(speakers)} speaker labels")


@dataclass
class Condition:
    """What a metric receives: one condition's target and non-target scores; the enrolment
    speaker (`*_speakers`) and test speaker (`*_test_speakers`) of every trial where known;
    embeddings where known; settings (`DEFAULT_SETTINGS` keys). Derived score structures
    are computed once and shared by the metrics."""

    target: np.ndarray
    nontarget: np.ndarray
    target_speakers: np.ndarray | None = None
    nontarget_speakers: np.ndarray | None = None
    target_test_speakers: np.ndarray | None = None
    nontarget_test_speakers: np.ndarray | None = None
    embeddings: Embeddings | None = None
    settings: dict = field(default_factory=lambda: dict(DEFAULT_SETTINGS))

    def __post_init__(self):
        self.target = as_scores(self.target, "target")
        self.nontarget = as_scores(self.nontarget, "non-target")
        self.settings = {**DEFAULT_SETTINGS, **self.settings}

    @cached_property
    def groups(self) -> ScoreGroups:
        return group_scores(self.target, self.nontarget)

    @cached_property
    def bins(self) -> PavBins:
        return pav_bins(self.groups)

    def has(self, need: str) -> bool:
        """Whether this condition carries what a metric with `need` needs."""
        if need == SPEAKERS:
            return self.target_speakers is not None and self.nontarget_speakers is not None
        if need == EMBEDDINGS:
            return self.embeddings is not None
        return True


@dataclass(frozen=True)
class Metric:
    """One metric of the list (see the module docstring)."""

    name: str
    needs: str
    columns: tuple[Column, ...]
    compute: Callable[[Condition], dict]
    version: int = 1
    section: str = "Privacy metrics"  # the report table its columns go to
    built_with: dict = field(default_factory=dict, hash=False)  # config it was built from (a grid): in the key
    cells: tuple[tuple[int, int], ...] = ()  # a rate over a grid: its (N, L) cells, columns named by `rate_key`

    def __post_init__(self):
        if self.needs not in NEEDS:
            raise ValueError(f"metric {self.name}: needs must be one of {NEEDS}, got {self.needs!r}")

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(column.key for column in self.columns)


@dataclass(frozen=True)
class UtilityMetric:
    """One utility metric of the list (see the module docstring): its values are measured per
    evaluation set and pooled per split (`TRIAL_AUDIO`, `TRANSCRIBED_TRIAL_AUDIO`), or once on the
    emotion data (`EMOTION_DATA`)."""

    name: str
    needs: str
    columns: tuple[Column, ...]
    compute: Callable  # the function that gives its value (of one utterance or one set)
    higher_is_better: bool
    description: str
    reference: str
    section: str = UTILITY

    def __post_init__(self):
        if self.needs not in UTILITY_NEEDS:
            raise ValueError(f"utility metric {self.name}: needs must be one of {UTILITY_NEEDS}, got {self.needs!r}")

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(column.key for column in self.columns)


def rate_key(name: str, n: int, length: int) -> str:
    """The column of a rate's grid cell (N, L); results.json holds the cells structured
    (`pipeline.metrics.results.RateCell`), results.csv by this name (`_low`, `_high` beside it).

    >>> rate_key("singling_out_rate", 10, 1)
    'singling_out_rate_N10_L1'
    """
    return f"{name}_N{n}_L{length}"


def run_metrics(condition: Condition, metrics) -> dict:
    """Every column of every metric of `metrics` on `condition`, then `notes` ({key: reason}
    for each None value). A metric whose needs the condition lacks gives None with the reason."""
    values, notes = {}, {}
    for metric in metrics:
        if not condition.has(metric.needs):
            values.update(dict.fromkeys(metric.keys))
            notes[metric.name] = MISSING[metric.needs]
            continue
        try:
            found = metric.compute(condition)
        except UndefinedMetricError as reason:
            found = {key: Undefined(str(reason)) for key in metric.keys}
        if set(found) != set(metric.keys):
            raise ValueError(f"metric {metric.name} returned {sorted(found)}, its columns are {list(metric.keys)}")
        for key in metric.keys:
            value = found[key]
            if isinstance(value, Undefined):
                notes[key] = value.reason
                value = None
            values[key] = value
    return {**values, "notes": notes}


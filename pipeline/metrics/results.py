"""The typed results of a run (`report/results.json`) and of a sweep's aggregate: what the
stages write and the report, the aggregate, the VPC writers and the recipes' scripts read.

- `ConditionResult`: one attack x evaluation set; its metric values keyed by the metric
  contract's column names (`pipeline.metrics.registry.METRICS`), the re-identification grid
  as `RateCell`s (one per rate, N and L, never encoded in a key);
- `DetectionPair`: one attack's (EER_val, EER_test) as `pipeline.metrics.detection.pairs`
  measures it; `JudgedPair`: the same with its calibration set and verdict;
- `RunSummary`: results.json of one run, with `FORMAT_VERSION`; `SweepSummary`: the
  aggregate's results.json.

`RunSummary.from_json` refuses a file of another format version, or one missing a field, with
one line naming the file and the field. `json_schema()` gives the JSON Schema of both files
(published as docs/results.schema.json by `scripts/results_schema.py`).

>>> cell = RateCell("identification_rate", 2, 1, 0.75, 0.5, 1.0, {"chance": 0.5})
>>> from_plain(RateCell, to_plain(cell), "x.json") == cell
True
"""
from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from pipeline.core.cache import StageEvent
from pipeline.core.errors import input_error
from pipeline.core.fileio import write_json
from pipeline.metrics.contract import Metric, rate_key
from pipeline.metrics.registry import METRICS

FORMAT_VERSION = 1


@dataclass(frozen=True)
class RateCell:
    """A re-identification rate at one grid cell: `n` test speakers (singling out) or
    candidates (identification), conversations of `length` utterances; `estimate` holds its
    chance level, speakers and those left out (None when the rate is undefined)."""

    metric: str
    n: int
    length: int
    value: float | None
    low: float | None
    high: float | None
    estimate: dict | None

    @property
    def key(self) -> str:
        """The cell's column in results.csv."""
        return rate_key(self.metric, self.n, self.length)


@dataclass
class ConditionResult:
    """One attack x evaluation set: its labels, every metric column's value (`metrics`, keyed
    as the metric contract names them; a rate over the grid keeps its `<name>_detail` column
    there without its cells), the grid's cells (`rates`), the speaker-bootstrap interval of
    the EER (the confidence stage) and, on validation sets, where the attacker came from."""

    attack: str
    anonymizer: str
    attacker_anonymizer: str
    enroll: str
    trials: str
    set: str
    metrics: dict[str, Any]
    notes: dict[str, str] = field(default_factory=dict)
    rates: list[RateCell] = field(default_factory=list)
    eer_ci_low: float | None = None  # the confidence stage's `eer_*` values
    eer_ci_high: float | None = None
    eer_ci_level: float | None = None
    eer_speakers: int | None = None
    attacker_origin: str | None = None  # validation sets only, as the next two
    imported: str | None = None
    protocol_problem: str | None = None
    job: str | None = None  # the sweep job (aggregate only)

    @classmethod
    def measured(cls, values: dict, metrics: tuple[Metric, ...], **labels) -> ConditionResult:
        """A condition's result from the flat values of its metrics (`metrics`, those it was
        evaluated with) and of the confidence stage (`eer_ci_*`, `eer_speakers`)."""
        values = dict(values)
        notes = values.pop("notes", {})
        interval = {f.name: values.pop(f.name) for f in fields(cls) if f.name.startswith("eer_") and f.name in values}
        rates = []
        for metric in metrics:
            if not metric.cells:
                continue
            detail_key = f"{metric.name}_detail"
            detail = dict(values[detail_key]) if values.get(detail_key) else None
            for n, length in metric.cells:
                key = rate_key(metric.name, n, length)
                rates.append(RateCell(metric.name, n, length, values.pop(key), values.pop(f"{key}_low"),
                                      values.pop(f"{key}_high"), detail.pop(key, None) if detail else None))
            values[detail_key] = detail
        return cls(**labels, metrics=values, notes=notes, rates=rates, **interval)

    @property
    def eer(self) -> float:
        return self.metrics["eer"]

    @property
    def eer_ci(self) -> list[float] | None:
        """[low, high] of the EER's bootstrap interval, None when it has none."""
        return None if self.eer_ci_low is None or self.eer_ci_high is None else [self.eer_ci_low, self.eer_ci_high]

    def row(self) -> dict:
        """One flat row of results.csv: the labels, every metric column (a grid cell's as
        `<name>_N<n>_L<L>`, `_low`, `_high`, its estimate in the rate's `_detail`), the notes,
        the interval and the validation sets' fields."""
        metrics = {}
        for key, value in self.metrics.items():
            cells = [c for c in self.rates if key == f"{c.metric}_detail"]
            for c in cells:
                metrics.update({c.key: c.value, f"{c.key}_low": c.low, f"{c.key}_high": c.high})
            estimates = {c.key: c.estimate for c in cells if c.estimate is not None}
            metrics[key] = {**value, **estimates} if cells and value is not None else value
        names = [f.name for f in fields(self)]  # the labels, metrics, notes, rates, then the interval's and the rest
        labels, after = names[:names.index("metrics")], [n for n in names[names.index("rates") + 1:] if n != "job"]
        return {**({"job": self.job} if self.job is not None else {}), **{k: getattr(self, k) for k in labels},
                **metrics, "notes": self.notes, **{k: getattr(self, k) for k in after}}


@dataclass
class DetectionPair:
    """One attack's EER_val against its EER_test (`pipeline.metrics.detection.pairs`): means
    of the female and male sets (`eer_by_set` holds each), their intervals, the gap and
    relative drop, the validation trials and speakers, the paired bootstrap replicates (when
    the confidence stage gave them) and the notes a reader of EER_val must know."""

    attack: str
    anonymizer: str
    attacker_anonymizer: str
    eer_val: float
    eer_test: float
    enroll: str | None = None
    trials: str | None = None
    eer_val_ci: list[float] | None = None
    eer_test_ci: list[float] | None = None
    eer_by_set: dict[str, float] = field(default_factory=dict)
    gap: float | None = None
    gap_var: float | None = None
    relative_drop: float | None = None
    relative_drop_ci: list[float] | None = None
    val_trials: list[int | None] | None = None
    val_speakers: int | None = None
    test_speakers: int | None = None
    attacker_origin: str = "trained"
    imported: str | None = None
    protocol_problem: str | None = None
    notes: list[str] = field(default_factory=list)
    eer_val_replicates: list[float] | None = None
    eer_test_replicates: list[float] | None = None
    ci_level: float | None = None

    def row(self) -> dict:
        """The pair as the detection statistics' row (`pipeline.metrics.detection.assess`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def measured(self) -> DetectionPair:
        """Only what `pairs` measured (a judged pair's verdict and calibration set left out)."""
        return DetectionPair(**{f.name: getattr(self, f.name) for f in fields(DetectionPair)})


@dataclass
class JudgedPair(DetectionPair):
    """A pair with its calibration set (validation protocol, seeds, the sweep's group and
    job) and the detection's judgement (`pipeline.metrics.detection.verdict`)."""

    validation_protocol: str | None = None
    seed: int | None = None
    anonymization_seed: int | None = None
    group: str = ""
    job: str | None = None
    role: str | None = None
    predicted_eer_val: float | None = None
    residual: float | None = None
    residual_ci: list[float] | None = None
    below_line: bool | None = None
    margin: float | None = None
    flag_below: float | None = None
    flag: bool = False
    column: dict | None = None
    verdict: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class DetectSettings:
    """`detect.*` as the run used it: the val-test model, its false-alarm rate, the tolerance
    of `trustworthy`, whether the column test ran, and `detect.trusted` as one string."""

    method: str
    false_alarm: float
    tolerance: float
    column: bool
    trusted: str | None = None


@dataclass(frozen=True)
class RunConfig:
    """What a run was: its systems, attacker, backend, seeds, detection settings and group."""

    name: str
    data: str
    data_tag: str
    anonymizer: str
    attacker_anonymizer: str
    attacker: str
    backend: str
    attacks: str
    seed: int | None
    anonymization_seed: int | None
    detect: DetectSettings
    detection_group: str
    validation_protocol: str
    similarity: bool = False
    asr: str | None = None
    emotion: bool = False


@dataclass
class RunSummary:
    """results.json of one run (see `pipeline.stages.report`)."""

    config_hash: str
    config: RunConfig
    records: list[ConditionResult]
    detection: list[JudgedPair]
    detection_fit: list[dict]
    score_files: dict[str, str]
    stages: list[StageEvent]
    similarity: dict[str, dict] | None = None
    utility: dict | None = None
    speech_lost: list[dict] | None = None
    format_version: int = FORMAT_VERSION

    def to_json(self, path: Path) -> Path:
        write_json(path, to_plain(self))
        return path

    @classmethod
    def from_json(cls, path: Path) -> RunSummary:
        return read_json(cls, path)


@dataclass(frozen=True)
class SweepJob:
    """One finished job of a sweep."""

    job: str
    overrides: list[str]
    config: RunConfig
    config_hash: str


@dataclass
class SweepSummary:
    """results.json of a sweep's aggregate (see `pipeline.app.aggregate`)."""

    sweep: str
    jobs: list[SweepJob]
    failed: list[dict]
    unfinished: list[dict]
    records: list[ConditionResult]
    detection: list[JudgedPair]
    detection_fit: list[dict]
    seeds: list[dict]
    format_version: int = FORMAT_VERSION

    def to_json(self, path: Path) -> Path:
        write_json(path, to_plain(self))
        return path

    @classmethod
    def from_json(cls, path: Path) -> SweepSummary:
        return read_json(cls, path)


def read_json(cls: type, path: Path):
    """A results file as `cls`; one line naming the file and the problem when it is no JSON,
    of another format version or lacks a field."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise input_error(path, f"not JSON ({error.msg} at line {error.lineno}): interrupted while written?") from None
    except UnicodeDecodeError:
        raise input_error(path, "not a results file (not UTF-8 text)") from None
    except OSError as error:
        raise input_error(path, f"cannot be read ({error.strerror or error})") from None
    return from_data(cls, data, path)


def from_data(cls: type, data, path: Path):
    """`cls` built from the contents of the results file `path` (see `read_json`)."""
    if not isinstance(data, dict):
        raise input_error(path, "not a results file (a JSON object expected)")
    found = data.get("format_version")
    if type(found) is not int or found != FORMAT_VERSION:
        older = "none (written by an older vpeval)" if found is None else repr(found)
        raise input_error(path, f"format_version {FORMAT_VERSION} expected, found {older}; rerun the experiment "
                                "(its stages are cached) to rewrite it")
    return from_plain(cls, {k: v for k, v in data.items() if k != "format_version"}, path)


def to_plain(value):
    """A results object as JSON values (dataclasses as objects, field by field)."""
    if is_dataclass(value):
        return {f.name: to_plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value


def from_plain(cls: type, data, path: Path, where: str = ""):
    """`cls` built from JSON values; a missing field, a key that is no field (a renamed field would
    otherwise read as absent) or a value of another type raises one line naming it (`where`: its place)."""
    if not isinstance(data, dict):
        raise input_error(path, f"{where or cls.__name__}: an object expected, found {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    for key in data:
        if key not in known:
            raise input_error(path, f"{f'{where}.' if where else ''}{key}: not a field of {cls.__name__} "
                                    "(hand-edited, or written by another vpeval?)")
    values = {}
    for f in fields(cls):
        name = f"{where}.{f.name}" if where else f.name
        if f.name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise input_error(path, f"{name} missing (hand-edited?): rerun the experiment (its stages are cached) "
                                        "to rewrite it")
            continue
        values[f.name] = _value(hints[f.name], data[f.name], path, name)
    return cls(**values)


def _value(kind, value, path: Path, where: str):
    """A field's JSON value as its type: dataclasses (and lists of them) are built, the rest
    checked against its type (null only where the field may be None) and kept."""
    optional = kind is Any or (_is_union(kind) and type(None) in typing.get_args(kind))
    if value is None:
        if optional:
            return None
        raise input_error(path, f"{where}: null where a value is expected (hand-edited?)")
    inner = [k for k in typing.get_args(kind) if k is not type(None)] if _is_union(kind) else [kind]
    if not any(_fits(k, value) for k in inner):
        raise input_error(path, f"{where}: {type(value).__name__} {_short(value)} where {_type_name(kind)} is "
                                "expected (hand-edited?)")
    kind = inner[0] if len(inner) == 1 else kind
    if is_dataclass(kind):
        return from_plain(kind, value, path, where)
    if typing.get_origin(kind) is list and typing.get_args(kind) and is_dataclass(typing.get_args(kind)[0]):
        return [from_plain(typing.get_args(kind)[0], v, path, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _fits(kind, value) -> bool:
    """Whether a JSON value can be a field of type `kind` (its containers' items are checked
    where they are dataclasses, by `from_plain`)."""
    if kind is Any:
        return True
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is str:
        return isinstance(value, str)
    if is_dataclass(kind) or kind is dict or typing.get_origin(kind) is dict:
        return isinstance(value, dict)
    if kind is list or typing.get_origin(kind) is list:
        return isinstance(value, list)
    return True


def _type_name(kind) -> str:
    inner = [k for k in typing.get_args(kind) if k is not type(None)] if _is_union(kind) else [kind]
    names = [SCALARS.get(k) or ("an object" if is_dataclass(k) or k is dict or typing.get_origin(k) is dict
                                else "an array" if k is list or typing.get_origin(k) is list else str(k))
             for k in inner]
    return " or ".join(f"an {n}" if n == "integer" else f"a {n}" if n in SCALARS.values() else n for n in names)


def _short(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 30 else text[:27] + "..."


def _is_union(kind) -> bool:
    return typing.get_origin(kind) in (typing.Union, types.UnionType)


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of results.json: a run's (`RunSummary`) or a sweep
    aggregate's (`SweepSummary`), generated from the dataclasses."""
    definitions: dict[str, dict] = {}
    run, sweep = _schema(RunSummary, definitions), _schema(SweepSummary, definitions)
    definitions["ConditionResult"]["properties"]["metrics"] = {  # the contract's columns (and a grid's `_detail`)
        "type": "object", "properties": {c.key: {"description": c.header or c.key} for m in METRICS for c in m.columns}}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "results.schema.json",
            "title": "vpeval results.json", "description": f"format_version {FORMAT_VERSION}",
            "oneOf": [run, sweep], "$defs": dict(sorted(definitions.items()))}


SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema(kind, definitions: dict) -> dict:
    if kind is Any:
        return {}
    if _is_union(kind):
        options = [k for k in typing.get_args(kind) if k is not type(None)]
        found = _schema(options[0], definitions) if len(options) == 1 else {"anyOf": [_schema(k, definitions)
                                                                                        for k in options]}
        if "type" in found:
            return {**found, "type": [found["type"], "null"]}
        return {"anyOf": [found, {"type": "null"}]}
    if kind in SCALARS:
        return {"type": SCALARS[kind]} if kind is not float else {"type": "number"}
    if is_dataclass(kind):
        name = kind.__name__
        if name not in definitions:
            definitions[name] = {}
            hints = typing.get_type_hints(kind)
            definitions[name] = {
                "type": "object", "description": " ".join((kind.__doc__ or "").split()),
                "properties": {f.name: _schema(hints[f.name], definitions) for f in fields(kind)},
                "required": [f.name for f in fields(kind) if f.default is MISSING and f.default_factory is MISSING],
                "additionalProperties": False}
        return {"$ref": f"#/$defs/{name}"}
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is list:
        return {"type": "array", **({"items": _schema(args[0], definitions)} if args else {})}
    if origin is dict or kind is dict:
        return {"type": "object", **({"additionalProperties": _schema(args[1], definitions)} if args else {})}
    raise TypeError(f"no JSON Schema for {kind!r}")

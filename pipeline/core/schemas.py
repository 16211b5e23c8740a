"""Typed schemas of the config sections whose keys are the same in every option, registered in
Hydra's ConfigStore (group `schema`, package = the section), and the check of a composed
config against them.

Every field is MISSING (the values live in conf/). A field gives its key's type and, in its
metadata, its range (`limited`: a pipeline.core.checks.Check); an untyped `_target_` field the
ranges of the keys below it that its options share (`plugin`); `checks` collects them for
pipeline.app.settings, whose COMBINATIONS check relations between keys. `type_problems` merges a
plain copy of each section into its schema, so the config the pipeline runs and hashes never
becomes typed (no int -> float coercion, no new keys). A key a schema does not have is refused
with the closest name. `typed` converts a checked section, once, into its schema's dataclass,
the settings a stage takes. An `Any` field (a `_target_` plugin: data.reader, data.protocol,
attacker.model, the optimiser and scheduler) is not typed here, nor are the plugin groups
whose keys differ per option (anonymizer, attacker_anonymizer, asr, emotion): their overrides
are checked against the option's own defaults (pipeline.core.config.check_value_types).

>>> from omegaconf import OmegaConf
>>> type_problems(OmegaConf.create({"seed": "abc", "split": {"val_fraction": 0.1, "val_fraktion": 0.2}}))
['seed=abc: must be an integer', "split.val_fraktion=0.2: unknown key (did you mean 'split.val_fraction'?)"]
"""
from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException, ValidationError

from pipeline.core.config_tree import did_you_mean
from pipeline.core.errors import VpevalError
from pipeline.core.checks import (
    COUNT,
    COUNT0,
    FRACTION,
    PRECISION,
    SECONDS,
    SEED,
    Check,
    between,
    integer,
    non_negative,
    number,
    one_of,
    open_range,
    optional,
    positive,
    range_problems,
    shown,
)
from pipeline.core.vocabulary import ANONYMIZED, CONDITIONS, ORIGINAL

GROUP = "schema"
ROOT = "_global_"  # the package of the top-level keys
ABSENT = object()
# VPC 2024 trains its attacker 10 epochs, the shipped attackers 4 to 10. 10,000 epochs of
# train-clean-360 take about 10 days on an H100 (docs/performance.md: 10 in 14.3 min), decades on
# CPU: a larger count is a typo, refused before any stage starts.
MAX_EPOCHS = 10_000
AT_LEAST_TWO = Check("a list of integers >= 2", lambda v: isinstance(v, ListConfig) and all(integer(2)(n) for n in v))
POSITIVE = Check("a number > 0", positive)
NON_NEGATIVE = Check("a number >= 0", non_negative)
LR_RATIO = Check("a number in (0, 1]", lambda v: number(v) and 0 < v <= 1)


SHORTEST_SYNTHETIC = 0.5  # seconds: the built-in synthesiser's shortest utterance (pipeline.data.synthetic)


def duration_pair(v) -> bool:
    return (isinstance(v, (list, ListConfig)) and len(v) == 2 and all(map(positive, v))
            and SHORTEST_SYNTHETIC <= v[0] <= v[1])


def limited(check: Check):
    """A field whose values `check` limits."""
    return field(default=MISSING, metadata={"check": check})


def plugin(**below: Check):
    """An untyped `_target_` field whose options share the keys `below`, each limited by its check."""
    return field(default=MISSING, metadata={"below": below})


@dataclass
class Run:
    """The top-level scalars (the root also holds the groups, so only these keys are looked at)."""
    name: str = MISSING
    seed: int = limited(SEED)
    anonymization_seed: int = MISSING
    device: str = limited(Check("auto, cpu, cuda or cuda:N",
                                lambda v: isinstance(v, str) and re.fullmatch(r"auto|cpu|cuda(:\d+)?", v)))
    eval_splits: list[str] = MISSING
    similarity: bool = MISSING


@dataclass
class Paths:
    data: str = MISSING
    cache: str = MISSING
    runs: str = MISSING
    corpora: str = MISSING


@dataclass
class GeneratedSubset:
    female: int = limited(COUNT0)
    male: int = limited(COUNT0)
    utterances: int = limited(COUNT)


@dataclass
class Generate:
    seed: int = limited(SEED)
    duration: list[float] = limited(Check(f"a [low, high] pair of seconds, {SHORTEST_SYNTHETIC} <= low <= high",
                                          duration_pair))
    chapters_per_speaker: int = limited(COUNT)
    subsets: dict[str, GeneratedSubset] = MISSING


@dataclass
class Data:
    name: str = MISSING
    tag: str = MISSING
    root: str = MISSING
    sample_rate: int = limited(COUNT)
    convert_audio: bool = MISSING
    skip_bad: bool = MISSING
    workers: int | None = limited(Check("null or an integer >= 1", optional(integer(1))))
    reader: Any = plugin(seed=SEED)  # _target_ plugin: its arguments differ per reader
    generate: Generate | None = MISSING
    subsets: dict[str, Any] = MISSING  # train: a list of folders, the others one folder
    protocol: Any = plugin(seed=SEED, enroll_fraction=FRACTION, enroll_utterances=COUNT)  # _target_ plugin
    eval_trials: str = limited(Check("same_gender, mixed or both", one_of("same_gender", "mixed", "both")))
    language: str | None = None  # data=mls and vpc_mls only: the MLS language read (mls_<language>/)
    mixed_seed: int = limited(COUNT0)


@dataclass
class SparseTrials:
    target: int = MISSING
    nontarget: int = MISSING


@dataclass
class Split:
    val_fraction: float = limited(FRACTION)
    holdout: str = limited(Check("unseen, speaker or list", one_of("unseen", "speaker", "list")))
    unseen_speakers: Any = limited(Check("null, a list of speaker ids or the path of a file of them",
                                         lambda v: v is None or isinstance(v, (str, ListConfig))))
    enroll_utterances: int = limited(COUNT)
    select_fraction: float | None = limited(Check("null or a number in (0, 1)", optional(open_range(0, 1))))
    sparse_trials: SparseTrials | None = limited(Check(
        "null or {target: N, nontarget: N} with N >= 1",
        optional(lambda v: isinstance(v, Mapping) and set(v) == {"target", "nontarget"}
                 and all(integer(1)(n) for n in v.values()))))


@dataclass
class Bootstrap:
    n_resamples: int = limited(COUNT)
    confidence: float = limited(FRACTION)
    unit: str = limited(Check("speakers or trials", one_of("speakers", "trials")))


@dataclass
class Detect:
    trusted: Any = MISSING  # null, a list of systems or a CSV file (omegaconf has no unions)
    method: str = limited(Check("gap, gap_re or line", one_of("gap", "gap_re", "line")))
    false_alarm: float = limited(Check("a number in (0, 0.5)", open_range(0, 0.5)))
    tolerance: float = limited(Check("a number in (0, 0.5) (an EER fraction)", open_range(0, 0.5)))
    column: bool = MISSING
    test_split: str = MISSING
    bootstrap: Bootstrap = MISSING


@dataclass
class Distributed:
    gpus_per_node: int = limited(COUNT)
    nodes: int = limited(COUNT)
    node_rank: int | None = limited(Check("null or an integer >= 0", optional(integer(0))))
    master_addr: str | None = MISSING
    port: int | None = limited(Check("null or a port from 1024 to 65534", optional(between(1024, 65534))))
    timeout_s: float = limited(POSITIVE)


@dataclass
class Utility:
    pitch_correlation: bool = MISSING
    pitch_tracker: str = MISSING
    pitch_rule: str = MISSING
    wer: bool = MISSING
    wer_text: str = MISSING
    uar_rule: str = MISSING


@dataclass
class OutputCheck:
    """What anonymised output must be before an attacker trains on it (anonymizers.base.check_speech)."""
    speech: bool = MISSING
    max_non_speech: float = limited(Check("a number in [0, 1)", lambda v: number(v) and 0 <= v < 1))


@dataclass
class Curves:
    backend: str = MISSING
    project: str = MISSING
    tracking_uri: str | None = MISSING


@dataclass
class Reidentification:
    enabled: bool = MISSING
    populations: list[int] = limited(AT_LEAST_TWO)
    candidates: list[int] = limited(AT_LEAST_TWO)
    lengths: list[int] = limited(Check("a list of integers >= 1",
                                       lambda v: isinstance(v, ListConfig) and all(map(integer(1), v))))
    calibration_conversations: int = limited(COUNT)
    runs: int = limited(COUNT)
    confidence: float = limited(FRACTION)
    short_speakers: str = limited(Check("calibrate or drop", one_of("calibrate", "drop")))


@dataclass
class Head:
    margin: float = limited(NON_NEGATIVE)
    scale: float = limited(POSITIVE)


@dataclass
class Training:
    epochs: int = limited(Check(f"an integer >= 1 and <= {MAX_EPOCHS}", between(1, MAX_EPOCHS)))
    batch_size: int = limited(COUNT)
    crop_seconds: float = limited(SECONDS)
    examples_per_epoch: str = limited(Check("chunks or utterances", one_of("chunks", "utterances")))
    optimizer: Any = plugin(lr=POSITIVE, weight_decay=NON_NEGATIVE)  # _target_ plugin (torch.optim.*)
    # the attacker/scheduler group: keys differ per schedule
    scheduler: Any = plugin(warmup_fraction=Check("a number in [0, 1)", lambda v: number(v) and 0 <= v < 1),
                            initial_lr_ratio=LR_RATIO, final_lr_ratio=LR_RATIO)
    augment: Any = MISSING  # the attacker/augment group: a list of _target_ nodes
    precision: str = limited(PRECISION)
    compile: Any = MISSING  # null, a boolean or a torch.compile mode
    sync_batchnorm: bool = MISSING
    checkpoint_every: int | None = limited(Check("null (epochs only) or an integer >= 1", optional(integer(1))))
    log_every: int = limited(COUNT)
    num_workers: int = limited(COUNT0)
    cache_workers: int = limited(COUNT0)
    cache_dir: str | None = MISSING


@dataclass
class Extraction:
    batch_seconds: float = limited(SECONDS)
    precision: str = limited(PRECISION)
    workers: int = limited(COUNT0)
    audio_cache: str | None = MISSING
    compile: Any = None  # null, a boolean or a torch.compile mode; unset in attacker configs written before it: off


@dataclass
class Attacker:
    name: str = MISSING
    pretrained: str | None = MISSING
    pretrained_on: str = limited(Check(f"{ORIGINAL} or {ANONYMIZED}", one_of(*CONDITIONS)))
    init: str | None = MISSING
    finetune: bool | None = limited(Check("null, true or false", one_of(None, True, False)))
    model: Any = MISSING  # _target_ plugin (the speaker encoder)
    head: Head = MISSING
    training: Training = MISSING
    extraction: Extraction = MISSING


@dataclass
class Backend:
    """The keys of every backend class; `_target_` picks one (a key its class does not take
    stops when the backend is built)."""
    _target_: str = MISSING
    name: str = MISSING
    mean_subtraction: bool = MISSING  # pipeline.asv.scoring.CosineBackend
    embedding: str = MISSING
    lda_dim: int | None = MISSING  # pipeline.asv.plda.PLDABackend
    length_norm: bool = MISSING
    enrolment: str = MISSING
    iterations: int = MISSING


SCHEMAS = {ROOT: Run, "paths": Paths, "data": Data, "split": Split, "detect": Detect, "distributed": Distributed,
           "utility": Utility, "attacker": Attacker, "backend": Backend, "reidentification": Reidentification,
           "curves": Curves, "output_check": OutputCheck}


Section = TypeVar("Section")


def typed(node, schema: type[Section], key: str) -> Section:
    """A config section (a DictConfig or a dict) as `schema`'s dataclass, the settings a stage
    takes: resolved, values in their field types, `Any` fields (`_target_` plugins) as plain
    containers. A key that is no field, a value of another type, one outside its range (the
    field's check) or a key left unset is one line naming it under `key`.

    >>> typed({"val_fraction": 0.2, "holdout": "speaker", "unseen_speakers": None, "enroll_utterances": 2,
    ...        "select_fraction": None, "sparse_trials": {"target": 3, "nontarget": 9}}, Split, "split").sparse_trials
    SparseTrials(target=3, nontarget=9)
    >>> typed({"val_fraction": 0.2}, Split, "split")
    Traceback (most recent call last):
    pipeline.core.errors.VpevalError: split.holdout: required, not set (add split.holdout=...)
    >>> typed({"n_resamples": 0, "confidence": 0.95, "unit": "speakers"}, Bootstrap, "detect.bootstrap")
    Traceback (most recent call last):
    pipeline.core.errors.VpevalError: detect.bootstrap.n_resamples=0: must be an integer >= 1
    """
    values = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), values)
        settings = OmegaConf.to_object(merged)
    except OmegaConfBaseException as error:
        at = f"{key}.{error.full_key}" if getattr(error, "full_key", None) else key
        if isinstance(error, MissingMandatoryValue):
            raise VpevalError(f"{at}: required, not set (add {at}=...)") from None
        if isinstance(error, ConfigKeyError):
            raise VpevalError(f"{at}: unknown key (the keys of {key} are "
                              f"{', '.join(f.name for f in dataclasses.fields(schema))})") from None
        raise VpevalError(f"{at}: {str(error).splitlines()[0]}") from None
    problems = range_problems(merged, _field_checks(schema, ""), key)
    if problems:
        raise VpevalError("; ".join(problems))  # every value out of range, in one line
    return settings


def check_of(schema: type, name: str) -> Check:
    """The check a schema's field declares (`limited`).

    >>> check_of(Split, "holdout").allowed
    'unseen, speaker or list'
    """
    return next(entry.metadata["check"] for entry in dataclasses.fields(schema) if entry.name == name)


def require(check: Check, value, key: str) -> None:
    """Stop with `key=value: must be <allowed>` unless `check` allows `value`: the guard of a
    function an API caller reaches without the settings check, with the rule and the words of
    the setting's one check.

    >>> require(check_of(Split, "select_fraction"), 1.5, "split.select_fraction")
    Traceback (most recent call last):
    pipeline.core.errors.VpevalError: split.select_fraction=1.5: must be null or a number in (0, 1)
    """
    if not check.test(value):
        raise VpevalError(f"{key}={shown(value)}: must be {check.allowed}")


def checks() -> dict[str, Check]:
    """Every dotted key the schemas limit -> its check (`*`: every key of a mapping).

    >>> checks()["data.generate.subsets.*.utterances"].allowed
    'an integer >= 1'
    """
    return {key: check for path, schema in sections().items() for key, check in _field_checks(schema, path).items()}


def _field_checks(schema: type, prefix: str) -> dict[str, Check]:
    found = {}
    for entry in dataclasses.fields(schema):
        key = f"{prefix}.{entry.name}" if prefix else entry.name
        if "check" in entry.metadata:
            found[key] = entry.metadata["check"]
        found |= {f"{key}.{name}": check for name, check in entry.metadata.get("below", {}).items()}
        hint = _optional(_hints(schema)[entry.name])[1]
        if typing.get_origin(hint) is dict:
            key, hint = f"{key}.*", typing.get_args(hint)[1]
        if dataclasses.is_dataclass(hint):
            found |= _field_checks(hint, key)
    return found


def register_schemas() -> None:
    """Store SCHEMAS in Hydra's ConfigStore as `schema/<section>` (package: the section)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    if GROUP not in store.repo:
        for package, schema in SCHEMAS.items():
            store.store(group=GROUP, name=package.strip("_"), node=schema, package=package)


def sections() -> dict[str, type]:
    """Section path ('' for the top level) -> its schema (what register_schemas stores)."""
    return {("" if package == ROOT else package): schema for package, schema in SCHEMAS.items()}


def type_problems(cfg: DictConfig) -> list[str]:
    """Every value of `cfg` whose type its schema refuses, and every key a schema does not have,
    one line each: `key=value: must be <type>`. Interpolations are left unresolved (their target
    is checked where it stands); a value omegaconf would convert (the string '5' for an integer,
    1 for a boolean) is refused, since the pipeline reads the value as written."""
    plain = OmegaConf.to_container(cfg)
    order = {key: i for i, key in enumerate(plain)}  # the top level first, then the sections as in cfg
    found = []
    for path, schema in sorted(sections().items(), key=lambda item: order.get(item[0].split(".")[0], -1)):
        node = _select(plain, path) if path else {k: v for k, v in plain.items() if k in _hints(schema)}
        if isinstance(node, dict):
            found += _section_problems(schema, node, f"{path}." if path else "")
        elif node is not ABSENT:
            found.append(f"{path}={node}: must be {describe(schema)}")
    return found


def _section_problems(schema: type, node: dict, prefix: str) -> list[str]:
    """Merge `node` into `schema`, dropping each refused key and merging again, so that every
    top-level key with a problem is named."""
    found = []
    while True:
        try:
            merged = OmegaConf.to_container(OmegaConf.merge(OmegaConf.structured(schema), node))
            break
        except (ValidationError, ConfigKeyError) as error:
            key = re.sub(r"\[\d+\]$", "", error.full_key)  # a list element: name the list
            found.append(_problem(schema, node, key, prefix, unknown=isinstance(error, ConfigKeyError)))
            node = dict(node)
            del node[key.split(".")[0]]  # (a KeyError here would be a bug, not a loop)
    return found + [_problem(schema, node, key, prefix, quoted=True) for key in _converted(node, merged)]


def _problem(schema: type, node: dict, key: str, prefix: str, unknown: bool = False, quoted: bool = False) -> str:
    value = _select(node, key)
    shown = repr(value) if quoted and isinstance(value, str) else value
    if unknown:
        parent = key.rpartition(".")[0]
        base = f"{prefix}{parent}." if parent else prefix
        known = [base + name for name in _hints(_optional(type_at(schema, parent))[1])]
        return f"{prefix}{key}={shown}: unknown key{did_you_mean(prefix + key, known)}"
    return f"{prefix}{key}={shown}: must be {describe(type_at(schema, key))}"


def _converted(before, after, key: str = "") -> list[str]:
    """Keys whose value omegaconf converted to fit its field (a string to a number or a boolean,
    a number to a boolean); an integer for a number or a number for a string (`name=2024`) is
    taken as written."""
    if isinstance(before, dict):
        return [k for name, value in before.items()
                for k in _converted(value, after[name], f"{key}.{name}".lstrip("."))]
    if isinstance(before, list):
        changed = len(before) != len(after) or any(_converted(b, a) for b, a in zip(before, after))
        return [key] if changed else []
    number = isinstance(before, (int, float)) and not isinstance(before, bool)
    same = before == after and all(isinstance(before, kind) == isinstance(after, kind) for kind in (bool, str))
    return [] if same or (number and isinstance(after, str)) else [key]


def _select(node, path: str):
    for part in filter(None, path.split(".")):
        node = node.get(part, ABSENT) if isinstance(node, dict) else ABSENT
    return node


def _hints(schema: type) -> dict[str, Any]:
    return typing.get_type_hints(schema) if dataclasses.is_dataclass(schema) else {}


def _optional(hint) -> tuple[bool, Any]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        return True, next(a for a in args if a is not type(None))
    return False, hint


def type_at(schema: type, key: str):
    """The type a schema gives the dotted `key` below it: Any where it leaves the value untyped
    (an `Any` field and what lies below it), None where it has no such key.

    >>> type_at(Attacker, "training.epochs"), type_at(Attacker, "training.optimizer.lr"), type_at(Attacker, "trainig")
    (<class 'int'>, typing.Any, None)
    """
    hint: Any = schema
    for part in filter(None, key.split(".")):
        hint = _optional(hint)[1]
        if hint is Any:
            return Any
        if typing.get_origin(hint) is dict:
            hint = typing.get_args(hint)[1]
        elif dataclasses.is_dataclass(hint) and part in _hints(hint):
            hint = _hints(hint)[part]
        else:
            return None
    return hint


def typed_key(key: str):
    """The type the schemas give a dotted key of the composed config: Any where no schema types
    it (a plugin's key, a top-level key other than Run's), None where a schema has no such key
    (so `+key=...` cannot add it)."""
    schemas = sections()
    path = max((p for p in schemas if key == p or key.startswith(f"{p}.")), key=len, default="")
    rest = key[len(path):].lstrip(".")
    if not path and rest.split(".")[0] not in _hints(schemas[""]):
        return Any
    return type_at(schemas[path], rest)


NAMES = {int: ("an integer", "integers"), float: ("a number", "numbers"), bool: ("true or false", "booleans"),
         str: ("a string", "strings")}


def describe(hint) -> str:
    """What a type allows, in words.

    >>> describe(SparseTrials | None), describe(list[float])
    ('null or a mapping {target, nontarget}', 'a list of numbers')
    """
    optional, hint = _optional(hint)
    if optional:
        return f"null or {describe(hint)}"
    if hint in NAMES:
        return NAMES[hint][0]
    if typing.get_origin(hint) is list:
        item = typing.get_args(hint)[0]
        return f"a list of {NAMES[item][1]}" if item in NAMES else "a list"
    if dataclasses.is_dataclass(hint):
        return "a mapping {" + ", ".join(_hints(hint)) + "}"
    return "a mapping"

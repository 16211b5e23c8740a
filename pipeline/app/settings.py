"""Every setting checked before any stage runs (`vpeval`, `vpeval validate`, each sweep point).

Each check has one home, and `problems` reads them all: a key's type and range are its field in
the config schemas (pipeline.core.schemas: the type, and in the field's metadata its range); the keys
of a `_target_` plugin (an anonymiser, the attacker's speaker encoder, an ASR model) are checked
by the plugin's class (`check_settings`, pipeline.core.checks.Checked; an anonymiser's by its
parameter dataclass), found through the config's `_target_`; ABOVE_SCHEMAS holds the ranges
whose allowed values are defined above the schemas' layer; COMBINATIONS are checks of several
keys at once. A key whose type is wrong is
not checked further; a key the config does not have is skipped (the groups differ).
`check_settings` raises one VpevalError listing every problem, each as `key=value: must be ...`.
With `build=True` the files each anonymiser's parameters name are also looked for (its parameter
dataclass's `file_problems`; no anonymiser is built, no weights are loaded) and the device is
resolved.

To check a new key, give its schema field a range (`limited`), an anonymiser's parameter field a
range (`setting(default, Check)`), or another plugin class a `settings_checks` row; a new
relation between keys, a function to COMBINATIONS.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from pipeline.asv.finetune import finetune_problem
from pipeline.core.checks import SEED, Check, Checked, choice, integer, open_range, range_problems, shown
from pipeline.core.config import plugin_class
from pipeline.core.devices import COMPILE_MODES
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import checks, type_problems
from pipeline.core.vocabulary import ANONYMIZED, CONDITIONS, ORIGINAL
from pipeline.metrics.pitch_correlation import PITCH_RULES, PRAAT_MISSING, TRACKERS, praat_version
from pipeline.metrics.uar import UAR_RULES
from pipeline.metrics.wer import TEXT_RULES
from pipeline.stages.split import MIN_TRAIN, unseen_floor

# Ranges of schema keys whose allowed values live above the schemas' layer (which cannot import them).
COMPILE_SETTING = Check(f"null, false, true or one of {', '.join(COMPILE_MODES)}",
                        lambda v: v in (None, False, True) or v in COMPILE_MODES)
ABOVE_SCHEMAS = {
    "attacker.training.compile": COMPILE_SETTING,
    "attacker.extraction.compile": COMPILE_SETTING,
    "utility.wer_text": choice(TEXT_RULES),
    "utility.pitch_tracker": choice(TRACKERS),
    "utility.pitch_rule": choice(PITCH_RULES),
    "utility.uar_rule": choice(UAR_RULES),
}


def _eval_splits(cfg: DictConfig) -> Iterator[str]:
    splits = cfg.get("eval_splits")
    subsets = [k for k in (cfg.data.get("subsets") or {}) if k != "train"]
    if not splits:
        yield f"eval_splits={shown(splits)}: must name at least one of {subsets}"
        return
    twice = sorted({split for split in splits if list(splits).count(split) > 1})
    if twice:
        yield (f"eval_splits={shown(splits)}: names {', '.join(map(repr, twice))} more than once "
               "(each split would be evaluated and reported twice): list each split once")
    for split in splits:
        if split not in subsets:
            yield f"eval_splits={shown(splits)}: {split!r} is not an evaluation subset of data={cfg.data.name} ({subsets})"
    test_split = cfg.detect.get("test_split")
    if test_split not in splits:
        yield f"detect.test_split={test_split}: must be one of eval_splits {shown(splits)}"


def _node_rank(cfg: DictConfig) -> Iterator[str]:
    rank, nodes = cfg.distributed.get("node_rank"), cfg.distributed.get("nodes")
    if integer(0)(rank) and integer(1)(nodes) and rank >= nodes:
        yield f"distributed.node_rank={rank}: must be below distributed.nodes={nodes}"


def _held_out(cfg: DictConfig) -> Iterator[str]:
    """`split.holdout: speaker` holds out round(val_fraction * n) utterances per training
    speaker; a validation speaker needs 2 (one enrolment, one trial). `unseen` holds out
    whole speakers, at least `unseen_floor` per gender, and must leave `MIN_TRAIN` to train on;
    `unseen_speakers` only means something under `unseen`."""
    fraction, generate, holdout = cfg.split.get("val_fraction"), cfg.data.get("generate"), cfg.split.get("holdout")
    if cfg.split.get("unseen_speakers") is not None and holdout != "unseen":
        yield f"split.unseen_speakers is set, but split.holdout={holdout}: it names speakers held out unseen (holdout=unseen)"
    if not open_range(0, 1)(fraction) or not generate:
        return
    select_fraction = cfg.split.get("select_fraction")
    if holdout == "unseen" and cfg.split.get("unseen_speakers") is None and (
            select_fraction is None or open_range(0, 1)(select_fraction)):
        for name in cfg.data.subsets.get("train") or []:
            counts = {gender: OmegaConf.select(generate, f"subsets.{name}.{gender}") for gender in ("female", "male")}
            short = [f"{n} {gender}" for gender, n in counts.items()
                     if integer(1)(n) and n - unseen_floor(select_fraction) < MIN_TRAIN]
            if short:
                yield (f"split.holdout=unseen: {name} has {' and '.join(short)} speaker(s); at least "
                       f"{unseen_floor(select_fraction)} per gender are held out unseen "
                       f"(split.select_fraction={select_fraction}) and {MIN_TRAIN} must remain to train on: "
                       "add speakers (data.generate.subsets), set split.select_fraction=null or split.holdout=speaker")
    if holdout != "speaker":
        return
    for name in cfg.data.subsets.get("train") or []:
        n = OmegaConf.select(generate, f"subsets.{name}.utterances")
        if integer(1)(n) and max(1, round(fraction * n)) < 2:
            yield (f"split.val_fraction={fraction}: holds out {max(1, round(fraction * n))} of the {n} utterances "
                   f"per speaker of {name}; at least 2 are needed (one enrolment, one trial): "
                   f"must be at least {1.5 / n:.3g}")


def _attacks(cfg: DictConfig) -> Iterator[str]:
    for name, attack in (cfg.get("attacks") or {}).items():
        for key in ("enroll", "trials", "attacker"):
            value = attack.get(key)
            if value not in CONDITIONS:
                yield f"attacks.{name}.{key}={value}: must be {ORIGINAL} or {ANONYMIZED}"


def _anonymization_seed(cfg: DictConfig) -> Iterator[str]:
    """Checked only when set apart from `seed` (by default it is `${seed}`, checked above)."""
    value = cfg.get("anonymization_seed")
    if value != cfg.get("seed") and not SEED.test(value):
        yield f"anonymization_seed={value}: must be {SEED.allowed}"


def _finetune(cfg: DictConfig) -> Iterator[str]:
    problem = finetune_problem(cfg.get("attacker") or {})
    if problem:
        yield problem


def _missing(cfg: DictConfig) -> Iterator[str]:
    for key in _missing_keys(cfg, ""):
        yield f"{key}: required, not set (add {key}=...)"


COMBINATIONS: list[Callable[[DictConfig], Iterator[str]]] = [_eval_splits, _node_rank, _held_out, _attacks,
                                                             _anonymization_seed, _finetune, _missing]


def _missing_keys(node: DictConfig, prefix: str) -> Iterator[str]:
    for key in node.keys():
        if OmegaConf.is_missing(node, key):
            yield f"{prefix}{key}"
        elif isinstance(node._get_node(key), DictConfig):
            yield from _missing_keys(node._get_node(key), f"{prefix}{key}.")


def problems(cfg: DictConfig, build: bool = False) -> list[str]:
    """Every problem of `cfg`, one line each (empty when it is fine)."""
    found = type_problems(cfg)
    found += range_problems(cfg, checks() | ABOVE_SCHEMAS, reported=found)
    found += _plugin_problems(cfg, "")
    for combination in COMBINATIONS:
        found += [p for p in combination(cfg) if p not in found]
    if build:
        sound = not found
        found += _missing_folders(cfg)  # looked for whatever else is wrong: one run names them all
        if sound:
            found += _built(cfg)
    return found


def _missing_folders(cfg: DictConfig) -> list[str]:
    """The corpus folder of a corpus that is read, not generated, and the imported attacker
    folders (`attacker.pretrained`, `attacker.init`) that are not there."""
    found = []
    root = OmegaConf.select(cfg, "data.root", default=None, throw_on_missing=False)
    if root is not None and OmegaConf.select(cfg, "data.generate", default=None) is None and not Path(root).is_dir():
        found.append(f"data.root={root}: corpus folder not found")
    missing = set()
    for key in ("attacker.pretrained", "attacker.init"):  # VPC 2026 fine-tunes the folder it imports: once
        folder = OmegaConf.select(cfg, key, default=None, throw_on_missing=False)
        if folder is not None and folder not in missing and not Path(folder).is_dir():
            found.append(f"{key}={folder}: attacker folder not found")
            missing.add(folder)
    return found


def _plugin_problems(node: DictConfig | ListConfig, key: str) -> list[str]:
    """What the class of each `_target_` node below `node` (at `key`) says of its own settings."""
    found = []
    if isinstance(node, DictConfig) and "_target_" in node:
        cls = plugin_class(node)
        if cls is not None and issubclass(cls, Checked):
            found += cls.check_settings(node, key)
    for child in node.keys() if isinstance(node, DictConfig) else range(len(node)):
        value = node._get_node(child)
        if isinstance(value, (DictConfig, ListConfig)) and not value._is_missing() and not value._is_none():
            found += _plugin_problems(value, f"{key}.{child}" if key else str(child))
    return found


def _built(cfg: DictConfig) -> list[str]:
    """Resolve the device, look for what each anonymiser's parameters name on disk (its
    `file_problems`: trained model folders, a folder of audio), build the attacker's speaker
    encoder (its weights paths, e.g. ecapa_ssl's WavLM, are read and checked) and look for the
    optional package the chosen pitch tracker needs."""
    from pipeline.asv.augment import Augmentation
    from pipeline.asv.encoder import check_encoder
    from pipeline.core.config import instantiate
    from pipeline.core.devices import resolve_device

    found = []
    try:
        resolve_device(str(cfg.device))
    except VpevalError as error:
        found.append(str(error))
    utility = cfg.get("utility") or {}
    if utility.get("pitch_correlation") and utility.get("pitch_tracker") == "praat" and praat_version() is None:
        found.append(PRAAT_MISSING)
    if cfg.get("attacker") is not None:
        try:  # the training augmentations: a bad _target_, argument or output stops here, not after anonymisation
            rate = OmegaConf.select(cfg, "attacker.model.sample_rate", default=16000)
            augmentation = Augmentation(OmegaConf.select(cfg, "attacker.training.augment") or [], seed=0)
            augmentation.probe(round(cfg.attacker.training.crop_seconds * rate))
        except VpevalError as error:
            found.append(str(error))
        try:
            check_encoder(instantiate(cfg.attacker.model), "attacker.model._target_")
        except VpevalError as error:
            found.append(str(error))
    for key in ("anonymizer", "attacker_anonymizer"):
        if cfg.get(key) is None:
            continue
        parameters = getattr(plugin_class(cfg[key]), "parameters", None)
        if parameters is None:
            found.append(f"{key}._target_={cfg[key].get('_target_')}: must name an anonymiser class")
        else:  # what its parameters name on disk (model folders, audio); the system is not built
            found += parameters.of(cfg[key], key).file_problems(key)
    return found


def check_settings(cfg: DictConfig, build: bool = False) -> None:
    """Raise one VpevalError listing every problem of `cfg` (see `problems`)."""
    found = problems(cfg, build)
    if found:
        raise VpevalError(f"config: {len(found)} problem(s): " + "; ".join(found))

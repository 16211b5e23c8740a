"""Every setting checked before any stage runs (`vpeval`, `vpeval validate`, each sweep point).

Types come from the config schemas (pipeline.schemas: a value of the wrong type, a key a schema
does not have); a key whose type is wrong is not checked further. RULES is the table of single
keys: (key, what is allowed, test); a `*` in a key matches every child
(`data.generate.subsets.*.utterances`); a key the config does not have is skipped (the groups
differ). COMBINATIONS are checks of several keys at once. `check_settings` runs them
all and raises one VpevalError listing every problem, each as `key=value: must be ...`.
With `build=True` the anonymisers are also built (their constructors check their own
parameters) and the device is resolved.

To check a new key, give it a field in its schema (pipeline.schemas) and a row in RULES for its
range; a new relation between keys, a function to COMBINATIONS.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from omegaconf import DictConfig, ListConfig, OmegaConf

from pipeline.asv.finetune import finetune_problem
from pipeline.devices import COMPILE_MODES
from pipeline.errors import VpevalError
from pipeline.metrics.wer import TEXT_RULES
from pipeline.schemas import type_problems


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def integer(low: int) -> Callable:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def open_range(low: float, high: float) -> Callable:
    return lambda v: _number(v) and low < v < high


def positive(v) -> bool:
    return _number(v) and v > 0


def non_negative(v) -> bool:
    return _number(v) and v >= 0


def one_of(*allowed) -> Callable:
    return lambda v: v in allowed


def optional(test: Callable) -> Callable:
    return lambda v: v is None or test(v)


def between(low: int, high: int) -> Callable:
    return lambda v: integer(low)(v) and v <= high


def duration_pair(v) -> bool:
    return (isinstance(v, (list, ListConfig)) and len(v) == 2 and all(map(positive, v)) and v[0] <= v[1])


PRECISIONS = ("fp32", "bf16", "fp16")
UNSEEN_PER_GENDER = 6  # pipeline.stages.split.MIN_UNSEEN (settings may not import a stage)
COUNT, COUNT0, FRACTION = "an integer >= 1", "an integer >= 0", "a number in (0, 1)"
# Seeds reach torch.manual_seed and int64 tensors (RNG states in checkpoints), which take at most
# 2**63 - 1; numpy's default_rng takes no negative seed.
SEED_MAX = 2**63 - 1
SEED = f"an integer >= 0 and <= 2**63-1 ({SEED_MAX})"
# VPC 2024 trains its attacker 10 epochs, the shipped attackers 4 to 10. 10,000 epochs of
# train-clean-360 take about 10 days on an H100 (docs/performance.md: 10 in 14.3 min), decades on
# CPU: a larger count is a typo, refused before any stage starts.
MAX_EPOCHS = 10_000
RULES: list[tuple[str, str, Callable]] = [
    ("seed", SEED, between(0, SEED_MAX)),
    *[(f"data.{key}.seed", SEED, between(0, SEED_MAX)) for key in ("generate", "protocol", "reader")],
    ("device", "auto, cpu, cuda or cuda:N", lambda v: isinstance(v, str) and re.fullmatch(r"auto|cpu|cuda(:\d+)?", v)),
    ("split.val_fraction", FRACTION, open_range(0, 1)),
    ("split.holdout", "unseen, speaker or list", one_of("unseen", "speaker", "list")),
    ("split.enroll_utterances", COUNT, integer(1)),
    ("split.select_fraction", "null or a number in (0, 1)", optional(open_range(0, 1))),
    ("split.sparse_trials", "null or {target: N, nontarget: N} with N >= 1",
     optional(lambda v: isinstance(v, DictConfig) and set(v) == {"target", "nontarget"}
              and all(integer(1)(n) for n in v.values()))),
    ("split.unseen_speakers", "null, a list of speaker ids or the path of a file of them",
     lambda v: v is None or isinstance(v, (str, ListConfig))),
    ("detect.method", "gap, gap_re or line", one_of("gap", "gap_re", "line")),
    ("detect.false_alarm", "a number in (0, 0.5)", open_range(0, 0.5)),
    ("detect.tolerance", "a number in (0, 0.5) (an EER fraction)", open_range(0, 0.5)),
    ("detect.bootstrap.n_resamples", COUNT, integer(1)),
    ("detect.bootstrap.confidence", FRACTION, open_range(0, 1)),
    ("detect.bootstrap.unit", "speakers or trials", one_of("speakers", "trials")),
    *[(f"reidentification.{key}", "a list of integers >= 2",
       lambda v: isinstance(v, ListConfig) and all(integer(2)(n) for n in v)) for key in ("populations", "candidates")],
    ("reidentification.lengths", "a list of integers >= 1", lambda v: isinstance(v, ListConfig) and all(map(integer(1), v))),
    ("reidentification.calibration_conversations", COUNT, integer(1)),
    ("reidentification.runs", COUNT, integer(1)),
    ("reidentification.confidence", FRACTION, open_range(0, 1)),
    ("distributed.gpus_per_node", COUNT, integer(1)),
    ("distributed.nodes", COUNT, integer(1)),
    ("distributed.node_rank", "null or an integer >= 0", optional(integer(0))),
    ("distributed.port", "null or a port from 1024 to 65534", optional(lambda v: integer(1024)(v) and v <= 65534)),
    ("distributed.timeout_s", "a number > 0", positive),
    ("data.sample_rate", COUNT, integer(1)),
    ("data.workers", "null or an integer >= 1", optional(integer(1))),
    ("data.generate.duration", "a [low, high] pair of seconds, 0 < low <= high", duration_pair),
    ("data.generate.chapters_per_speaker", COUNT, integer(1)),
    ("data.generate.subsets.*.female", COUNT0, integer(0)),
    ("data.generate.subsets.*.male", COUNT0, integer(0)),
    ("data.generate.subsets.*.utterances", COUNT, integer(1)),
    ("data.protocol.enroll_fraction", FRACTION, open_range(0, 1)),
    ("data.protocol.enroll_utterances", COUNT, integer(1)),
    ("data.eval_trials", "same_gender, mixed or both", one_of("same_gender", "mixed", "both")),
    ("data.mixed_seed", COUNT0, integer(0)),
    ("attacker.pretrained_on", "original or anonymized", one_of("original", "anonymized")),
    ("attacker.finetune", "null, true or false", one_of(None, True, False)),
    ("attacker.training.epochs", f"an integer >= 1 and <= {MAX_EPOCHS}", between(1, MAX_EPOCHS)),
    ("attacker.training.batch_size", COUNT, integer(1)),
    ("attacker.training.crop_seconds", "a number of seconds > 0", positive),
    ("attacker.training.optimizer.lr", "a number > 0", positive),
    ("attacker.training.optimizer.weight_decay", "a number >= 0", non_negative),
    ("attacker.training.scheduler.warmup_fraction", "a number in [0, 1)", lambda v: _number(v) and 0 <= v < 1),
    ("attacker.training.scheduler.initial_lr_ratio", "a number in (0, 1]", lambda v: _number(v) and 0 < v <= 1),
    ("attacker.training.scheduler.final_lr_ratio", "a number in (0, 1]", lambda v: _number(v) and 0 < v <= 1),
    ("attacker.training.precision", " or ".join(PRECISIONS), one_of(*PRECISIONS)),
    ("attacker.training.checkpoint_every", COUNT, integer(1)),
    ("attacker.training.log_every", COUNT, integer(1)),
    ("attacker.training.num_workers", COUNT0, integer(0)),
    ("attacker.training.cache_workers", COUNT0, integer(0)),
    ("attacker.head.margin", "a number >= 0", non_negative),
    ("attacker.head.scale", "a number > 0", positive),
    ("attacker.model.embedding_dim", COUNT, integer(1)),
    ("attacker.model.n_mels", COUNT, integer(1)),
    ("attacker.extraction.batch_seconds", "a number of seconds > 0", positive),
    ("attacker.extraction.precision", " or ".join(PRECISIONS), one_of(*PRECISIONS)),
    ("attacker.extraction.workers", COUNT0, integer(0)),
    ("attacker.training.compile", f"null, false, true or one of {', '.join(COMPILE_MODES)}",
     lambda v: v in (None, False, True) or v in COMPILE_MODES),
    ("utility.wer_text", " or ".join(TEXT_RULES), one_of(*TEXT_RULES)),
    ("asr.chunk_length_s", "null or a number of seconds > 0", optional(positive)),
    *[row for group in ("anonymizer", "attacker_anonymizer") for row in (
        (f"{group}.batch_seconds", "a number of seconds > 0", positive),
        (f"{group}.lpc", "levinson or burg", one_of("levinson", "burg")),
        (f"{group}.deterministic", "true or false", one_of(True, False)))],
]


def _eval_splits(cfg: DictConfig) -> Iterator[str]:
    splits = cfg.get("eval_splits")
    subsets = [k for k in (cfg.data.get("subsets") or {}) if k != "train"]
    if not splits:
        yield f"eval_splits={_shown(splits)}: must name at least one of {subsets}"
        return
    twice = sorted({split for split in splits if list(splits).count(split) > 1})
    if twice:
        yield (f"eval_splits={_shown(splits)}: names {', '.join(map(repr, twice))} more than once "
               "(each split would be evaluated and reported twice): list each split once")
    for split in splits:
        if split not in subsets:
            yield f"eval_splits={_shown(splits)}: {split!r} is not an evaluation subset of data={cfg.data.name} ({subsets})"
    test_split = cfg.detect.get("test_split")
    if test_split not in splits:
        yield f"detect.test_split={test_split}: must be one of eval_splits {_shown(splits)}"


def _node_rank(cfg: DictConfig) -> Iterator[str]:
    rank, nodes = cfg.distributed.get("node_rank"), cfg.distributed.get("nodes")
    if integer(0)(rank) and integer(1)(nodes) and rank >= nodes:
        yield f"distributed.node_rank={rank}: must be below distributed.nodes={nodes}"


def _held_out(cfg: DictConfig) -> Iterator[str]:
    """`split.holdout: speaker` holds out round(val_fraction * n) utterances per training
    speaker; a validation speaker needs 2 (one enrolment, one trial). `unseen` holds out
    whole speakers, at least 6 per gender, and must leave one to train on;
    `unseen_speakers` only means something under `unseen`."""
    fraction, generate, holdout = cfg.split.get("val_fraction"), cfg.data.get("generate"), cfg.split.get("holdout")
    if cfg.split.get("unseen_speakers") is not None and holdout != "unseen":
        yield f"split.unseen_speakers is set, but split.holdout={holdout}: it names speakers held out unseen (holdout=unseen)"
    if not open_range(0, 1)(fraction) or not generate:
        return
    if holdout == "unseen" and cfg.split.get("unseen_speakers") is None:
        for name in cfg.data.subsets.get("train") or []:
            counts = {gender: OmegaConf.select(generate, f"subsets.{name}.{gender}") for gender in ("female", "male")}
            short = [f"{n} {gender}" for gender, n in counts.items()
                     if integer(1)(n) and max(UNSEEN_PER_GENDER, round(fraction * n)) >= n]
            if short:
                yield (f"split.holdout=unseen: {name} has {' and '.join(short)} speaker(s); "
                       f"split.val_fraction={fraction} holds out at least {UNSEEN_PER_GENDER} per gender unseen and "
                       "one must remain to train on: add speakers (data.generate.subsets) or set split.holdout=speaker")
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
            if value not in ("original", "anonymized"):
                yield f"attacks.{name}.{key}={value}: must be original or anonymized"


def _whisper_chunks(cfg: DictConfig) -> Iterator[str]:
    chunk, stride = OmegaConf.select(cfg, "asr.chunk_length_s"), OmegaConf.select(cfg, "asr.stride_length_s")
    if positive(chunk) and _number(stride) and not 0 < 2 * stride < chunk:
        yield f"asr.stride_length_s={stride}: must be above 0 and below half of asr.chunk_length_s={chunk}"


def _anonymization_seed(cfg: DictConfig) -> Iterator[str]:
    """Checked only when set apart from `seed` (by default it is `${seed}`, checked above)."""
    value = cfg.get("anonymization_seed")
    if value != cfg.get("seed") and not between(0, SEED_MAX)(value):
        yield f"anonymization_seed={value}: must be {SEED}"


def _finetune(cfg: DictConfig) -> Iterator[str]:
    problem = finetune_problem(cfg.get("attacker") or {})
    if problem:
        yield problem


def _missing(cfg: DictConfig) -> Iterator[str]:
    for key in _missing_keys(cfg, ""):
        yield f"{key}: required, not set (add {key}=...)"


COMBINATIONS: list[Callable[[DictConfig], Iterator[str]]] = [_eval_splits, _node_rank, _held_out, _attacks,
                                                             _anonymization_seed, _finetune, _whisper_chunks,
                                                             _missing]


def _missing_keys(node: DictConfig, prefix: str) -> Iterator[str]:
    for key in node.keys():
        if OmegaConf.is_missing(node, key):
            yield f"{prefix}{key}"
        elif isinstance(node._get_node(key), DictConfig):
            yield from _missing_keys(node._get_node(key), f"{prefix}{key}.")


def _matching(cfg: DictConfig, pattern: str) -> Iterator[str]:
    head, star, tail = pattern.partition(".*.")
    if not star:
        if OmegaConf.select(cfg, pattern, default="__absent__", throw_on_missing=False) != "__absent__":
            yield pattern
        return
    parent = OmegaConf.select(cfg, head, default=None, throw_on_missing=False)
    for child in parent.keys() if isinstance(parent, DictConfig) else ():
        yield from _matching(cfg, f"{head}.{child}.{tail}")


def _shown(value):
    return OmegaConf.to_container(value) if isinstance(value, (DictConfig, ListConfig)) else value


def problems(cfg: DictConfig, build: bool = False) -> list[str]:
    """Every problem of `cfg`, one line each (empty when it is fine)."""
    found = type_problems(cfg)
    for pattern, allowed, test in RULES:
        for key in _matching(cfg, pattern):
            value = OmegaConf.select(cfg, key, throw_on_missing=False)
            if value == "???" or any(p.startswith(f"{key}=") for p in found):
                continue  # reported by _missing, or its type is wrong
            if not test(value):
                found.append(f"{key}={_shown(value)}: must be {allowed}")
    for combination in COMBINATIONS:
        found += [p for p in combination(cfg) if p not in found]
    if build and not found:
        found += _built(cfg)
    return found


# Anonymisers whose constructor loads trained models and builds a speaker pool (minutes):
# not built here; their model folders are checked instead (the stage builds them).
MODEL_FOLDERS = {"anonymizers.xvector.XVector": ("vc_model",), "anonymizers.ohnn.OHNN": ("vc_model", "ohnn_model")}


def _built(cfg: DictConfig) -> list[str]:
    """Resolve the device, build each anonymiser (its constructor checks its parameters) and the
    attacker's speaker encoder (its weights paths, e.g. ecapa_ssl's WavLM, are read and checked)."""
    from pathlib import Path

    from pipeline.asv.augment import Augmentation
    from pipeline.asv.encoder import check_encoder
    from pipeline.config import instantiate, without
    from pipeline.devices import resolve_device

    found = []
    try:
        resolve_device(str(cfg.device))
    except VpevalError as error:
        found.append(str(error))
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
        folders = MODEL_FOLDERS.get(str(cfg[key].get("_target_")), ()) if cfg.get(key) is not None else ()
        for name in folders:
            folder = cfg[key].get(name)
            if folder is None or not Path(folder).is_dir():
                found.append(f"{key}.{name}={folder}: must be a trained model folder (recipes/train_vc/README.md)")
        if cfg.get(key) is not None and not folders:
            try:
                instantiate(without(cfg[key], "name"), seed=int(cfg.seed), device="cpu")
            except VpevalError as error:
                found.append(str(error) if str(error).startswith(key) else f"{key}={cfg[key].name}: {error}")
    return found


def check_settings(cfg: DictConfig, build: bool = False) -> None:
    """Raise one VpevalError listing every problem of `cfg` (see `problems`)."""
    found = problems(cfg, build)
    if found:
        raise VpevalError(f"config: {len(found)} problem(s): " + "; ".join(found))

"""What a setting may be, declared once beside the setting, and the one function that reads it.

A `Check` is the allowed values of one key, in words and as a test. Settings typed by a
schema declare theirs in their field's metadata (pipeline.core.schemas); an anonymiser's in the
fields of its parameter dataclass (`setting(default, check)`, read by `field_problems`); the keys
of another `_target_` plugin (the attacker's speaker encoder, an ASR model) in its class, as
`settings_checks` (class `Checked`), so a new plugin in another package brings its own.
`range_problems` turns every value that fails into one line, `key=value: must be <allowed>`.

>>> from omegaconf import OmegaConf
>>> lpc = Check("levinson or burg", one_of("levinson", "burg"))
>>> range_problems(OmegaConf.create({"lpc": "covariance"}), {"lpc": lpc}, "anonymizer")
['anonymizer.lpc=covariance: must be levinson or burg']
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
import copy
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from omegaconf import DictConfig, ListConfig, OmegaConf


@dataclass(frozen=True)
class Check:
    """The values a key allows: `allowed` in words (after "must be"), `test` the predicate."""
    allowed: str
    test: Callable[[Any], bool]


def number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def integer(low: int) -> Callable:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def between(low: int, high: int) -> Callable:
    return lambda v: integer(low)(v) and v <= high


def open_range(low: float, high: float) -> Callable:
    return lambda v: number(v) and low < v < high


def positive(v) -> bool:
    return number(v) and v > 0


def non_negative(v) -> bool:
    return number(v) and v >= 0


def one_of(*allowed) -> Callable:
    return lambda v: v in allowed


def optional(test: Callable) -> Callable:
    return lambda v: v is None or test(v)


def choice(allowed) -> Check:
    """A key that takes one of the names `allowed`.

    >>> choice(("levinson", "burg")).allowed
    'levinson or burg'
    """
    return Check(" or ".join(allowed), one_of(*allowed))


COUNT = Check("an integer >= 1", integer(1))
COUNT0 = Check("an integer >= 0", integer(0))
FRACTION = Check("a number in (0, 1)", open_range(0, 1))
SECONDS = Check("a number of seconds > 0", positive)
BOOLEAN = Check("true or false", lambda v: isinstance(v, bool))
PRECISIONS = ("fp32", "bf16", "fp16")
PRECISION = choice(PRECISIONS)
# Seeds reach torch.manual_seed and int64 tensors (RNG states in checkpoints), which take at most
# 2**63 - 1; numpy's default_rng takes no negative seed.
SEED_MAX = 2**63 - 1
SEED = Check(f"an integer >= 0 and <= 2**63-1 ({SEED_MAX})", between(0, SEED_MAX))


def setting(default: Any, check: Check | None = None) -> Any:
    """A field of a plugin's parameter dataclass: its default (a list or dict is copied for each
    instance) and, in its metadata, the `check` of its values."""
    metadata = {} if check is None else {"check": check}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def field_problems(parameters: Any, prefix: str) -> list[str]:
    """`prefix.name=value: must be <allowed>` for every field of the dataclass `parameters` whose
    value fails the check in its metadata (a value left to set, `???`, is skipped).

    >>> @dataclass
    ... class Toy:
    ...     lpc: str = setting("levinson", Check("levinson or burg", one_of("levinson", "burg")))
    >>> field_problems(Toy(lpc="covariance"), "anonymizer")
    ['anonymizer.lpc=covariance: must be levinson or burg']
    """
    found = []
    for entry in fields(parameters):
        value, check = getattr(parameters, entry.name), entry.metadata.get("check")
        if check is not None and value != "???" and not check.test(value):
            found.append(f"{prefix}.{entry.name}={shown(value)}: must be {check.allowed}")
    return found


class Checked:
    """A `_target_` plugin class whose settings are checked before anything is built (pipeline.app.settings
    finds it through the config's `_target_`): `settings_checks` maps each of its keys to its `Check`;
    override `check_settings` to add relations between its keys."""

    settings_checks: ClassVar[Mapping[str, Check]] = {}

    @classmethod
    def check_settings(cls, settings: DictConfig, key: str) -> list[str]:
        """The problems of `settings`, the plugin's config node at `key` (e.g. `anonymizer`)."""
        return range_problems(settings, cls.settings_checks, key)


def range_problems(node: DictConfig, checks: Mapping[str, Check], prefix: str = "",
                   reported: Sequence[str] = ()) -> list[str]:
    """`key=value: must be <allowed>` for every key of `node` that fails its check in `checks`
    (a `*` in a key matches every child: `subsets.*.utterances`). A key `node` does not have is
    skipped, as is one left to set (`???`) or already named in `reported` (its type is wrong)."""
    found = []
    for pattern, check in checks.items():
        for key in matching(node, pattern):
            value = OmegaConf.select(node, key, throw_on_missing=False)
            full = f"{prefix}.{key}" if prefix else key
            if value == "???" or any(p.startswith(f"{full}=") for p in reported):
                continue
            if not check.test(value):
                found.append(f"{full}={shown(value)}: must be {check.allowed}")
    return found


def matching(node: DictConfig, pattern: str) -> Iterator[str]:
    """The keys of `node` that `pattern` names (each child for a `*`)."""
    head, star, tail = pattern.partition(".*.")
    if not star:
        if OmegaConf.select(node, pattern, default="__absent__", throw_on_missing=False) != "__absent__":
            yield pattern
        return
    parent = OmegaConf.select(node, head, default=None, throw_on_missing=False)
    for child in parent.keys() if isinstance(parent, DictConfig) else ():
        yield from matching(node, f"{head}.{child}.{tail}")


def shown(value):
    """A config value as a problem line shows it (a node as plain lists and dicts)."""
    return OmegaConf.to_container(value) if isinstance(value, (DictConfig, ListConfig)) else value

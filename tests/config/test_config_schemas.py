"""Config schemas (pipeline/core/schemas.py): every shipped config fits them, each kind of field refuses
a wrong type in one line naming the key, the value and what is allowed, and the config the
pipeline runs is left as composed."""
import dataclasses
import typing

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from pipeline.app.settings import problems
from pipeline.core.config import _compose, compose
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import GROUP, SCHEMAS, sections, type_problems
from tests.config.test_config_inheritance import cases

EXPERIMENT_CASES = sorted(label for label, (name, _) in cases().items() if name == "config")


def test_every_schema_is_in_hydras_config_store():
    assert sorted(ConfigStore.instance().list(GROUP)) == sorted(f"{p.strip('_')}.yaml" for p in SCHEMAS)
    assert sections() == {("" if p == "_global_" else p): schema for p, schema in SCHEMAS.items()}


@pytest.mark.parametrize("label", EXPERIMENT_CASES)
def test_every_group_option_and_recipe_fits_the_schemas(label):
    """Every option of every group and every recipe (as tests/config/test_config_inheritance.py
    lists them) fits the schemas, and converts to the typed settings the experiment builds from
    it (a section with a value left to the user, `???`, is refused by the settings check first)."""
    from pipeline.core.schemas import Attacker, Data, Detect, Split, typed

    cfg = _compose(cases()[label][1], "config")
    assert type_problems(cfg) == []
    for key, schema in (("data", Data), ("split", Split), ("detect", Detect), ("attacker", Attacker)):
        if not OmegaConf.missing_keys(cfg[key]):
            assert isinstance(typed(cfg[key], schema, key), schema)


def test_every_schema_field_is_in_some_shipped_config():
    """A field no config has would be a stale or misspelt schema entry (split.sparse_trials is
    null in every shipped config: its documented form is added)."""
    seen = set(_keys(OmegaConf.to_container(compose(["split.sparse_trials={target:3,nontarget:5}"]))))
    for label in EXPERIMENT_CASES:
        seen |= set(_keys(OmegaConf.to_container(_compose(cases()[label][1], "config"))))
    expected = {key for path, schema in sections().items() for key in _fields(schema, path)}
    assert expected - seen == set()


def _keys(node, prefix=""):
    for key, value in node.items():
        yield f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _keys(value, f"{prefix}{key}.")


def _fields(schema, prefix):
    for name, hint in typing.get_type_hints(schema).items():
        key = f"{prefix}.{name}".lstrip(".")
        yield key
        inner = next((a for a in (hint, *typing.get_args(hint)) if dataclasses.is_dataclass(a)), None)
        if inner and typing.get_origin(hint) is not dict:  # a mapping of sections: its keys are names
            yield from _fields(inner, key)


@pytest.mark.parametrize("overrides, expected", [
    # top-level scalars (Run)
    (["seed=abc"], "seed=abc: must be an integer"),
    (["seed=null"], "seed=None: must be an integer"),
    (["seed='5'"], "seed='5': must be an integer"),  # omegaconf would convert it; the pipeline reads '5'
    (["similarity=1"], "similarity=1: must be true or false"),
    (["eval_splits=test"], "eval_splits=test: must be a list of strings"),
    (["name=true"], "name=True: must be a string"),
    # sections, nested sections, optional sections, mappings of sections, lists of numbers
    (["utility.wer=no"], "utility.wer='no': must be true or false"),
    (["output_check.speech=off"], "output_check.speech='off': must be true or false"),
    (["split.val_fraction=half"], "split.val_fraction=half: must be a number"),
    (["split=3"], "split=3: must be a mapping {val_fraction, holdout, unseen_speakers, enroll_utterances, select_fraction, sparse_trials}"),
    (["split.sparse_trials={target:3,nontarget:x}"], "split.sparse_trials.nontarget=x: must be an integer"),
    (["split.sparse_trials=5"], "split.sparse_trials=5: must be null or a mapping {target, nontarget}"),
    (["detect.bootstrap.n_resamples=1.5"], "detect.bootstrap.n_resamples=1.5: must be an integer"),
    (["distributed.timeout_s=true"], "distributed.timeout_s=True: must be a number"),
    (["distributed.port=http"], "distributed.port=http: must be null or an integer"),
    (["data.sample_rate=16k"], "data.sample_rate=16k: must be an integer"),
    (["data.generate.duration=[1,x]"], "data.generate.duration=[1, 'x']: must be a list of numbers"),
    (["data.generate.subsets.dev-synth.female=x"], "data.generate.subsets.dev-synth.female=x: must be an integer"),
    (["paths.cache=[a]"], "paths.cache=['a']: must be a string"),
    (["attacker.training.batch_size=2.5"], "attacker.training.batch_size=2.5: must be an integer"),
    (["attacker.training.sync_batchnorm=yes"], "attacker.training.sync_batchnorm='yes': must be true or false"),
    (["attacker.extraction.workers=many"], "attacker.extraction.workers=many: must be an integer"),
    (["attacker.head.scale=big"], "attacker.head.scale=big: must be a number"),
    (["backend=plda", "backend.lda_dim=1.5"], "backend.lda_dim=1.5: must be null or an integer"),
])
def test_wrong_type_is_one_line_naming_key_value_and_type(overrides, expected):
    with pytest.raises(VpevalError) as caught:
        compose(overrides)
    assert str(caught.value) == f"config: 1 problem(s): {expected}"


def test_every_wrong_type_is_listed_at_once():
    with pytest.raises(VpevalError) as caught:
        compose(["seed=abc", "detect.false_alarm=x", "detect.bootstrap.unit=[a]"])
    assert str(caught.value) == ("config: 3 problem(s): seed=abc: must be an integer; detect.false_alarm=x: must be a "
                                 "number; detect.bootstrap.unit=['a']: must be a string")


def test_accepted_as_written():
    """An integer for a number, a number for a string, null where a field is optional."""
    cfg = compose(["distributed.timeout_s=60", "name=2024", "split.select_fraction=null", "split.val_fraction=1"])
    assert (cfg.distributed.timeout_s, cfg.name, cfg.split.select_fraction) == (60, 2024, None)


def test_the_config_the_pipeline_runs_stays_untyped():
    """The schemas check a copy: no int -> float coercion, no typed nodes, no added keys (the
    cache hashes this config; tests/config/test_config_inheritance.py holds every composed config)."""
    cfg = compose(["distributed.timeout_s=60"])
    assert type(cfg.distributed.timeout_s) is int and type(cfg.split.enroll_utterances) is int
    assert OmegaConf.get_type(cfg.split) is dict and OmegaConf.get_type(cfg.attacker.training) is dict
    assert "sparse_trials" in cfg.split and "mean_subtraction" not in compose(["backend=plda"]).backend


def test_a_key_a_schema_does_not_have_is_refused_with_the_closest_name():
    with pytest.raises(VpevalError, match=r"^config override 'split.val_fraktion=0.1': unknown key "
                                          r"'split.val_fraktion' \(did you mean 'split.val_fraction'\?\) "
                                          r"\(check the spelling\)$"):
        compose(["split.val_fraktion=0.1"])  # Hydra's error; no '+' hint: the schema has no room for it
    with pytest.raises(VpevalError, match=r": split.val_fraktion=0.1: unknown key \(did you mean 'split.val_fraction'\?\)$"):
        compose(["+split.val_fraktion=0.1"])  # as a recipe file with the typo would
    with pytest.raises(VpevalError, match=r"attacker.training.epoks=3: unknown key \(did you mean "
                                          r"'attacker.training.epochs'\?\)"):
        compose(["+attacker.training.epoks=3"])


def test_plugin_keys_keep_their_defaults_check():
    """Keys whose set differs per option or `_target_` are not in a schema: a value override is
    checked against the option's default, and `+key` may add an argument."""
    with pytest.raises(VpevalError, match=r"anonymizer.batch_seconds must be a number \(default 300\), got 'abc'"):
        compose(["anonymizer.batch_seconds=abc"])
    with pytest.raises(VpevalError, match=r"attacker.training.optimizer.lr must be a number"):
        compose(["attacker.training.optimizer.lr=fast"])
    with pytest.raises(VpevalError, match=r"'\+anonymizer.alpah=0.7' adds a new key"):
        compose(["anonymizer.alpah=0.7"])
    assert compose(["+attacker.training.optimizer.amsgrad=true"]).attacker.training.optimizer.amsgrad is True


def test_settings_name_a_wrong_type_once():
    """A config that did not come through `compose` (a Hydra job): the type, not also the range."""
    cfg = _compose(["attacker.training.batch_size=2.5", "seed=-1"], "config")
    assert problems(cfg) == ["attacker.training.batch_size=2.5: must be an integer",
                             "seed=-1: must be an integer >= 0 and <= 2**63-1 (9223372036854775807)"]


def test_typed_settings_of_every_shipped_section_and_one_line_per_bad_key():
    """The sections the stages take typed (`typed`): every shipped config converts, train-vc's
    `speaker_encoder.split` included; a bad key is one line naming it under the section."""
    from pipeline.asv.train import attacker_settings
    from pipeline.core.errors import VpevalError
    from pipeline.core.schemas import Data, Detect, Split, SparseTrials, typed
    from tests.helpers import training_config

    cfg = compose(["split.sparse_trials={target: 3, nontarget: 9}", "split.unseen_speakers=[19,26]"])
    split = typed(cfg.split, Split, "split")
    assert split.sparse_trials == SparseTrials(3, 9) and split.unseen_speakers == [19, 26]
    assert typed(cfg.detect, Detect, "detect").bootstrap.n_resamples == cfg.detect.bootstrap.n_resamples
    for name in ("tiny", "small", "gpu"):
        vc = training_config(name, ["out=unused", "data.root=/corpus"])
        assert typed(vc.speaker_encoder.split, Split, "speaker_encoder.split").holdout == "speaker"
        assert typed(vc.data, Data, "data").language is None  # MLS's key: None for the other corpora
        attacker_settings(vc.speaker_encoder.attacker, "speaker_encoder.attacker")
    given = {"val_fraction": 0.1, "enroll_utterances": 2}
    for values, line in (
            (given, "speaker_encoder.split.holdout: required, not set (add speaker_encoder.split.holdout=...)"),
            ({**split.__dict__, "val_fraktion": 0.2}, "speaker_encoder.split.val_fraktion: unknown key (the keys of "
             "speaker_encoder.split are val_fraction, holdout, unseen_speakers, enroll_utterances, select_fraction, "
             "sparse_trials)"),
            ({**split.__dict__, "sparse_trials": None, "enroll_utterances": "two"},
             "speaker_encoder.split.enroll_utterances: Value 'two' of type 'str' could not be converted to Integer"),
            ({**split.__dict__, "sparse_trials": None, "val_fraction": 1.5},  # the field's range check, at conversion
             "speaker_encoder.split.val_fraction=1.5: must be a number in (0, 1)")):
        with pytest.raises(VpevalError) as raised:
            typed(values, Split, "speaker_encoder.split")
        assert str(raised.value) == line

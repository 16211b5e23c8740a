"""pipeline.app.settings: every setting checked before any stage, every problem listed at once."""
import dataclasses

import pytest

from omegaconf import OmegaConf

from pipeline.app.settings import ABOVE_SCHEMAS, check_settings, plugin_class, problems
from pipeline.app.usage import group_options
from pipeline.core.checks import Checked, matching
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import checks

SHIPPED = ([f"{group}={option}" for group in ("data", "attacker", "backend", "attacks", "anonymizer", "asr")
            for option in group_options()[group] if option not in ("external", "precomputed")]
           + [f"+experiment={name}" for name in group_options()["experiment"]])


@pytest.mark.parametrize("override", SHIPPED)
def test_every_shipped_config_and_recipe_passes(override):
    """Only the values a config leaves for the user (`data.root: ???`, ecapa_ssl's `attacker.model.wavlm`
    and the pretrained folder it fine-tunes) are missing."""
    fine_tunes = override in ("attacker=ecapa_ssl", "+experiment=vpc2026", "+experiment=vpc2026_track2")
    left_to_the_user = ("data.root: required", "attacker.model.wavlm: required",
                        *(("attacker.finetune=true: needs attacker.init",) if fine_tunes else ()))
    assert [p for p in problems(compose([override])) if not p.startswith(left_to_the_user)] == []


@pytest.mark.parametrize("override, expected", [
    ("seed=-1", "seed=-1: must be an integer >= 0"),
    ("seed=99999999999999999999", "seed=99999999999999999999: must be an integer >= 0 and <= 2**63-1"),
    ("seed=9223372036854775808", "seed=9223372036854775808: must be an integer >= 0 and <= 2**63-1"),
    ("anonymization_seed=99999999999999999999", "anonymization_seed=99999999999999999999: must be an integer >= 0 "
     "and <= 2**63-1"),
    ("data.generate.seed=-1", "data.generate.seed=-1: must be an integer >= 0 and <= 2**63-1"),
    ("data.eval_trials=cross", "data.eval_trials=cross: must be same_gender, mixed or both"),
    ("data.protocol.seed=99999999999999999999", "data.protocol.seed=99999999999999999999: must be an integer >= 0"),
    ("attacker.training.epochs=100000000000000000000",
     "attacker.training.epochs=100000000000000000000: must be an integer >= 1 and <= 10000"),
    ("attacker.training.epochs=10001", "attacker.training.epochs=10001: must be an integer >= 1 and <= 10000"),
    ("device=gpu", "device=gpu: must be auto, cpu, cuda or cuda:N"),
    ("split.val_fraction=1.0", "split.val_fraction=1.0: must be a number in (0, 1)"),
    ("split.val_fraction=0", "split.val_fraction=0: must be a number in (0, 1)"),
    ("split.holdout=random", "split.holdout=random: must be unseen, speaker or list"),
    ("split.enroll_utterances=0", "split.enroll_utterances=0: must be an integer >= 1"),
    ("detect.false_alarm=0.5", "detect.false_alarm=0.5: must be a number in (0, 0.5)"),
    ("detect.bootstrap.unit=utterances", "detect.bootstrap.unit=utterances: must be speakers or trials"),
    ("data.generate.duration=[3.0,1.0]", "data.generate.duration=[3.0, 1.0]: must be a [low, high] pair"),
    ("data.generate.subsets.dev-synth.utterances=0",
     "data.generate.subsets.dev-synth.utterances=0: must be an integer >= 1"),
    ("attacker.training.epochs=0", "attacker.training.epochs=0: must be an integer >= 1"),
    ("attacker.training.precision=fp8", "attacker.training.precision=fp8: must be fp32 or bf16 or fp16"),
    ("distributed.port=80", "distributed.port=80: must be null or a port from 1024 to 65534"),
    ("anonymizer.batch_seconds=0", "anonymizer.batch_seconds=0: must be a number of seconds > 0"),
    ("split.select_fraction=1", "split.select_fraction=1: must be null or a number in (0, 1)"),
    ("split.sparse_trials={target:0,nontarget:5}", "split.sparse_trials={'target': 0, 'nontarget': 5}: must be null or"),
    ("anonymization_seed=-2", "anonymization_seed=-2: must be an integer >= 0"),
    ("anonymizer.lpc=covariance", "anonymizer.lpc=covariance: must be levinson or burg"),
    ("attacker.training.compile=fast", "attacker.training.compile=fast: must be null, false, true or one of default"),
    ("reidentification.populations=[1]", "reidentification.populations=[1]: must be a list of integers >= 2"),
    ("reidentification.candidates=[10,1]", "reidentification.candidates=[10, 1]: must be a list of integers >= 2"),
    ("reidentification.lengths=[0]", "reidentification.lengths=[0]: must be a list of integers >= 1"),
    ("reidentification.calibration_conversations=0", "reidentification.calibration_conversations=0: must be an integer"),
    ("reidentification.runs=0", "reidentification.runs=0: must be an integer >= 1"),
    ("reidentification.confidence=1", "reidentification.confidence=1: must be a number in (0, 1)"),
    ("reidentification.short_speakers=keep", "reidentification.short_speakers=keep: must be calibrate or drop"),
    ("output_check.max_non_speech=1", "output_check.max_non_speech=1: must be a number in [0, 1)"),
    ("output_check.max_non_speech=-0.1", "output_check.max_non_speech=-0.1: must be a number in [0, 1)"),
    # combinations
    ("eval_splits=[test,tst]", "eval_splits=['test', 'tst']: 'tst' is not an evaluation subset of data=synthetic"),
    ("eval_splits=[test,dev,test]", "eval_splits=['test', 'dev', 'test']: names 'test' more than once"),
    ("detect.test_split=dev2", "detect.test_split=dev2: must be one of eval_splits ['dev', 'test']"),
    ("distributed.node_rank=1", "distributed.node_rank=1: must be below distributed.nodes=1"),
    ("data.generate.subsets.train-synth.female=5", "split.holdout=unseen: train-synth has 5 female speaker(s); at least 4 per gender are held out unseen"),
    ("detect.method=ratio", "detect.method=ratio: must be gap, gap_re or line"),
    ("detect.tolerance=0.5", "detect.tolerance=0.5: must be a number in (0, 0.5)"),
    ("attacker.pretrained_on=anonymised", "attacker.pretrained_on=anonymised: must be original or anonymized"),
    ("split.unseen_speakers=3", "split.unseen_speakers=3: must be null, a list of speaker ids or the path"),
    ("attacks.OO.trials=anonymised", "attacks.OO.trials=anonymised: must be original or anonymized"),
    ("anonymizer=external", "anonymizer.command: required, not set (add anonymizer.command=...)"),
])
def test_bad_setting_is_named_with_what_is_allowed(override, expected):
    found = problems(compose([override]))
    assert len(found) == 1 and found[0].startswith(expected), found


def test_speaker_holdout_needs_two_utterances_per_speaker_and_named_speakers_need_unseen():
    (found,) = problems(compose(["split.val_fraction=0.04", "split.holdout=speaker"]))
    assert found.startswith("split.val_fraction=0.04: holds out 1 of the 30 utterances per speaker of train-synth")
    (found,) = problems(compose(["split.holdout=speaker", "split.unseen_speakers=[19]"]))
    assert found.startswith("split.unseen_speakers is set, but split.holdout=speaker")


def test_rules_accept_the_edges_of_their_ranges():
    cfg = compose(["split.val_fraction=0.999", "split.holdout=speaker", "seed=0", "detect.false_alarm=0.001", "device=cuda:3",
                   "attacker.training.scheduler.warmup_fraction=0", "data.generate.duration=[1.0,1.0]"])
    assert problems(cfg) == []
    largest = ["seed=9223372036854775807", "anonymization_seed=9223372036854775807", "attacker.training.epochs=10000"]
    assert problems(compose(largest)) == []


def test_checkpoint_every_null_means_epochs_only():
    """Regression: the range check refused `attacker.training.checkpoint_every=null`, which the
    schema types `int | None`, conf/attacker/ecapa.yaml documents ("null: epochs only") and the
    training handles."""
    assert problems(compose(["attacker.training.checkpoint_every=null"])) == []
    assert problems(compose(["attacker.training.checkpoint_every=0"])) == [
        "attacker.training.checkpoint_every=0: must be null (epochs only) or an integer >= 1"]


def test_list_holdout_is_not_held_to_two_per_speaker():
    """Under split.holdout=list the split leaves speakers with fewer than 2 out of validation."""
    assert problems(compose(["split.val_fraction=0.04", "split.holdout=list"])) == []


def test_every_problem_in_one_line():
    with pytest.raises(VpevalError) as caught:
        check_settings(compose(["seed=-1", "split.val_fraction=2", "attacker.training.epochs=0"]))
    message = str(caught.value)
    assert "\n" not in message and message.startswith("config: 3 problem(s): seed=-1")
    assert "split.val_fraction=2" in message and "attacker.training.epochs=0" in message


def test_build_checks_anonymiser_parameters_and_devices():
    """An anonymiser's parameters are checked by its parameter dataclass, without building it."""
    assert problems(compose(["anonymizer.alpha=[0.9,0.2]"])) == [
        "anonymizer.alpha=[0.9, 0.2]: must be a number > 0 or a [low, high] pair with 0 < low <= high"]
    found = problems(compose(["device=cuda:7"]), build=True)
    import torch

    if not torch.cuda.is_available():
        assert any("device='cuda:7' requested but CUDA is not available" in p for p in found)


def test_every_checked_key_exists_in_some_shipped_config():
    """A check whose key no config has would never run (a typo in a schema's ranges, in ABOVE_SCHEMAS or
    in a plugin class's `settings_checks`)."""
    keys = {*checks(), *ABOVE_SCHEMAS}
    seen, plugins = set(), {}
    for override in [*SHIPPED, "anonymizer@attacker_anonymizer=mcadams", "anonymizer=external",
                     "anonymizer=precomputed"]:
        cfg = compose([override])
        seen |= {pattern for pattern in keys if any(True for _ in matching(cfg, pattern))}
        for group in ("anonymizer", "attacker_anonymizer", "asr", "attacker.model"):
            node = OmegaConf.select(cfg, group)
            cls = plugin_class(node) if node is not None else None
            if cls is not None and issubclass(cls, Checked):
                plugins.setdefault(cls, set()).update(node.keys())
    assert seen == keys
    assert {cls.__name__ for cls in plugins} >= {"McAdams", "XVector", "OHNN", "Whisper", "SpeakerEncoder",
                                                 "SSLSpeakerEncoder"}
    assert {cls.__name__: set(cls.settings_checks) - present for cls, present in plugins.items()} == {
        cls.__name__: set() for cls in plugins}
    # an anonymiser's parameter dataclass has exactly the keys of its configs (less the labels)
    parameters = {cls.__name__: ({f.name for f in dataclasses.fields(cls.parameters)}, present - {"name", "_target_"})
                  for cls, present in plugins.items() if dataclasses.is_dataclass(getattr(cls, "parameters", None))}
    assert set(parameters) >= {"McAdams", "External", "Precomputed", "XVector", "OHNN"}  # and any added system
    assert {name: fields for name, (fields, _) in parameters.items()} == {
        name: present for name, (_, present) in parameters.items()}


def test_model_based_anonymisers_are_not_built_but_their_folders_checked(tmp_path):
    found = problems(compose(["anonymizer=ohnn", f"anonymizer.vc_model={tmp_path}", "device=cpu"]), build=True)
    assert found == [f"anonymizer.vc_model={tmp_path}: no model.json and model.pt there; train the model with "
                     "vpeval train-vc vc (see recipes/train_vc/README.md)",
                     "anonymizer.ohnn_model is not set: no trained weights configured; train them with vpeval "
                     "train-vc ohnn (see recipes/train_vc/README.md) and set anonymizer.ohnn_model=<output folder>"]


def test_praat_tracker_without_its_package_stops_at_the_settings_check(monkeypatch):
    from pipeline.metrics.pitch_correlation import PRAAT_MISSING

    monkeypatch.setattr("pipeline.app.settings.praat_version", lambda: None)
    assert PRAAT_MISSING in problems(compose(["utility.pitch_tracker=praat", "device=cpu"]), build=True)
    assert PRAAT_MISSING not in problems(compose(["utility.pitch_tracker=praat", "utility.pitch_correlation=false",
                                                  "device=cpu"]), build=True)
    assert PRAAT_MISSING not in problems(compose(["device=cpu"]), build=True)


def test_missing_folders_are_named_with_every_other_problem(tmp_path):
    """Regression: a wrong setting hid the checks of the corpus and attacker folders (they ran at
    their stage), so a missing data.root and a mistyped attacker.pretrained took two runs."""
    found = problems(compose(["data=librispeech", f"data.root={tmp_path / 'corpus'}", "split.val_fraction=2",
                              f"attacker.pretrained={tmp_path / 'asv'}", f"attacker.init={tmp_path / 'asv'}",
                              "device=cpu"]), build=True)
    assert found[1:] == [f"data.root={tmp_path / 'corpus'}: corpus folder not found",
                         f"attacker.pretrained={tmp_path / 'asv'}: attacker folder not found"]
    assert found[0].startswith("split.val_fraction=2")
    assert problems(compose([f"data.root={tmp_path}", "device=cpu"]), build=True) == []  # the built-in corpus

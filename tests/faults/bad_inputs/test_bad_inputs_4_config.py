"""Bad inputs: config overrides, settings and the command line."""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.core.config import compose
from tests.faults.bad_inputs.catalogue import cli_message, raised, record, vpeval
from tests.helpers import librispeech_tree

CONFIG_ROWS = [  # row, input, where detected, override, needles
    ("unknown-key", "override of a key the config does not have (`attacker.trainig.epochs=3`)",
     "config (compose, before any work)", "attacker.trainig.epochs=3", ("attacker.trainig.epochs=3", "unknown key")),
    ("wrong-type", "override with a value of the wrong type (`seed=abc`)", "config (compose)", "seed=abc",
     ("seed=abc", "must be an integer")),
    ("wrong-list", "a scalar where a list is expected (`eval_splits=test`)", "config (compose)", "eval_splits=test",
     ("eval_splits", "must be a list")),
    ("unknown-option", "a config group option that does not exist (`anonymizer=mcadam`)", "config (compose)",
     "anonymizer=mcadam", ("anonymizer=mcadam", "did you mean 'mcadams'")),
    ("added-unread-key", "a top-level key added with `+` that nothing reads (`+sed=5`; the run went on with the "
     "default seed and exit 0)", "config (compose)", "+sed=5", ("'+sed=5'", "does not read", "did you mean 'seed'")),
]


@pytest.mark.parametrize("row, what, where, override, needles", CONFIG_ROWS, ids=[row[0] for row in CONFIG_ROWS])
def test_config_rows(tmp_path, row, what, where, override, needles):
    record(row, what, where, raised(compose, [override]), tmp_path, *needles)


SETTINGS_ROWS = [  # row, input, override, needles (pipeline.app.settings, before any stage)
    ("out-of-range", "a fraction outside its open interval (`split.val_fraction=1.5`)", "split.val_fraction=1.5",
     ("split.val_fraction=1.5", "(0, 1)")),
    ("no-such-device", "a device name torch does not know (`device=gpu`)", "device=gpu", ("device=gpu", "cuda:N")),
    ("count-below-one", "a count below 1 (`attacker.training.epochs=0`)", "attacker.training.epochs=0",
     ("attacker.training.epochs=0", ">= 1")),
    ("too-many-epochs", "an epoch count no run could finish (`attacker.training.epochs=100000000000000000000`)",
     "attacker.training.epochs=100000000000000000000", ("attacker.training.epochs=100000000000000000000", "<= 10000")),
    ("seed-out-of-range", "a seed torch cannot take (`seed=99999999999999999999`; it ended in an overflow traceback)",
     "seed=99999999999999999999", ("seed=99999999999999999999", "2**63-1")),
    ("split-not-in-corpus", "an evaluation split the corpus does not have (`eval_splits=[test,tst]`)",
     "eval_splits=[test,tst]", ("eval_splits", "'tst'", "data=synthetic")),
    ("split-twice", "an evaluation split named twice (`eval_splits=[test,test]`; every row was reported twice)",
     "eval_splits=[test,test]", ("eval_splits", "'test' more than once")),
    ("too-few-held-out", "a validation fraction that holds out fewer than 2 utterances per speaker "
     "(`split.holdout=speaker split.val_fraction=0.02`)", "split.holdout=speaker split.val_fraction=0.02",
     ("split.val_fraction=0.02", "at least 2")),
    ("too-few-unseen", "unseen validation speakers that leave fewer than 2 of a gender to train on "
     "(`data.generate.subsets.train-synth.female=5`)", "data.generate.subsets.train-synth.female=5",
     ("split.holdout=unseen", "train-synth has 5 female", "2 must remain")),
    ("named-unseen-not-unseen", "unseen speakers named under another holdout "
     "(`split.holdout=speaker split.unseen_speakers=[19]`)", "split.holdout=speaker split.unseen_speakers=[19]",
     ("split.unseen_speakers", "split.holdout=speaker")),
    ("unknown-detector", "a detector that does not exist (`detect.method=ratio`)", "detect.method=ratio",
     ("detect.method=ratio", "gap, gap_re or line")),
    ("backend-unknown-enrolment", "a scoring backend's enrolment rule it does not have (`backend=plda "
     "backend.enrolment=avg`; it stopped only when the first condition was scored, after training)",
     "backend=plda backend.enrolment=avg", ("backend.enrolment=avg", "multi or mean")),
    ("examples-per-epoch-typo", "an unknown epoch definition (`attacker.training.examples_per_epoch=chunk`; it "
     "stopped only when the attacker started training)", "attacker.training.examples_per_epoch=chunk",
     ("attacker.training.examples_per_epoch=chunk", "chunks or utterances")),
    ("extraction-compile-typo", "an unknown compile mode for extraction (`attacker.extraction.compile=fast`; "
     "when the setting was new it stopped only at the first embedded list, after training)",
     "attacker.extraction.compile=fast", ("attacker.extraction.compile=fast", "reduce-overhead")),
    ("required-unset", "a required value left unset (`anonymizer=external` without `anonymizer.command`)",
     "anonymizer=external", ("anonymizer.command", "required")),
    ("anonymizer-unknown-key", "an anonymiser key its system does not have (`+anonymizer.lpc_ordr=16`; it stopped "
     "only when the system was built)", "+anonymizer.lpc_ordr=16",
     ("anonymizer.lpc_ordr", "not a parameter of this system", "lpc_order")),
    ("unknown-wer-text", "a WER text rule that does not exist (`utility.wer_text=whisper`)", "utility.wer_text=whisper",
     ("utility.wer_text=whisper", "vpc or vpc_speechbrain or vpc2026_whisper")),
    ("asr-batch-size", "a recogniser batch of no utterance (`asr=speechbrain_ctc asr.batch_size=0`; it decoded "
     "them one at a time, not in VPC's batches)", "asr=speechbrain_ctc asr.batch_size=0",
     ("asr.batch_size=0", "an integer >= 1")),
    ("unknown-pitch-tracker", "an F0 tracker that does not exist (`utility.pitch_tracker=crepe`)",
     "utility.pitch_tracker=crepe", ("utility.pitch_tracker=crepe", "yin_viterbi or yin or praat")),
    ("unknown-uar-rule", "an emotion UAR rule that does not exist (`utility.uar_rule=speaker`)",
     "utility.uar_rule=speaker", ("utility.uar_rule=speaker", "pooled or vpc")),
    ("unknown-checkpoint-rule", "a rule for picking each SER fold's checkpoint that does not exist "
     "(`emotion.checkpoint=best`)", "emotion.checkpoint=best", ("emotion.checkpoint=best", "valid_loss or last")),
    ("whisper-stride-too-long", "Whisper chunks whose strides overlap (`asr=whisper_vpc2026 asr.stride_length_s=15`)",
     "asr=whisper_vpc2026 asr.stride_length_s=15", ("asr.stride_length_s=15", "below half of asr.chunk_length_s=30")),
]


@pytest.mark.parametrize("row, what, override, needles", SETTINGS_ROWS, ids=[row[0] for row in SETTINGS_ROWS])
def test_settings_rows(tmp_path, row, what, override, needles):
    from pipeline.app.settings import check_settings

    record(row, what, "settings (pipeline.app.settings, before any stage)",
           raised(check_settings, compose(override.split())), tmp_path, *needles)


def test_cli_every_bad_setting_at_once(tmp_path):
    message = cli_message(vpeval("seed=-1", "split.val_fraction=2", "device=gpu", tmp=tmp_path))
    record("cli-bad-settings", "`vpeval seed=-1 split.val_fraction=2 device=gpu` (three bad settings)",
           "CLI (exit 2, before Hydra starts)", message, tmp_path, "3 problem(s)", "seed=-1", "split.val_fraction=2",
           "device=gpu")


def test_cli_misspelt_command(tmp_path):
    message = cli_message(vpeval("valdate", tmp=tmp_path))
    record("cli-misspelt-command", "`vpeval valdate` (a misspelt subcommand)", "CLI (exit 2)", message, tmp_path,
           "did you mean 'validate'")


def test_slurm_without_the_extra(tmp_path, monkeypatch):
    from pipeline.app import slurm

    real = slurm.importlib.util.find_spec
    monkeypatch.setattr(slurm.importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("hydra_plugins") else real(name, *a))
    record("slurm-extra-missing", "`vpeval -m hydra/launcher=slurm ...` from a wheel installed without the slurm extra",
           "CLI (exit 2, before anything is submitted)",
           raised(slurm.check_slurm_sweep, ["-m", "hydra/launcher=slurm", "seed=1,2"]), tmp_path, "vpeval[slurm]")


def test_cli_unknown_key(tmp_path):
    message = cli_message(vpeval("data=synthetic_tiny", "split.val_fractoin=0.2", tmp=tmp_path))
    record("cli-unknown-key", "`vpeval split.val_fractoin=0.2` (misspelt key)", "CLI (exit 2, before Hydra starts)",
           message, tmp_path, "split.val_fractoin", "unknown key")


def test_cli_sweep_unknown_option(tmp_path):
    """Regression: a sweep (-m) skipped the check, so a misspelt value failed in Hydra's multi-line error."""
    message = cli_message(vpeval("-m", "anonymizer=mcadams,mcadams_fixd", tmp=tmp_path))
    record("cli-sweep-unknown-option", "`vpeval -m anonymizer=mcadams,mcadams_fixd` (a misspelt sweep value)",
           "CLI (exit 2, before Hydra starts a job)", message, tmp_path, "mcadams_fixd")


def test_cli_wrong_type(tmp_path):
    message = cli_message(vpeval("validate", "split.val_fraction=half", tmp=tmp_path))
    record("cli-wrong-type", "`vpeval validate split.val_fraction=half`", "CLI (exit 2, before Hydra starts)",
           message, tmp_path, "split.val_fraction", "must be a number")


def test_cli_missing_corpus(tmp_path):
    message = cli_message(vpeval("validate", "data=librispeech", f"data.root={tmp_path / 'LibriSpeech'}",
                                 tmp=tmp_path))
    record("cli-missing-corpus", "`vpeval validate data=librispeech` with a corpus folder that does not exist",
           "CLI / prepare (exit 2)", message, tmp_path, "LibriSpeech", "not found")


def test_cli_evaluation_speaker_in_training_data(tmp_path):
    root = librispeech_tree(tmp_path / "LibriSpeech", {
        "train-clean-360": {"11": "F", "13": "M"}, "dev-clean": {"21": "F", "23": "M"},
        "test-clean": {"11": "F", "33": "M"}}, utterances=2, seconds=0.2)
    process = vpeval("validate", "data=librispeech", f"data.root={root}", tmp=tmp_path)
    errors = [line for line in process.stderr.splitlines() if line.startswith("vpeval: error:")]
    assert process.returncode == 2 and len(errors) == 4  # this tiny corpus has other problems too, all listed
    record("cli-seen-speaker", "`vpeval validate` on a corpus whose test speaker 11 is also a training speaker",
           "CLI / prepare (exit 2; validate lists every problem of the corpus, this one first)", errors[0],
           tmp_path, "['11']", "training data")


def test_cli_evaluation_split_of_one_gender(tmp_path):
    """Issue 37: a voice corpus whose test split has male speakers only; a male-only training
    split is legitimate (the real-voice corpus of ../shared/voices is one) and not named."""
    root = librispeech_tree(tmp_path / "LibriSpeech", {
        "train-clean-360": {"11": "M", "12": "M", "13": "M"}, "dev-clean": {"21": "F", "22": "F", "23": "M", "24": "M"},
        "test-clean": {"31": "M", "32": "M", "33": "M"}}, utterances=3, seconds=0.2)
    process = vpeval("validate", "data=librispeech", f"data.root={root}", tmp=tmp_path)
    errors = [line for line in process.stderr.splitlines() if line.startswith("vpeval: error:")]
    assert process.returncode == 2 and len(errors) == 1, process.stderr[-2000:]
    record("cli-one-gender", "`vpeval validate` on a corpus whose test split has male speakers only",
           "CLI / prepare (exit 2, in seconds: before anonymisation or training)", errors[0], tmp_path,
           "test-clean", "no female speaker", "3 are male")


def test_split_names_unseen_speakers_absent_from_the_training_list(tmp_path):
    from pipeline.core.cache import Cache
    from pipeline.data.manifest import write_manifest
    from pipeline.stages import split
    from tests.helpers import split_settings, utterances

    manifest = write_manifest(tmp_path / "train.jsonl", utterances({str(i): "f" if i < 6 else "m" for i in range(12)}, 6))
    cfg = split_settings(val_fraction=0.1, holdout="unseen", unseen_speakers=["1", "99", "98"], enroll_utterances=3,
                         select_fraction=None)
    record("unseen-speakers-absent", "`split.unseen_speakers` naming speakers not in the training list", "split",
           raised(split.run, cfg, manifest, Cache(tmp_path / "cache"), seed=1), tmp_path, "split.unseen_speakers",
           "2 speaker(s)", "99")


DETECTION_ROWS = [  # row, input, trusted CSV text or systems, needles (logged; the report says undetermined)
    ("trusted-other-protocol", "a trusted CSV measured with another validation protocol than the runs'",
     "eer_test,eer_val,protocol\n0.2,0.19,holdout=speaker\n0.3,0.28,holdout=speaker\n",
     ("measured with validation protocol 'holdout=speaker'", "these pairs with 'holdout=unseen'")),
    ("trusted-imported", "`detect.trusted` naming a system whose matched attacker is imported", ["s1", "s2"],
     ("detect.trusted names s2", "imported")),
    ("trusted-absent", "`detect.trusted` naming a system not in the sweep", ["s1", "s9"],
     ("detect.trusted names s9", "no matched pair")),
]


@pytest.mark.parametrize("row, what, trusted, needles", DETECTION_ROWS, ids=[row[0] for row in DETECTION_ROWS])
def test_detection_rows(tmp_path, row, what, trusted, needles):
    from pipeline.metrics.detection import assess, read_trusted

    if isinstance(trusted, str):
        (tmp_path / "trusted.csv").write_text(trusted)
        trusted = str(tmp_path / "trusted.csv")
    rows = [{"attack": "AA", "anonymizer": s, "attacker_anonymizer": s, "eer_test": x, "eer_val": x - 0.01,
             "validation_protocol": "holdout=unseen", "imported": "imported attacker" if s == "s2" else None}
            for s, x in (("s1", 0.2), ("s2", 0.3), ("s3", 0.25))]
    judged, (fit,) = assess(rows, trusted=read_trusted(trusted))
    assert all(r["verdict"] == "undetermined" for r in judged[:1])
    record(row, what, "detect (logged; the report is written, verdicts undetermined)", fit["reason"], tmp_path,
           *needles)


def test_power_study_of_one_seed(tmp_path, capsys):
    from tests.helpers import recipe_script

    from pipeline.metrics.results import JudgedPair, SweepJob, SweepSummary
    from tests.helpers import run_config

    results = tmp_path / "sweep" / "aggregate" / "results.json"
    SweepSummary(sweep="sweep", jobs=[SweepJob("0", [], run_config(trusted="s1"), "h")], failed=[], unfinished=[],
                 records=[], detection=[JudgedPair("AA", "s1", "s1", eer_test=0.2, eer_val=0.19, seed=1)],
                 detection_fit=[], seeds=[]).to_json(results)
    assert recipe_script("detection_power", "power").main([str(tmp_path / "sweep")]) == 2
    message = capsys.readouterr().err.removeprefix("power: error: ")
    assert (results.parent / "power.md").read_text().startswith("undetermined")
    record("power-one-seed", "`recipes/detection_power/power.py` on a sweep of one seed", "power study (exit 2, "
           "report written as undetermined)", message, tmp_path, "hydra.sweeper.params.seed", "at least 2")


def test_results_of_an_older_format(tmp_path):
    """A job's results.json written before the format version (issue 39): refused by the aggregate
    with one line naming the file, not read as if its keys meant today's."""
    from pipeline.app.aggregate import aggregate

    results = tmp_path / "sweep" / "0" / "report" / "results.json"
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps({"config_hash": "h", "config": {"detect_method": "gap"}, "records": [],
                                   "detection": []}))
    message = raised(aggregate, tmp_path / "sweep")
    record("results-older-format", "a run's `results.json` written by an older vpeval (no `format_version`)",
           "`vpeval aggregate`, the recipes' scripts (reading results)", message, tmp_path, "results.json",
           "format_version 1 expected, found none", "rerun the experiment")


def test_results_missing_a_field(tmp_path):
    """A hand-edited results.json without a record's set: one line naming the field."""
    from pipeline.metrics.results import RunSummary
    from tests.helpers import run_summary

    results = run_summary([{"attack": "AA", "set": "test_f", "eer": 0.2}]).to_json(tmp_path / "results.json")
    found = json.loads(results.read_text())
    del found["records"][0]["set"]
    results.write_text(json.dumps(found))
    message = raised(RunSummary.from_json, results)
    record("results-missing-field", "a hand-edited `results.json` whose record lacks `set`",
           "reading results (`RunSummary.from_json`)", message, tmp_path, "results.json", "records[0].set missing")


def test_slurm_memory_through_additional_parameters(tmp_path):
    """Regression (issue 27): memory asked through sbatch's own option ended in a 40-line
    FailedJobError traceback (sbatch refuses two memory requests)."""
    message = cli_message(vpeval("-m", "hydra/launcher=slurm", "+hydra.launcher.additional_parameters.mem=30G",
                                 "seed=1,2", tmp=tmp_path))
    record("slurm-memory-twice", "`vpeval -m hydra/launcher=slurm +hydra.launcher.additional_parameters.mem=30G`",
           "CLI (exit 2, before anything is submitted)", message, tmp_path, "additional_parameters.mem=30G",
           "hydra.launcher.mem_gb")


def test_cli_hydra_syntax_error(tmp_path):
    """Regression (issue 27): a Hydra syntax error printed Hydra's several lines and exited 1."""
    message = cli_message(vpeval("seed=[1,2", tmp=tmp_path))
    record("cli-bad-syntax", "`vpeval seed=[1,2` (an override Hydra cannot parse)", "CLI (exit 2, before Hydra starts)",
           message, tmp_path, "'seed=[1,2'", "not valid Hydra syntax")


def test_cli_path_with_non_ascii_letters_needs_no_inner_quotes(tmp_path):
    """Regression (issue 27): `data.root=/corpora/données` needed undocumented inner quotes."""
    root = librispeech_tree(tmp_path / "données" / "LibriSpeech", {
        "train-clean-360": {str(s): "F" if s % 2 else "M" for s in range(11, 21)},
        "dev-clean": {"21": "F", "22": "F", "23": "M", "24": "M"},
        "test-clean": {"31": "F", "32": "F", "33": "M", "34": "M"}}, utterances=3, seconds=0.2)
    process = vpeval("validate", "data=librispeech", f"data.root={root}", tmp=tmp_path)
    assert process.returncode == 0 and "OK: no problems found." in process.stdout, process.stderr[-500:]


def test_too_few_speakers_to_hold_out_unseen_stops_before_anonymising(tmp_path):
    """A real corpus (no generator settings to check) with 3 female training speakers: the
    split's error comes when the experiment starts, before the training list is anonymised."""
    from pipeline.app.experiment import Experiment

    root = librispeech_tree(tmp_path / "LibriSpeech", {
        "train-clean-360": {**{str(s): "F" for s in range(11, 14)}, **{str(s): "M" for s in range(14, 24)}},
        "dev-clean": {"31": "F", "32": "F", "33": "M", "34": "M"},
        "test-clean": {"41": "F", "42": "F", "43": "M", "44": "M"}}, utterances=3, seconds=0.2)
    cfg = compose([f"paths.data={tmp_path / 'data'}", "data=librispeech", f"data.root={root}", "device=cpu"])
    message = raised(lambda: Experiment(cfg).check_split())  # run_experiment's first step
    assert not (tmp_path / "data" / "cache" / "anonymize").exists()
    record("unseen-too-few-real", "a corpus with 3 female training speakers under the default unseen validation "
           "speakers", "experiment start (before any anonymisation)", message, tmp_path,
           "split.holdout=unseen", "3 female speaker(s)")


def test_cli_finetune_without_init(tmp_path):
    message = cli_message(vpeval("validate", "attacker.finetune=true", tmp=tmp_path))
    record("cli-finetune-without-init", "`vpeval attacker.finetune=true` without `attacker.init` (VPC 2026 "
           "fine-tunes a pretrained attacker: the folder is missing)", "CLI (exit 2, before Hydra starts)", message,
           tmp_path, "attacker.finetune=true", "needs attacker.init")


def test_finetune_false_with_init(tmp_path):
    from pipeline.app.settings import check_settings

    message = raised(check_settings, compose(["attacker.finetune=false", f"attacker.init={tmp_path / 'asv_ssl'}"]))
    record("finetune-false-with-init", "`attacker.finetune=false` (from scratch) with `attacker.init` set",
           "settings (pipeline.app.settings, before any stage)", message, tmp_path, "attacker.finetune=false",
           "attacker.init=", "unset one of them")


AUGMENT_ROWS = [  # row, input, override, needles (pipeline.app.settings builds the augmentations, before any stage)
    ("augment-unknown-argument", "a training augmentation with an argument its class does not take "
     "(`+attacker.training.augment.0.drop_freq_lowx=0` on `vpc2026`)", "+attacker.training.augment.0.drop_freq_lowx=0",
     ("attacker.training.augment[0]", "DropFreq", "drop_freq_lowx")),
    ("augment-changes-batch", "a training augmentation that adds crops (SpeechBrain's `Augmenter` with "
     "`concat_original: true`)", "attacker.training.augment=[{_target_:speechbrain.augment.augmenter.Augmenter,"
     "concat_original:true,augmentations:[{_target_:speechbrain.augment.time_domain.DropChunk}]}]",
     ("attacker.training.augment[0]", "turned crops of shape (2, 32000) into (4, 32000)")),
]


@pytest.mark.parametrize("row, what, override, needles", AUGMENT_ROWS, ids=[row[0] for row in AUGMENT_ROWS])
def test_augment_rows(tmp_path, row, what, override, needles):
    from pipeline.app.settings import check_settings

    cfg = compose(["attacker/augment@attacker.training.augment=vpc2026", override])
    record(row, what, "settings (pipeline.app.settings, building the augmentations, before any stage)",
           raised(check_settings, cfg, build=True), tmp_path, *needles)


def tried_ten_times(prepared: Path, genders: str = "f") -> Path:
    """The `prepared` folder with every test speaker of `genders` tried with 10 utterances."""
    from pipeline.core.layout import manifest_path
    from pipeline.data.manifest import read_manifest, write_manifest

    for g in genders:
        path = manifest_path(prepared, f"test_trials_{g}")
        utts = read_manifest(path)
        write_manifest(path, [replace(u, id=f"{u.id}-{i}") for u in utts for i in range(10)])
    return prepared


REIDENTIFICATION_ROWS = [  # row, input, overrides, ten trial utterances per speaker, needles
    ("reidentification-population", "a singling-out population larger than the speakers with enough utterances "
     "(`reidentification.populations=[5]`)", ["reidentification.populations=[5]"], True,
     ("reidentification.populations (test_f): N=5", "only 2 test speakers have 2*L=2 utterances", "2..2")),
    ("reidentification-length", "a conversation longer than any speaker's utterances (`reidentification.lengths=[11]`)",
     ["reidentification.lengths=[11]"], True,
     ("reidentification.lengths (test_f): L=11", "at most 10 utterances")),
    ("reidentification-calibration", "too few utterances for two conversations, one to calibrate and one to test "
     "(1 trial utterance per speaker)",
     ["reidentification.populations=[2]"], False,
     ("reidentification.lengths (test_f): at L=1", "2*L=2", "at most 1")),
    ("reidentification-calibration-drop", "too few utterances for the calibration conversations under "
     "`reidentification.short_speakers=drop` (M = 9, 1 trial utterance per speaker)",
     ["reidentification.populations=[2]", "reidentification.short_speakers=drop"], False,
     ("reidentification.calibration_conversations=9 (test_f)", "(M+1)*L=10", "at most 1")),
    ("reidentification-candidates", "more identification candidates than enrolled speakers "
     "(`reidentification.candidates=[3]`)", ["reidentification.populations=[2]", "reidentification.candidates=[3]"],
     True, ("reidentification.candidates (test_f): N'=3 but 2 speakers are enrolled",)),
]


def grid_of_config(cfg) -> tuple:
    """What check_reidentification takes of a composed config: the typed section, the evaluation splits, the seed."""
    from pipeline.core.schemas import Reidentification, typed

    return typed(cfg.reidentification, Reidentification, "reidentification"), tuple(cfg.eval_splits), cfg.seed


@pytest.mark.parametrize("row, what, overrides, ten, needles", REIDENTIFICATION_ROWS,
                         ids=[row[0] for row in REIDENTIFICATION_ROWS])
def test_reidentification_grid_rows(prepared, tmp_path, row, what, overrides, ten, needles):
    from pipeline.app.experiment import check_reidentification

    cfg = compose(["eval_splits=[test]", "reidentification.enabled=true", "reidentification.candidates=[2]",
                   *overrides])
    record(row, what, "experiment (the prepared lists, before the attacker trains)",
           raised(check_reidentification, *grid_of_config(cfg), tried_ten_times(prepared) if ten else prepared),
           tmp_path, *needles)


def test_reidentification_grid_names_every_bad_key_and_what_fits(prepared, tmp_path):
    """Regression (issue 38): recipes/legal_eval's grid on a small corpus named only its first bad
    key (`populations`), and the user met `candidates` next."""
    from pipeline.app.experiment import check_reidentification

    cfg = compose(["eval_splits=[test]", "reidentification.enabled=true", "reidentification.populations=[2,5]",
                   "reidentification.candidates=[2,3]", "reidentification.lengths=[1,11]"])
    message = raised(check_reidentification, *grid_of_config(cfg), tried_ten_times(prepared, "fm"))
    record("reidentification-grid-all-keys", "a singling-out grid with several values the corpus cannot serve "
           "(`populations=[2,5] candidates=[2,3] lengths=[1,11]`)", "experiment (the prepared lists, before the "
           "attacker trains)", message, tmp_path, "reidentification.populations (test_f): N=5",
           "reidentification.candidates", "reidentification.lengths", "L=11",
           "the largest grid that fits: reidentification.populations=[2] reidentification.candidates=[2] "
           "reidentification.lengths=[1]")

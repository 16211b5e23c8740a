"""`vpeval export`: a run's anonymised data as VoicePrivacy / Kaldi data dirs, and attackers as
SpeechBrain ECAPA folders, for the VPC 2024 toolkit, VoicePAT or SpeechBrain to use.

    vpeval export data OUT [--suffix S] [overrides...]
        OUT/<list>_<S>/ for every list the run evaluates and the attacker's training data, named
        as VPC names them (libri_dev_enrolls_<S>, libri_dev_trials_f_<S>, ...,
        train-clean-360_<S>): wav.scp (absolute paths to vpeval's anonymised audio), utt2spk,
        spk2utt, spk2gender, text when the corpus has it, enrolls / trials as in the originals.
        The data are anonymised first where the cache does not have them yet. S defaults to
        the anonymizer's name. Each dir records the system that wrote it (vpeval_export.json):
        an existing dir of another system, or not written by vpeval, is never overwritten.
    vpeval export attacker MODEL_DIR OUT
        an attacker folder (model.json, model.pt) as hyperparams.yaml + embedding_model.ckpt,
        which speechbrain's EncoderClassifier.from_hparams loads offline with the same embeddings
        (pipeline.asv.speechbrain_folder).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.core.cache import content_hash, plain
from pipeline.core.errors import VpevalError
from pipeline.core.fileio import write_json


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vpeval export", description=__doc__.split("\n\n")[0])
    kinds = parser.add_subparsers(dest="kind", required=True)
    data = kinds.add_parser("data", help="anonymised lists as VPC/Kaldi data dirs with a suffix")
    data.add_argument("out", type=Path, help="folder to write the data dirs into (VPC's data/)")
    data.add_argument("--suffix", help="system suffix of the dir names (default: the anonymizer's name)")
    data.add_argument("overrides", nargs="*", help="the run's config overrides, as for `vpeval`")
    attacker = kinds.add_parser("attacker", help="an attacker folder as a SpeechBrain ECAPA folder")
    attacker.add_argument("model_dir", type=Path, help="attacker folder (model.json, model.pt)")
    attacker.add_argument("out", type=Path, help="folder to write hyperparams.yaml and embedding_model.ckpt into")
    return parser


def main(argv: list[str]) -> int:
    """Run `vpeval export`; 0 on success, 2 on bad input (one line on stderr)."""
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)  # overrides may come after --suffix
        if extra and (args.kind != "data" or any(arg.startswith("-") for arg in extra)):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as stop:
        return int(stop.code or 0)
    try:
        written = export_data(args.out, args.suffix, [*args.overrides, *extra]) if args.kind == "data" else \
            [export_attacker(args.model_dir, args.out)]
    except VpevalError as error:
        print(f"vpeval: error: {error}", file=sys.stderr)
        return 2
    print("\n".join(str(path) for path in written))
    return 0


def export_attacker(model_dir: Path, out: Path) -> Path:
    from pipeline.asv.embed import load_encoder
    from pipeline.asv.speechbrain_folder import export_speechbrain_folder

    return export_speechbrain_folder(load_encoder(model_dir, "cpu"), out)


def export_data(out: Path, suffix: str | None, overrides: list[str]) -> list[Path]:
    """Write every list of the configured run, anonymised by its anonymizer, as `<VPC name>_<suffix>` dirs."""
    from pipeline.app.experiment import Experiment
    from pipeline.core.config import compose
    from pipeline.core.layout import trials_path
    from pipeline.core.vocabulary import ANONYMIZED
    from pipeline.data.kaldi import write_data_dir
    from pipeline.data.manifest import read_manifest, read_trials

    cfg = compose(overrides)
    suffix = str(suffix or cfg.anonymizer.name).lstrip("_")
    planned = planned_dirs(cfg, Path(out), suffix)
    system = {"anonymizer": str(cfg.anonymizer.name), "config_hash": content_hash(plain(cfg.anonymizer))}
    refuse_other_exports(planned, system)  # before any work: nothing half-overwritten
    experiment = Experiment(cfg)
    written = []
    for folder, name in planned.items():
        utts = read_manifest(experiment.data(ANONYMIZED, name, experiment.evaluated))
        trials = read_trials(trials_path(experiment.prepared, name)) if "_trials_" in name else None
        written.append(write_data_dir(folder, utts, enrolls=name.endswith("_enrolls"), trials=trials))
        write_json(folder / EXPORT_RECORD, system)
    return written


EXPORT_RECORD = "vpeval_export.json"


def planned_dirs(cfg, out: Path, suffix: str) -> dict[Path, str]:
    """Data dir -> the list it holds: the attacker's training list, and every evaluation set's
    enrolment and trial lists (variants share their split's enrolment dir)."""
    from pipeline.data.manifest import GENDERS
    from pipeline.stages.prepare import kaldi_dir_name

    planned = {out / f"{'_'.join(cfg.data.subsets.train)}_{suffix}": "train"}
    tag = str(cfg.data.tag)
    for set_name in cfg.eval_splits:
        split, _, variant = str(set_name).partition("_")
        planned.setdefault(out / f"{kaldi_dir_name(tag, split, variant, 'enrolls')}_{suffix}", f"{set_name}_enrolls")
        for g in GENDERS:
            planned[out / f"{kaldi_dir_name(tag, split, variant, f'trials_{g}')}_{suffix}"] = f"{set_name}_trials_{g}"
    return planned


def refuse_other_exports(planned: dict[Path, str], system: dict) -> None:
    """An existing dir is overwritten only by a re-export of the same system."""
    for folder in planned:
        if not folder.exists():
            continue
        record = folder / EXPORT_RECORD
        if not record.is_file():
            raise VpevalError(f"{folder}: exists and was not written by vpeval export; choose another --suffix or "
                              "folder, or remove it")
        found = json.loads(record.read_text())
        if found != system:
            raise VpevalError(f"{folder}: holds the export of another system ({found.get('anonymizer')} "
                              f"#{found.get('config_hash')}, this one is {system['anonymizer']} "
                              f"#{system['config_hash']}); choose another --suffix")

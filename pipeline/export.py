"""`vpeval export`: a run's anonymised data as VoicePrivacy / Kaldi data dirs, and attackers as
SpeechBrain ECAPA folders, for the VPC 2024 toolkit, VoicePAT or SpeechBrain to use.

    vpeval export data OUT [--suffix S] [overrides...]
        OUT/<list>_<S>/ for every list the run evaluates and the attacker's training data, named
        as VPC names them (libri_dev_enrolls_<S>, libri_dev_trials_f_<S>, ...,
        train-clean-360_<S>): wav.scp (absolute paths to vpeval's anonymised audio), utt2spk,
        spk2utt, spk2gender, text when the corpus has it, enrolls / trials as in the originals.
        The data are anonymised first where the cache does not have them yet. S defaults to
        the anonymizer's name.
    vpeval export attacker MODEL_DIR OUT
        an attacker folder (model.json, model.pt) as hyperparams.yaml + embedding_model.ckpt,
        which speechbrain's EncoderClassifier.from_hparams loads offline with the same embeddings
        (pipeline.asv.speechbrain_folder).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.errors import VpevalError


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
    from pipeline.config import compose
    from pipeline.data.kaldi import write_data_dir
    from pipeline.data.manifest import GENDERS, read_manifest, read_trials
    from pipeline.experiment import Experiment
    from pipeline.layout import trials_path
    from pipeline.stages.prepare import kaldi_dir_name

    cfg = compose(overrides)
    suffix = str(suffix or cfg.anonymizer.name).lstrip("_")
    experiment = Experiment(cfg)
    system = experiment.evaluated

    def anonymised(name: str) -> list:
        return read_manifest(experiment.data("anonymized", name, system))

    written = [write_data_dir(out / f"{'_'.join(cfg.data.subsets.train)}_{suffix}", anonymised("train"))]
    tag = str(cfg.data.tag)
    for set_name in cfg.eval_splits:
        split, _, variant = str(set_name).partition("_")
        enrolls = anonymised(f"{set_name}_enrolls")
        written.append(write_data_dir(out / f"{kaldi_dir_name(tag, split, variant, 'enrolls')}_{suffix}", enrolls,
                                      enrolls=True))
        for g in GENDERS:
            name = f"{set_name}_trials_{g}"
            written.append(write_data_dir(out / f"{kaldi_dir_name(tag, split, variant, f'trials_{g}')}_{suffix}",
                                          anonymised(name), trials=read_trials(trials_path(experiment.prepared, name))))
    return list(dict.fromkeys(written))  # variants share their split's enrolment dir

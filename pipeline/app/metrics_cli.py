"""`vpeval metrics FILE...`: every applicable metric of score files, as a table and JSON.

    vpeval metrics scores/oa_f.txt scores/aa_f.txt --bootstrap 1000 --json metrics.json
    vpeval metrics oo.txt op.txt pp.txt --figures figs/
    vpeval metrics run0.txt run1.txt --c-ece run0.txt run1.txt
    vpeval metrics exp/asv_anon_mcadams/libri_dev_enrolls_mcadams-libri_dev_trials_f_mcadams/scores \
        --trials data/libri_dev_trials_f/trials        # a VPC 2024 score file and its trials

Each FILE gets every metric of `pipeline.metrics.registry.METRICS` that needs no embeddings (and, on request, bootstrap intervals and the per-speaker
breakdown). Trial tables (5 fields) come in threes, in the order OO OP PP, and also give
the voice similarity metrics.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.core.errors import VpevalError
from pipeline.core.fileio import write_json
from pipeline.metrics.bootstrap import UNITS, bootstrap_ci, coverage_note, few_speakers_note
from pipeline.metrics.calibration import calibration_extension
from pipeline.metrics.dcf import det_curve
from pipeline.metrics.scorefiles import LAYOUTS, ScoreFile, field_count, read_scores, read_utt2spk
from pipeline.metrics.similarity import (
    SETS,
    VARIANTS,
    SimilarityResult,
    similarity_metrics,
)
from pipeline.metrics.registry import score_metrics, table_columns
from pipeline.metrics.summary import condition_of, evaluate
from pipeline.metrics.zebra import ece_profile
from pipeline.metrics.zoo import speaker_breakdown

CLI_METRICS = score_metrics()  # every metric of the list that a score file can give


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vpeval metrics",
        description="Privacy metrics of score files. Formats (told by the field count): "
        + "; ".join(LAYOUTS.values()) + ".",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="score files or OO OP PP trial tables")
    parser.add_argument("--trials", metavar="TRIALS", action="append", default=[],
                        help="trials file (enroll test target|nontarget) of a 3-field VPC score file; one "
                        "per such file, in the order of the files")
    parser.add_argument("--json", metavar="OUT", type=Path, help="write every number to this JSON file")
    parser.add_argument("--bootstrap", metavar="N", type=int, default=0,
                        help="bootstrap resamples for EER and min Cllr intervals (0: none)")
    parser.add_argument("--bootstrap-unit", choices=UNITS, default="speakers",
                        help="resample speakers on both sides of the trials (default: enrolment speaker, and "
                        "the test utterance's speaker from --utt2spk or its LibriSpeech / VCTK id) or trials")
    parser.add_argument("--utt2spk", metavar="FILE",
                        help="Kaldi utt2spk file (utterance speaker): the speaker of every test utterance")
    parser.add_argument("--confidence", type=float, default=0.95, help="interval coverage (0.95)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (0)")
    parser.add_argument("--p-target", type=float, default=0.01, help="minDCF target prior (0.01)")
    parser.add_argument("--c-miss", type=float, default=1.0, help="minDCF miss cost (1)")
    parser.add_argument("--c-fa", type=float, default=1.0, help="minDCF false-alarm cost (1)")
    parser.add_argument("--zoo", action="store_true", help="per-speaker breakdown (JSON only)")
    parser.add_argument("--raw-similarity", action="store_true",
                        help="similarity matrices on the raw scores instead of PAV-calibrated ones")
    parser.add_argument("--c-ece", nargs=2, metavar=("RUN0", "RUN1"),
                        help="ZEBRA calibration extension: calibrations trained on the scores of "
                        "RUN0 and applied to RUN1 (two runs of one stochastic anonymiser)")
    parser.add_argument("--figures", metavar="DIR", type=Path,
                        help="write DET, ZEBRA and similarity-matrix figures (PNG) here")
    return parser


def main(argv: list[str]) -> int:
    """Run `vpeval metrics`; 0 on success, 2 on bad input (one line on stderr)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:
        return int(stop.code or 0)
    try:
        report, files, similarity = compute(args)
        if args.json:
            write_json(args.json, report)
        if args.figures:
            write_figures(args.figures, report, files, similarity)
    except VpevalError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(render(report))
    return 0


def compute(args: argparse.Namespace) -> tuple[dict, list[ScoreFile], SimilarityResult | None]:
    """Every metric the files allow, as a JSON-ready dict; also the files read and the
    similarity result (None without trial tables)."""
    if args.bootstrap < 0:
        raise VpevalError(f"--bootstrap must be >= 0, got {args.bootstrap}")
    files = read_files(args.files, args.trials, args.utt2spk)
    tables = [f for f in files if f.format == "table"]
    if tables and len(tables) != 3:
        raise VpevalError(f"trial tables come in threes (OO OP PP, in that order), got {len(tables)}: "
                          + ", ".join(f.path for f in tables))
    report: dict = {"files": [_file_report(f, args) for f in files]}
    if args.c_ece:
        run0, run1 = (read_scores(path) for path in args.c_ece)
        report["calibration_extension"] = {
            "run0": run0.path, "run1": run1.path,
            **calibration_extension(run0.target_scores, run0.nontarget_scores,
                                    run1.target_scores, run1.nontarget_scores).as_dict(),
        }
    result = None
    if tables:
        result = similarity_metrics(*(f.table for f in tables), calibrated=not args.raw_similarity)
        report["similarity"] = {"files": dict(zip(SETS, (f.path for f in tables))), **result.as_dict()}
    return report, files, result


def read_files(paths: list[str], trials: list[str], utt2spk: str | None = None) -> list[ScoreFile]:
    """Read the score files; the k-th 3-field (VPC) file is read with the k-th trials file;
    `utt2spk`: a Kaldi utt2spk file naming the test utterances' speakers."""
    is_vpc = [field_count(path) == 3 for path in paths]
    if sum(is_vpc) != len(trials):
        vpc = [path for path, flag in zip(paths, is_vpc) if flag]
        raise VpevalError(f"{len(vpc)} VPC score file(s) (3 fields: {', '.join(vpc) or 'none'}) but "
                          f"{len(trials)} --trials file(s); give one trials file per VPC score file, in order")
    pending = iter(trials)
    speakers = read_utt2spk(utt2spk) if utt2spk else None
    return [read_scores(path, next(pending) if flag else None, speakers) for path, flag in zip(paths, is_vpc)]


FLIPPED = 0.6  # a threshold-sweep EER above it hints at flipped labels (chance is 50 %)


def _file_report(scores: ScoreFile, args: argparse.Namespace) -> dict:
    entry = {
        "path": scores.path,
        "format": scores.format,
        "summary": evaluate(condition_of(scores, {"p_target": args.p_target, "c_miss": args.c_miss, "c_fa": args.c_fa}),
                            CLI_METRICS),
    }
    eer_vpc = entry["summary"]["eer_threshold"]
    if eer_vpc > FLIPPED:
        entry.setdefault("notes", {})["labels"] = (
            f"EER-VPC {100 * eer_vpc:.2f} % is far above 50 %: target trials mostly score below non-target ones; "
            "are the labels (or the sign of the scores) flipped? (the ROCCH EER stops at 50 %)")
    has_speakers = scores.target_speakers is not None
    if args.bootstrap:
        if args.bootstrap_unit == "speakers" and not has_speakers:
            raise VpevalError(f"{scores.path}: `score label` files carry no speaker ids; "
                              "use --bootstrap-unit trials")
        if args.bootstrap_unit == "speakers" and scores.target_test_speakers is None:
            raise VpevalError(f"{scores.path}: the speaker bootstrap resamples test speakers too, and these test "
                              "utterance ids do not name theirs (LibriSpeech 19-198-0001 or VCTK p225_001 form): "
                              "give --utt2spk FILE, or --bootstrap-unit trials")
        try:
            entry["bootstrap"] = bootstrap_ci(
                scores.target_scores, scores.nontarget_scores, n_resamples=args.bootstrap,
                unit=args.bootstrap_unit, **scores.speaker_sides(), confidence=args.confidence, seed=args.seed,
            ).as_dict()
        except VpevalError as error:  # which file it is about
            raise VpevalError(f"{scores.path}: {error}") from None
    if args.zoo and has_speakers:
        entry["zoo"] = [s.as_dict() for s in speaker_breakdown(
            scores.target_scores, scores.nontarget_scores, scores.target_speakers, scores.nontarget_speakers)]
    elif args.zoo:
        entry["zoo"] = None
        entry.setdefault("notes", {})["zoo"] = "`score label` files carry no speaker ids"
    return entry


def write_figures(folder: Path, report: dict, files: list[ScoreFile],
                  similarity: SimilarityResult | None) -> None:
    """DET and ZEBRA figures of every file; similarity matrices when tables were given."""
    from pipeline.report.figures import (
        det_figure,
        ece_profiles_figure,
        similarity_matrices_figure,
    )

    labels = [_label(entry) for entry in report["files"]]
    det_figure({label: det_curve(f.target_scores, f.nontarget_scores) for label, f in zip(labels, files)},
               folder / "det.png")
    ece_profiles_figure({label: ece_profile(f.target_scores, f.nontarget_scores, actual=False)
                         for label, f in zip(labels, files)}, folder / "zebra.png")
    if similarity is not None:
        for variant in VARIANTS:
            similarity_matrices_figure(similarity, folder / f"similarity_{variant}.png", variant=variant)


def _label(entry: dict) -> str:
    s = entry["summary"]
    return f"{Path(entry['path']).name} ({s['d_ece']:.3f}, {s['l_w']:.3f}, {s['zebra_tag']})"


UNCALIBRATED_NOTE = ("Cllr(raw): the scores read as LLRs, uncalibrated; on cosine scores (not LLRs) it measures "
                     "their miscalibration as much as any disclosure; minCllr is the calibrated value.")


def interval_notes(n_speakers: int | None) -> list[str]:
    """What the bootstrap line says of its intervals from `n_speakers`: too few for any, or
    each interval measured to cover less than nominal (docs/metrics.md, "Coverage").

    >>> interval_notes(3), [note.split(":")[0] for note in interval_notes(8)], interval_notes(81)
    (['3 speaker(s): too few for a speaker interval'], ['EER', 'min Cllr'], [])
    >>> interval_notes(0)[0].startswith("trials resampled")
    True
    """
    few = few_speakers_note(n_speakers)
    if few or n_speakers == 0:  # too few speakers, or trials resampled: one note for both intervals
        return [few or coverage_note(n_speakers)]
    labels = {"EER": "eer", "min Cllr": "min_cllr"}
    return [f"{label}: {note}" for label, key in labels.items() if (note := coverage_note(n_speakers, key))]


def render(report: dict) -> str:
    """The report as a plain-text table (EER in %, Cllr-type values in bits)."""
    columns = table_columns(CLI_METRICS)
    header = ["file", "format", *(column.cli_header for column in columns)]
    rows, extra = [], []
    for entry in report["files"]:
        s = entry["summary"]
        rows.append([entry["path"], entry["format"], *(column.format(s[column.key]) for column in columns)])
        for key, reason in {**s["notes"], **entry.get("notes", {})}.items():
            extra.append(f"{entry['path']}: {key}: {reason}")
        if "bootstrap" in entry:
            b = entry["bootstrap"]
            extra.append(
                f"{entry['path']}: {100 * b['confidence']:g}% CI ({b['n_resamples']} resamples of "
                f"{b['unit']}, seed {b['seed']}): EER [{_num(b['eer']['low'], 2, 100)}, "
                f"{_num(b['eer']['high'], 2, 100)}] %, min Cllr [{_num(b['min_cllr']['low'], 3)}, "
                f"{_num(b['min_cllr']['high'], 3)}]"
                + (f", {b['n_redrawn']} resamples drawn again (one class missing)" if b["n_redrawn"] else "")
                + "".join(f"; {note}" for note in interval_notes(b["n_speakers"]))
            )
    extra.append(UNCALIBRATED_NOTE)
    lines = [_table(header, rows)]
    if extra:
        lines.append("\n".join(extra))
    if "similarity" in report:
        lines.append(_render_similarity(report["similarity"]))
    if "calibration_extension" in report:
        lines.append(_render_calibration(report["calibration_extension"]))
    lines.append("minDCF at p_target={p_target}, c_miss={c_miss}, c_fa={c_fa}; EER-VPC: threshold "
                 "sweep of the VPC 2024 toolkit".format(**report["files"][0]["summary"]["min_dcf_params"]))
    return "\n\n".join(lines)


def _render_similarity(sim: dict) -> str:
    scores = "PAV-calibrated" if sim["calibrated"] else "raw"
    head = (f"Voice similarity matrices ({len(sim['speakers'])} speakers, {scores} scores; "
            + ", ".join(f"{name.upper()}: {path} ({sim['n_trials'][name]} trials)"
                        for name, path in sim["files"].items()) + ")")
    variants = _table(["variant", "DeID%", "G_VD dB", "D_diag OO", "D_diag OP", "D_diag PP"], [
        [variant, _num(sim["deid"][variant], 2, 100), _num(sim["g_vd"][variant], 2),
         *(_num(sim["d_diag"][variant][name], 4) for name in SETS)] for variant in VARIANTS])
    zebra_based = _table(["D_ECE(OP/OO)%", "Cllr_min(OP/OO)%", "G_DECE(PP/OO) dB", "G_Cllr(PP/OO) dB"], [[
        _num(sim["d_ece_op_oo"], 2, 100), _num(sim["cllr_min_op_oo"], 2, 100),
        _num(sim["g_dece_pp_oo"], 2), _num(sim["g_cllr_pp_oo"], 2)]])
    notes = [f"similarity: {key}: {reason}" for key, reason in sim["notes"].items()]
    return "\n".join([head, variants, zebra_based, *notes])


def _render_calibration(ext: dict) -> str:
    head = (f"ZEBRA calibration extension (trained on {ext['run0']}, applied to {ext['run1']}): "
            f"D_ECE run0 {_num(ext['d_ece_run0'], 3)}, run1 {_num(ext['d_ece_run1'], 3)} bits")
    rows = [[method, _num(ext[f"c_ece_{method}"], 4), _num(ext[f"cllr_{method}"], 3)]
            for method in ("linear", "isotonic")]
    notes = [f"calibration extension: {key}: {reason}" for key, reason in ext["notes"].items()]
    return "\n".join([head, _table(["calibration", "C_ECE bits", "Cllr"], rows), *notes])


def _num(value, digits: int, scale: float = 1.0) -> str:
    return "-" if value is None else f"{scale * value:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    return "\n".join("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [header, *rows])

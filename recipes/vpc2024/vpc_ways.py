"""vpeval's way against the VPC 2024 toolkit's, on finished runs (recipes/vpc2024/README.md,
"Where vpeval differs from the VPC toolkit on purpose"). Every EER is the ROCCH-EER with a
95 % speaker bootstrap (1000 resamples); a difference's interval is paired: both ways
scored on the same resampled speakers.

    # two runs that differ in one setting (e.g. the schedule): their AA scores, paired
    python recipes/vpc2024/vpc_ways.py compare <job A> <job B>
    # a run's AA attacker: VPC's extraction (loudness -30 LUFS, peak 1, zeros trimmed; needs
    # pyloudnorm), and the last epoch (VPC evaluates it) when another one was kept
    python recipes/vpc2024/vpc_ways.py rescore <job>
    # VPC's training-chunk rule and validation split applied to a run's attacker training list
    python recipes/vpc2024/vpc_ways.py data <job>

A job is a run folder (a multirun's numbered folder) of `vpeval +experiment=vpc2024 ...`;
its stages are found again through the cache (nothing is recomputed).
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

from pipeline.app.aggregate import job_overrides
from pipeline.app.experiment import Experiment
from pipeline.asv.embed import load_encoder
from pipeline.asv.scoring import CosineBackend, score_trials
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.core.layout import RESULTS, manifest_path, trials_path
from pipeline.data.audio import read_audio
from pipeline.data.manifest import by_speaker, read_manifest, read_trials
from pipeline.metrics import bootstrap_ci
from pipeline.metrics.results import RunSummary
from pipeline.metrics.scorefiles import speakers_of_utterances
from pipeline.runtime.checkpoint import load_checkpoint
from pipeline.stages import split

SETS = ("dev_f", "dev_m", "test_f", "test_m", "val_f", "val_m")
VAL_SETS = ("val_f", "val_m")
RESAMPLES, LEVEL = 1000, 0.95
VPC_CHUNK_SECONDS, VPC_AMPLITUDE = 3.0, 5e-4  # libri_prepare.prepare_csv: seg_dur, amp_th
VPC_LUFS = -30.0  # asv/utils.normalize_wave


def experiment(job: Path) -> Experiment:
    if not (job / ".hydra" / "overrides.yaml").is_file():
        raise VpevalError(f"{job}: not a run folder (no .hydra/overrides.yaml)")
    return Experiment(compose(job_overrides(job)))


def conditions(exp: Experiment) -> dict[str, tuple[list, list, list]]:
    """{set: (enrolment utterances, trial utterances, trials)} of the AA attack."""
    _, held_out = exp.attacker("anonymized")
    found = {}
    for name in SETS[:-2]:
        split, gender = name.split("_")
        found[name] = (read_manifest(exp.data("anonymized", f"{split}_enrolls", exp.evaluated)),
                       read_manifest(exp.data("anonymized", f"{split}_trials_{gender}", exp.evaluated)),
                       read_trials(trials_path(exp.prepared, f"{split}_trials_{gender}")))
    for name in VAL_SETS:  # EER_val per gender, as vpeval measures it (issue 37)
        found[name] = (read_manifest(manifest_path(held_out, "val_enrolls")), read_manifest(manifest_path(held_out, name)),
                       read_trials(trials_path(held_out, name)))
    return found


def vpc_extraction_audio(wav: np.ndarray, sample_rate: int) -> np.ndarray:
    """What VPC 2024's ASV extraction feeds its encoder: loudness normalised to -30 LUFS
    (pyloudnorm, its block-size rule), divided by the peak, leading/trailing zeros trimmed."""
    import pyloudnorm

    duration = len(wav) / sample_rate
    block = 0.4 if duration >= 0.4 else min(duration - 0.0001, abs(duration - 0.1))
    meter = pyloudnorm.Meter(sample_rate, block_size=block)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "possible clipped samples": the peak division follows
        normed = pyloudnorm.normalize.loudness(wav, meter.integrated_loudness(wav), VPC_LUFS)
    return np.trim_zeros((normed / np.abs(normed).max()).astype(np.float32))


def scores_of(encoder, condition, vpc_audio: bool) -> np.ndarray:
    """Cosine scores of one condition, every utterance embedded alone."""
    enrolls, trial_utts, trials = condition
    embedded = {}
    with torch.inference_mode():
        for utt in {u.id: u for u in enrolls + trial_utts}.values():
            wav = read_audio(utt.path, encoder.sample_rate)
            wav = vpc_extraction_audio(wav, encoder.sample_rate) if vpc_audio else wav
            embedded[utt.id] = encoder.embed_samples(torch.from_numpy(wav)[None], torch.tensor([len(wav)]))[0].numpy()
    return score_trials(CosineBackend(), enrolls, np.stack([embedded[u.id] for u in enrolls]), embedded, trials)


def replicates(scores: np.ndarray, trials, set_index: int) -> tuple[float, np.ndarray]:
    """(EER, two-way speaker-bootstrap EER replicates); the same speakers and set give the same
    resamples. Test speakers are read from the utterance ids (LibriSpeech form, as VPC's and
    the built-in corpus's)."""
    target = np.array([t.target for t in trials])
    speakers = np.array([t.enroll for t in trials])
    tested = speakers_of_utterances([t.test for t in trials], None, Path("trials"), np.arange(len(trials)))
    if tested is None:
        raise VpevalError(f"trial utterance ids do not name their speakers (e.g. {trials[0].test}): "
                          "LibriSpeech-form ids are needed (speaker-chapter-utterance)")
    result = bootstrap_ci(scores[target], scores[~target], RESAMPLES, "speakers", speakers[target],
                          speakers[~target], LEVEL, seed=set_index, tar_test_speakers=tested[target],
                          non_test_speakers=tested[~target])
    return result.eer.estimate, np.asarray(result.eer_replicates)


def summary(per_set: dict[str, tuple[float, np.ndarray]]) -> dict[str, tuple[float, np.ndarray]]:
    """EER_test (mean of test_f and test_m) and EER_val (mean of val_f and val_m), each with its replicates."""
    test, val = [per_set["test_f"], per_set["test_m"]], [per_set["val_f"], per_set["val_m"]]
    return {"EER_test": ((test[0][0] + test[1][0]) / 2, (test[0][1] + test[1][1]) / 2),
            "EER_val": ((val[0][0] + val[1][0]) / 2, (val[0][1] + val[1][1]) / 2)}


def interval(values: np.ndarray) -> str:
    low, high = np.quantile(values, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return f"[{100 * low:.2f}, {100 * high:.2f}]"


def report(label: str, ours: dict, theirs: dict, unpaired: tuple[str, ...] = ()) -> None:
    """One line per summary: vpeval's way, VPC's way, the difference (VPC - vpeval) with its
    paired interval (none for the keys in `unpaired`)."""
    for key in ours:
        (a, a_rep), (b, b_rep) = ours[key], theirs[key]
        diff = "(not paired)" if key in unpaired else interval(b_rep - a_rep)
        print(f"{label:<24} {key:<8} vpeval {100 * a:6.2f} {interval(a_rep):<16} VPC {100 * b:6.2f} "
              f"{interval(b_rep):<16} diff {100 * (b - a):+6.2f} {diff}")


def compare(job_a: Path, job_b: Path) -> None:
    """AA of two runs (vpeval's way, VPC's way), paired where their trial lists are equal."""
    sides = []
    for job in (job_a, job_b):
        exp = experiment(job)
        sides.append({name: (scores_of_run(job, name), trials) for name, (_, _, trials) in conditions(exp).items()})
    ours = {name: replicates(*sides[0][name], index) for index, name in enumerate(SETS)}
    theirs = {name: replicates(*sides[1][name], index) for index, name in enumerate(SETS)}
    same_val = all(sides[0][name][1] == sides[1][name][1] for name in VAL_SETS)
    unpaired = () if same_val else ("EER_val",)  # other validation trials
    print(f"{job_a} (vpeval's way) against {job_b} (VPC's way)")
    report("other run", summary(ours), summary(theirs), unpaired)


def scores_of_run(job: Path, name: str) -> np.ndarray:
    """A run's own AA scores of set `name`, in its trial order."""
    files = RunSummary.from_json(job / RESULTS).score_files
    return np.array([float(line.split()[2]) for line in Path(files[f"AA/{name}"]).read_text().splitlines()])


def rescore(job: Path) -> None:
    """The run's AA scores against those of its attacker's last epoch (unless that is the
    kept one) and of VPC's extraction audio; the re-embedding is checked against the run."""
    exp = experiment(job)
    model, _ = exp.attacker("anonymized")
    selected = load_encoder(model, "cpu")
    sets = conditions(exp)
    drift = max(float(np.abs(scores_of(selected, sets[name], False) - scores_of_run(job, name)).max())
                for name in VAL_SETS)
    if drift > 1e-4:
        raise VpevalError(f"{job}: re-scoring val differs from the run's scores by {drift:.2g}")
    log = [json.loads(line) for line in (model / "training_log.jsonl").read_text().splitlines()]
    kept = max((e for e in log if e["best"]), key=lambda e: e["epoch"])["epoch"]
    print(f"{job}: model kept at epoch {kept} of {len(log)}")
    ways = {"VPC extraction": (selected, True)}
    if kept < len(log):
        last = load_encoder(model, "cpu")
        last.load_state_dict(load_checkpoint(model / "checkpoint.pt")["model"])
        ways["last epoch"] = (last, False)
    ours = {name: replicates(scores_of_run(job, name), c[2], i) for i, (name, c) in enumerate(sets.items())}
    for way, (encoder, vpc_audio) in ways.items():
        theirs = {name: replicates(scores_of(encoder, c, vpc_audio), c[2], i)
                  for i, (name, c) in enumerate(sets.items())}
        report(way, summary(ours), summary(theirs))


def chunk_amplitudes(wav: np.ndarray, sample_rate: int, seconds: float) -> list[float]:
    """Mean |x| of each of VPC's fixed chunks of an utterance (int(duration / seconds) of
    them, from the start; none when it is shorter than one), which VPC drops under 5e-4."""
    size = int(seconds * sample_rate)
    return [float(np.abs(wav[i * size:(i + 1) * size]).mean()) for i in range(int(len(wav) / sample_rate / seconds))]


def data(job: Path) -> None:
    """VPC's chunk rule (3 s chunks, and the attacker's crop length; mean |x| < 5e-4 dropped,
    utterances shorter than a chunk give none) and its validation split (`split.val_fraction`
    of all utterances at random, as `split.holdout=list` draws it) on the run's attacker training list."""
    exp = experiment(job)
    utts = read_manifest(exp.data("anonymized", "train", exp.attacker_system))
    rate = int(exp.cfg.data.sample_rate)
    audio = [read_audio(u.path, rate) for u in utts]
    for seconds in (VPC_CHUNK_SECONDS, float(exp.cfg.attacker.training.crop_seconds)):
        chunks = [chunk_amplitudes(wav, rate, seconds) for wav in audio]
        means = [m for own in chunks for m in own]
        quiet = sum(m < VPC_AMPLITUDE for m in means)
        print(f"{seconds:.1f} s chunks: {len(utts)} utterances, {sum(not own for own in chunks)} shorter than a chunk "
              f"(no chunk), {len(means)} chunks, {quiet} with mean |x| < {VPC_AMPLITUDE:g}"
              + (f" (lowest mean |x| {min(means):.2g})" if means else ""))
    speakers = sorted(by_speaker(utts))
    none, under_two, n_dev = [], [], 0
    for draw in range(1000):  # 1000 of VPC's random draws of the whole list (split.holdout=list)
        held = by_speaker(split.hold_out(utts, draw, exp.split.val_fraction, "list")[1])
        n_dev = sum(map(len, held.values()))
        counts = np.array([len(held.get(speaker, [])) for speaker in speakers])
        none.append(int((counts == 0).sum()))
        under_two.append(int((counts < 2).sum()))
    print(f"VPC split: {n_dev} of {len(utts)} utterances held out over {len(speakers)} speakers; over 1000 "
          f"draws, speakers with none held out: mean {np.mean(none):.2f}, with fewer than 2 (no "
          f"enrolment + trial): mean {np.mean(under_two):.2f}, draws with such a speaker: "
          f"{100 * np.mean(np.array(under_two) > 0):.0f} %")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("compare").add_argument("jobs", type=Path, nargs=2)
    commands.add_parser("rescore").add_argument("job", type=Path)
    commands.add_parser("data").add_argument("job", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "compare":
            compare(*args.jobs)
        else:
            {"rescore": rescore, "data": data}[args.command](args.job)
    except VpevalError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""F0 trackers against the true F0 of the built-in synthesiser, before and after McAdams.

    python benchmarks/bench_f0_trackers.py [--speakers 8] [--utterances 6] [--alpha 0.7]
    python benchmarks/bench_f0_trackers.py --against-praat ORIGINAL.jsonl ANONYMISED.jsonl [...]
    python benchmarks/bench_f0_trackers.py --timing

The built-in corpus's synthesiser draws each utterance's F0 contour before it renders the
audio (`pipeline.signal.synthesis.f0_contour`), so the truth of every 5 ms frame is known: its
F0 and whether the glottal source is on (`voicing` track above 0.5). Utterances are drawn as
`pipeline.data.synthetic` draws them (seed 0, speakers 1..N of each gender, one chapter);
McAdams (vpeval's, one α for all) keeps the excitation, so the anonymised audio has the same
F0. For YIN by its Viterbi path (`utility.pitch_tracker=yin_viterbi`, the default), YIN frame by
frame (`yin`) and Praat (`praat`, needs the praat extra), per
gender and for original and anonymised audio: the share of truly voiced frames the tracker
calls voiced, the gross pitch error (tracked F0 more than 20 % from the truth, over frames
voiced in both truth and tracker), and the share of those errors that are octave errors
(ratio within 10 % of 2 or 1/2). Then ρF0 as a run reports it (`utility.pitch_rule=voiced`, the
tracker on the original against the tracker on the anonymised), whose true value is about 1.

Recordings have no true F0; `--against-praat` takes pairs of manifests (an original list and
its anonymised version, as compare_vpc_pitch.py) and measures the YIN trackers against Praat,
the tracker of the VPC 2022 toolkit, per list and audio: the share of Praat's voiced frames the
tracker calls voiced, and the share of frames both call voiced where the two F0s differ by more
than 20 % (of which octaves).

`--timing` prints the wall time of each tracker on one utterance of 3, 10 and 30 s (a 150 Hz
tone gliding ±30 Hz at 0.5 Hz, with noise at -30 dB), the median of three runs after one
warm-up; run it with OMP_NUM_THREADS=1 for one core.
"""
from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from anonymizers.mcadams import mcadams_waves  # noqa: E402
from pipeline.data.phones import frame_tracks, plan_utterance  # noqa: E402
from pipeline.data.synthetic import draw_session, speaker_voice  # noqa: E402
from pipeline.metrics.pitch_correlation import TRACKERS, correlation, in_range, track  # noqa: E402
from pipeline.signal.synthesis import FRAME_MS, f0_contour, frame_count, synthesise  # noqa: E402

RATE, SEED = 16000, 0
YIN_TRACKERS = tuple(t for t in TRACKERS if t != "praat")
TRACKER_HOP = 160  # every tracker: a frame every 10 ms (YIN's frame t is centred on sample 160 t)


def utterances(gender: str, speakers: int, per_speaker: int):
    """(waveform, true F0 per 5 ms frame, truly voiced per frame) as the built-in corpus draws them."""
    for speaker in range(1, speakers + 1):
        voice = speaker_voice(SEED, speaker, gender)
        session = draw_session(np.random.default_rng([SEED, 2, speaker, 0]))
        for utt in range(per_speaker):
            rng = np.random.default_rng([SEED, 3, speaker, 0, utt])
            segments, _ = plan_utterance(rng, voice, int(rng.integers(2000, 4001)))
            n_samples = round(segments[-1].end_ms * RATE / 1000)
            tracks = frame_tracks(segments, voice, frame_count(n_samples, RATE))
            truth = f0_contour(copy.deepcopy(rng), voice, session, tracks)  # synthesise draws it first
            yield synthesise(rng, voice, session, tracks, n_samples, RATE), truth, tracks["voicing"] > 0.5


def truth_at(values: np.ndarray, frames: int, tracker: str, n_samples: int) -> np.ndarray:
    """The 5 ms truth at a tracker's 10 ms frames: YIN's frame t at sample 160 t (both YIN trackers); Praat's frames
    centred in the signal (its first at (duration - (frames - 1) * 10 ms) / 2)."""
    step = TRACKER_HOP * 1000 // (RATE * FRAME_MS)  # truth frames per tracker frame: 2
    if tracker != "praat":
        index = np.arange(frames) * step
    else:
        first = (n_samples / RATE - (frames - 1) * 0.01) / 2
        index = np.round((first + 0.01 * np.arange(frames)) * 1000 / FRAME_MS).astype(int)
    return values[np.clip(index, 0, len(values) - 1)]


def measure(gender: str, args) -> dict:
    rows = {t: {"original": [], "anonymised": [], "rho": []} for t in TRACKERS}
    for wave, f0, voiced in utterances(gender, args.speakers, args.utterances):
        anonymised = mcadams_waves([torch.from_numpy(wave.astype(np.float64))], [args.alpha], RATE)[0].numpy()
        for tracker, found in rows.items():
            tracks = {}
            for kind, audio in (("original", wave), ("anonymised", anonymised)):
                tracked = track(audio.astype(np.float32), RATE, tracker)
                tracks[kind] = tracked
                true_f0 = truth_at(f0, len(tracked), tracker, len(wave))
                true_voiced = truth_at(voiced, len(tracked), tracker, len(wave))
                on = in_range(tracked)
                both = true_voiced & on
                ratio = tracked[both] / true_f0[both]
                gross = np.abs(ratio - 1) > 0.2
                octave = (np.abs(ratio / 2 - 1) < 0.1) | (np.abs(ratio * 2 - 1) < 0.1)
                found[kind].append((on[true_voiced].sum(), true_voiced.sum(), gross.sum(), both.sum(),
                                    (gross & octave).sum()))
            found["rho"].append(correlation(tracks["original"], tracks["anonymised"], "voiced"))
    return rows


def against_praat(manifests: list[Path]) -> None:
    """The YIN trackers against Praat on recorded lists (module docstring)."""
    from pipeline.data.audio import read_audio
    from pipeline.data.manifest import read_manifest

    print("| list | tracker | audio | Praat's voiced frames found | F0 more than 20 % from Praat's | of which octave |")
    print("|---|---|---|---|---|---|")
    for original, anonymised in zip(manifests[::2], manifests[1::2]):
        versions = {u.id: u.path for u in read_manifest(anonymised)}
        counts = {}
        for utt in read_manifest(original):
            for kind, path in (("original", utt.path), ("anonymised", versions[utt.id])):
                wave = read_audio(path, RATE)
                praat = track(wave, RATE, "praat")
                first = (len(wave) / RATE - (len(praat) - 1) * 0.01) / 2  # Praat's frame centres
                for tracker in YIN_TRACKERS:
                    tracked = track(wave, RATE, tracker)
                    reference = praat[np.clip(np.round((0.01 * np.arange(len(tracked)) - first) / 0.01).astype(int),
                                              0, len(praat) - 1)]
                    on, truth = in_range(tracked), in_range(reference)
                    ratio = tracked[on & truth] / reference[on & truth]
                    gross = np.abs(ratio - 1) > 0.2
                    octave = (np.abs(ratio / 2 - 1) < 0.1) | (np.abs(ratio * 2 - 1) < 0.1)
                    found = counts.setdefault((tracker, kind), np.zeros(5))
                    found += [(on & truth).sum(), truth.sum(), gross.sum(), len(ratio), (gross & octave).sum()]
        for (tracker, kind), (hit, voiced, gross, both, octave) in counts.items():
            print(f"| {original.stem} | {tracker} | {kind} | {hit / voiced:.1%} | {gross / both:.1%} | "
                  f"{octave / max(gross, 1):.0%} |")


def timing() -> None:
    """Wall time per utterance of each tracker (module docstring)."""
    rng = np.random.default_rng(SEED)
    print("| seconds of audio | " + " | ".join(f"{t} (ms)" for t in TRACKERS) + " |")
    print("|---|" + "---|" * len(TRACKERS))
    for seconds in (3, 10, 30):
        t = np.arange(seconds * RATE) / RATE
        phase = 2 * np.pi * np.cumsum(150 + 30 * np.sin(2 * np.pi * 0.5 * t)) / RATE
        wave = (0.3 * np.sin(phase) + 0.01 * rng.standard_normal(len(t))).astype(np.float32)
        cells = []
        for tracker in TRACKERS:
            track(wave, RATE, tracker)  # warm-up
            runs = []
            for _ in range(3):
                start = time.perf_counter()
                track(wave, RATE, tracker)
                runs.append(time.perf_counter() - start)
            cells.append(f"{1000 * float(np.median(runs)):.0f}")
        print(f"| {seconds} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speakers", type=int, default=8, help="per gender")
    parser.add_argument("--utterances", type=int, default=6, help="per speaker")
    parser.add_argument("--alpha", type=float, default=0.7, help="McAdams coefficient")
    parser.add_argument("--against-praat", type=Path, nargs="+", metavar="MANIFEST",
                        help="ORIGINAL.jsonl ANONYMISED.jsonl, repeated: recorded lists against Praat")
    parser.add_argument("--timing", action="store_true", help="wall time per utterance of each tracker")
    args = parser.parse_args()
    if args.timing:
        timing()
        return
    if args.against_praat:
        if len(args.against_praat) % 2:
            parser.error("--against-praat takes pairs: ORIGINAL.jsonl ANONYMISED.jsonl")
        against_praat(args.against_praat)
        return
    print(f"{args.speakers} speakers x {args.utterances} utterances per gender, McAdams alpha {args.alpha}\n")
    print("| gender | tracker | audio | voiced frames found | gross pitch error | of which octave | ρF0 (voiced), mean ± std |")
    print("|---|---|---|---|---|---|---|")
    for gender in ("f", "m"):
        for tracker, found in measure(gender, args).items():
            rho = np.array(found["rho"])
            for kind in ("original", "anonymised"):
                hit, voiced, gross, both, octave = np.array(found[kind]).sum(axis=0)
                rho_cell = f"{rho.mean():.3f} ± {rho.std():.3f}" if kind == "anonymised" else ""
                print(f"| {gender} | {tracker} | {kind} | {hit / voiced:.1%} | {gross / both:.1%} | "
                      f"{octave / max(gross, 1):.0%} | {rho_cell} |")


if __name__ == "__main__":
    main()

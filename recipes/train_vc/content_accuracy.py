"""How much spoken content anonymised speech keeps, on the built-in corpus's known phone labels.

A small frame classifier (per-utterance normalised log-mel -> 1-D convolutions -> phone label
per 10 ms frame, labels from the corpus's `<spk>-<chapter>.align.txt` files) is trained on the
original speech of the corpus's training speakers, then evaluated on the evaluation sets
(dev and test enrolment and trial utterances, other speakers) as they are, and as anonymised
by each system. Anonymised sets come from the pipeline's anonymize stage and its cache, so
they are the very files an experiment with the same `paths.data` and seed evaluates.

    PYTHONPATH=$PWD python recipes/train_vc/content_accuracy.py paths.data=/tmp/vpeval data=synthetic_tiny \\
        --system mcadams \\
        --system "xvector anonymizer.vc_model=runs/vc_small/vc_model anonymizer.strategy.n_farthest=10 anonymizer.strategy.n_average=5"

`--resynthesis runs/vc_small/vc_model` adds the converter's copy-synthesis (each utterance
resynthesised from its own content, F0 and embedding): what the vocoder alone loses, to set
the anonymised rows against. The table also gives the majority-label rate (chance).

Prints a Markdown table (system, frames, accuracy, accuracy relative to the original) and
writes it with the per-system numbers as JSON to `--out` when given.
"""
from __future__ import annotations

import argparse
import json
import shlex
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from anonymizers.vc.content import LogMel, masked_normalise
from pipeline.core.cache import Cache
from pipeline.core.config import compose
from pipeline.core.devices import resolve_device
from pipeline.core.errors import VpevalError
from pipeline.core.fileio import write_json
from pipeline.core.layout import manifest_path
from pipeline.core.schemas import Data, typed
from pipeline.data.audio import read_audio
from pipeline.data.manifest import Utterance, read_manifest
from pipeline.signal.f0 import frame_mask, num_frames
from pipeline.stages import anonymize, prepare

HOP = 160
EVAL_SETS = ("dev_enrolls", "dev_trials_f", "dev_trials_m", "test_enrolls", "test_trials_f", "test_trials_m")


def alignment(utt: Utterance) -> list[tuple[float, float, str]]:
    """(start, end, label) segments of an utterance of the built-in corpus."""
    speaker, chapter, _ = utt.id.split("-")
    path = Path(utt.path).parent / f"{speaker}-{chapter}.align.txt"
    if not path.is_file():
        raise VpevalError(f"{path}: no alignment file (content accuracy needs the built-in synthetic corpus)")
    rows = [line.split() for line in path.read_text().splitlines()]
    return [(float(start), float(end), label) for utt_id, start, end, label in rows if utt_id == utt.id]


def label_frames(utt: Utterance) -> int:
    """Frames an utterance's label track covers (one more than its hop count, like the features)."""
    return int(np.ceil(utt.duration * 16000 / HOP)) + 1


def frame_labels(utt: Utterance, frames: int, classes: dict[str, int]) -> np.ndarray:
    """Label index of every frame (frame t centred on t * 10 ms); -1 outside the segments."""
    labels = np.full(frames, -1, dtype=np.int64)
    centres = np.arange(frames) * HOP / 16000
    for start, end, label in alignment(utt):
        labels[(centres >= start) & (centres < end)] = classes.get(label, -1)
    return labels


class FrameClassifier(nn.Module):
    def __init__(self, classes: int, channels: int = 128):
        super().__init__()
        self.mel = LogMel(hop_length=HOP)
        self.net = nn.Sequential(
            nn.Conv1d(80, channels, 5, padding=2), nn.ReLU(), nn.Conv1d(channels, channels, 5, padding=2), nn.ReLU(),
            nn.Conv1d(channels, channels, 5, padding=4, dilation=2), nn.ReLU(), nn.Conv1d(channels, classes, 1))

    def forward(self, waves: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mel = self.mel(waves)
        mask = frame_mask(lengths, HOP, mel.shape[1])
        return self.net(masked_normalise(mel, mask).transpose(1, 2)).transpose(1, 2)


def batches(utts: list[Utterance], size: int):
    for start in range(0, len(utts), size):
        yield utts[start:start + size]


def load(batch: list[Utterance], labels_of, device, transform=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    waves = [read_audio(u.path, 16000) for u in batch]
    if transform is not None:
        waves = [transform(w) for w in waves]
    lengths = torch.tensor([len(w) for w in waves])
    padded = torch.zeros(len(waves), int(lengths.max()))
    for i, w in enumerate(waves):
        padded[i, :len(w)] = torch.from_numpy(w)
    frames = num_frames(padded.shape[1], HOP)
    labels = torch.full((len(batch), frames), -1, dtype=torch.long)
    for i, utt in enumerate(batch):
        own = labels_of(utt)
        labels[i, :len(own)] = torch.from_numpy(own[:frames])
    return padded.to(device), lengths.to(device), labels.to(device)


def train_classifier(train: list[Utterance], classes: dict[str, int], device, epochs: int, seed: int) -> FrameClassifier:
    torch.manual_seed(seed)
    model = FrameClassifier(len(classes)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    labels_of = lambda u: frame_labels(u, label_frames(u), classes)
    cached = [load(batch, labels_of, device) for batch in batches(train, 16)]
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        for index in rng.permutation(len(cached)):
            waves, lengths, labels = cached[index]
            loss = F.cross_entropy(model(waves, lengths).flatten(0, 1), labels.flatten(), ignore_index=-1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


@torch.no_grad()
def accuracy(model: FrameClassifier, utts: list[Utterance], originals: dict[str, Utterance], classes, device,
             transform=None) -> tuple[int, float]:
    correct = total = 0
    labels_of = lambda u: frame_labels(originals[u.id], label_frames(u), classes)
    for batch in batches(utts, 16):
        waves, lengths, labels = load(batch, labels_of, device, transform)
        predicted = model(waves, lengths).argmax(-1)
        valid = labels >= 0
        correct += int((predicted[valid] == labels[valid]).sum())
        total += int(valid.sum())
    return total, correct / max(total, 1)


def majority_rate(utts: list[Utterance], classes: dict[str, int]) -> tuple[int, float]:
    """Frames and share of the most frequent label: the accuracy of always guessing it."""
    labels = np.concatenate([frame_labels(u, label_frames(u), classes) for u in utts])
    labels = labels[labels >= 0]
    return len(labels), float(np.bincount(labels).max() / max(len(labels), 1))


def copy_synthesis(vc_model: Path, device: torch.device):
    """wave -> the converter's resynthesis of it from its own content, F0 and embedding."""
    from anonymizers.vc.model import load_voice_converter

    model, encoder, _ = load_voice_converter(vc_model, device)
    noise_seed = torch.Generator().manual_seed(0)

    @torch.no_grad()
    def transform(wave: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(wave).to(device)[None]
        count = torch.tensor([x.shape[1]], device=device)
        hop = model.hop_length
        padded = F.pad(x, (0, -(-x.shape[1] // hop) * hop - x.shape[1]))
        analysis = model.analyse(padded, count)
        speaker = F.normalize(encoder(x, None), dim=-1)
        noise = torch.randn(padded.shape[1], generator=noise_seed).to(device)[None]
        out = model.synthesise(analysis.content.features, analysis.f0, analysis.voiced, speaker, analysis.frames, noise)
        return out[0, :x.shape[1]].float().cpu().numpy()

    return transform


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help="experiment config overrides (paths.data=..., data=...)")
    parser.add_argument("--system", action="append", default=[],
                        help='"<conf/anonymizer option> [anonymizer.key=value ...]", repeatable')
    parser.add_argument("--resynthesis", type=Path, action="append", default=[],
                        help="a voice-converter folder: add its copy-synthesis of the evaluation sets, repeatable")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    base = compose(args.overrides)
    device = resolve_device(base.device)
    cache = Cache(Path(base.paths.cache))
    prepared = prepare.run(typed(base.data, Data, "data"), cache)
    train = read_manifest(manifest_path(prepared, "train"))
    evaluation = [u for name in EVAL_SETS for u in read_manifest(manifest_path(prepared, name))]
    originals = {u.id: u for u in evaluation}
    classes = {label: i for i, label in enumerate(sorted({s[2] for u in train for s in alignment(u)}))}
    started = time.monotonic()
    model = train_classifier(train, classes, device, args.epochs, int(base.seed))
    log = {"classes": len(classes), "train_utterances": len(train), "classifier_seconds": round(time.monotonic() - started, 1)}
    rows = {"original": accuracy(model, evaluation, originals, classes, device),
            "chance (majority label)": majority_rate(evaluation, classes)}
    for folder in args.resynthesis:
        rows[f"copy-synthesis {folder}"] = accuracy(model, evaluation, originals, classes, device,
                                                    copy_synthesis(folder, device))
    for spec in args.system:
        name, *overrides = shlex.split(spec)
        cfg = compose([*args.overrides, f"anonymizer={name}", *overrides])
        anonymised = []
        for set_name in EVAL_SETS:
            folder = anonymize.run(cfg.anonymizer, manifest_path(prepared, set_name), cache, list_name=set_name,
                                   seed=int(cfg.seed),
                                   device=str(device), sample_rate=int(cfg.data.sample_rate))
            anonymised += read_manifest(folder / "manifest.jsonl")
        rows[spec if name in rows else name] = accuracy(model, anonymised, originals, classes, device)
    reference = rows["original"][1]
    lines = ["| speech | frames | frame accuracy | relative to original |", "|---|---|---|---|"]
    lines += [f"| {name} | {frames} | {acc:.3f} | {acc / reference:.2f} |" for name, (frames, acc) in rows.items()]
    print("\n".join(lines))
    print(json.dumps(log))
    if args.out:
        write_json(args.out, {**log, "systems": {n: {"frames": f, "accuracy": a} for n, (f, a) in rows.items()},
                              "table": lines})


if __name__ == "__main__":
    main()

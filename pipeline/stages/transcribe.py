"""Stage 6e — transcribe: a recogniser's transcript of every utterance of a manifest.

Transcripts are cached per (recogniser, audio): the folder is keyed by the recogniser's
config (conf/asr), its `fingerprint_of` (package version, model folder contents, read without
loading the model: a cached list never loads it) and the
manifests' content, which name the audio files (an anonymised manifest names the audio
folder of its own system). Several manifests (a split's female and male trial lists) are
transcribed as one list, as VPC transcribes a split's combined trial dir: its utterances in
id order, then, for a recogniser with a `batch_size` above 1 (a SpeechBrain folder: VPC's
`eval_batchsize` of 8), sorted by length, longest first (ties in id order), and cut into
batches of that size, each zero-padded to its longest utterance, as VPC's ASR evaluation
batches them: the padding changes what a wav2vec2 recogniser hears, so the batches decide the
transcripts. Output: `text`, Kaldi-style `<utt> <raw transcript>` lines in id order, the
recogniser's spaces kept (VPC's WER splits on single spaces). An interrupted run resumes:
finished batches are appended to `partial.text` and are not recognised again.
"""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from tqdm import tqdm

from pipeline.core.cache import Cache
from pipeline.core.config import MODEL_PLUGIN, instantiate, plugin_with, without
from pipeline.core.errors import VpevalError, input_error
from pipeline.core.fileio import write_lines
from pipeline.data.audio import audio_info, read_audio
from pipeline.data.kaldi import read_text
from pipeline.data.manifest import Utterance, file_digest, read_manifest

SAMPLE_RATE = 16000
TEXT = "text"
PARTIAL = "partial.text"
LABEL_KEYS = ("name", "device")  # change nothing in the transcripts


def run(asr: DictConfig, manifests: Path | list[Path], cache: Cache) -> Path:
    """Transcripts of the utterances of `manifests` (one or several, transcribed as one list)
    by the recogniser `asr`; returns the folder."""
    manifests = as_list(manifests)
    settings = without(asr, "name")
    model = plugin_with(asr, "asr", "fingerprint_of", MODEL_PLUGIN).fingerprint_of(settings)

    def build(out: Path) -> dict:
        recognizer = instantiate(settings)
        utts = combined(manifests)
        done = read_text(out / PARTIAL)
        batches = [b for b in batched(utts, getattr(recognizer, "batch_size", 1)) if not all(u.id in done for u in b)]
        with open(out / PARTIAL, "a", encoding="utf-8") as partial, \
                tqdm(total=sum(map(len, batches)), desc=f"transcribe ({asr.name})", leave=False) as progress:
            for batch in batches:
                texts = recognizer.transcribe([read_audio(u.path, SAMPLE_RATE) for u in batch])
                for utt, text in zip(batch, texts):
                    done[utt.id] = " ".join(text.splitlines())  # one line each; spaces as the recogniser gave them
                    partial.write(f"{utt.id} {done[utt.id]}\n")
                partial.flush()
                progress.update(len(batch))
        write_lines(out / TEXT, (f"{u.id} {done[u.id]}" for u in utts))
        (out / PARTIAL).unlink()
        return {"utterances": len(utts)}

    inputs = {"manifests": [file_digest(m) for m in manifests], "model": model}
    return cache.build("transcribe", {"asr": without(asr, *LABEL_KEYS)}, inputs, build, code=__name__)


def as_list(manifests: Path | list[Path]) -> list[Path]:
    """One manifest or several, as a list."""
    return [manifests] if isinstance(manifests, (str, Path)) else list(manifests)


def combined(manifests: list[Path]) -> list[Utterance]:
    """The utterances of every manifest, each once, in id order (VPC's combined Kaldi dir); one
    line for an id that two manifests give different audio."""
    found: dict[str, Utterance] = {}
    for manifest in manifests:
        for utt in read_manifest(manifest):
            if utt.id in found and found[utt.id].path != utt.path:
                raise VpevalError(f"{manifest}: utterance {utt.id} is {utt.path} here and {found[utt.id].path} in "
                                  "another list transcribed with it")
            found.setdefault(utt.id, utt)
    return [found[key] for key in sorted(found)]


def batched(utts: list[Utterance], size: int, length=None) -> list[list[Utterance]]:
    """Batches of `size` as VPC's ASR evaluation forms them: longest first (`length`, by default
    its samples at 16 kHz; ties keep the given order), one utterance each for size 1 (in the
    given order).

    >>> [[u.id for u in b] for b in batched([Utterance("a", "s", "f", "a.wav", 1.0), Utterance("b", "s", "f", "b.wav", 2.0),
    ...  Utterance("c", "s", "f", "c.wav", 1.0)], 2, length=lambda u: u.duration)]
    [['b', 'a'], ['c']]
    """
    if size <= 1:
        return [[u] for u in utts]
    ordered = sorted(utts, key=length or samples, reverse=True)
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]


def samples(utt: Utterance) -> int:
    """The utterance's length in samples at 16 kHz, from its audio header."""
    rate, frames, _ = audio_info(utt.path)
    return frames if rate == SAMPLE_RATE else round(frames * SAMPLE_RATE / rate)


def load(folder: Path, manifests: Path | list[Path]) -> dict[str, str]:
    """The transcripts of a transcribe-stage folder, checked against the utterances of `manifests`."""
    path = Path(folder) / TEXT
    found = read_text(path)
    for manifest in as_list(manifests):
        missing = [u.id for u in read_manifest(manifest) if u.id not in found]
        if missing:
            raise input_error(path, f"no transcript for {len(missing)} utterance(s) of {manifest}, first {missing[0]}")
    return found

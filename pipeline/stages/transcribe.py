"""Stage 6e — transcribe: a recogniser's transcript of every utterance of a manifest.

Transcripts are cached per (recogniser, audio): the folder is keyed by the recogniser's
config (conf/asr), its `fingerprint_of` (package version, model folder contents, read without
loading the model: a cached list never loads it) and the
manifest's content, which names the audio files (an anonymised manifest names the audio
folder of its own system). Output: `text`, Kaldi-style `<utt> <raw transcript>` lines in
manifest order. An interrupted run resumes: finished utterances are appended to
`partial.text` as they come and are not recognised again.
"""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from tqdm import tqdm

from pipeline.core.cache import Cache
from pipeline.core.config import MODEL_PLUGIN, instantiate, plugin_with, without
from pipeline.core.errors import input_error
from pipeline.core.fileio import write_lines
from pipeline.data.audio import read_audio
from pipeline.data.kaldi import read_text
from pipeline.data.manifest import file_digest, read_manifest

SAMPLE_RATE = 16000
TEXT = "text"
PARTIAL = "partial.text"
LABEL_KEYS = ("name", "device")  # change nothing in the transcripts


def run(asr: DictConfig, manifest: Path, cache: Cache) -> Path:
    """Transcripts of the utterances of `manifest` by the recogniser `asr`; returns the folder."""
    settings = without(asr, "name")
    model = plugin_with(asr, "asr", "fingerprint_of", MODEL_PLUGIN).fingerprint_of(settings)

    def build(out: Path) -> dict:
        recognizer = instantiate(settings)
        utts = read_manifest(manifest)
        done = read_text(out / PARTIAL)
        with open(out / PARTIAL, "a", encoding="utf-8") as partial:
            for utt in tqdm([u for u in utts if u.id not in done], desc=f"transcribe ({asr.name})", leave=False):
                text = " ".join(recognizer.transcribe([read_audio(utt.path, SAMPLE_RATE)])[0].split())
                partial.write(f"{utt.id} {text}\n")
                partial.flush()
                done[utt.id] = text
        write_lines(out / TEXT, (f"{u.id} {done[u.id]}" for u in utts))
        (out / PARTIAL).unlink()
        return {"utterances": len(utts)}

    inputs = {"manifest": file_digest(manifest), "model": model}
    return cache.build("transcribe", {"asr": without(asr, *LABEL_KEYS)}, inputs, build, code=__name__)


def load(folder: Path, manifest: Path) -> dict[str, str]:
    """The transcripts of a transcribe-stage folder, checked against the utterances of `manifest`."""
    path = Path(folder) / TEXT
    found = read_text(path)
    missing = [u.id for u in read_manifest(manifest) if u.id not in found]
    if missing:
        raise input_error(path, f"no transcript for {len(missing)} utterance(s) of {manifest}, first {missing[0]}")
    return found

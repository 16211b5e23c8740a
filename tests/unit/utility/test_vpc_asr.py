"""VPC's WER to the toolkit's own numbers: VPC 2024's and VPC 2026 Track 1's (`evaluate_asr`,
SpeechBrain backend) and, at the end, VPC 2026 Track 2's (Whisper backend). SpeechBrain: a split's trial utterances transcribed as one list, in batches of 8 sorted by
length and zero-padded as VPC's `ASRDataset` and `collate_fn` form them, and the hypotheses split
on single spaces as its `compute_wer` splits them (`asr.batch_size=8`,
`utility.wer_text=vpc_speechbrain`).

`tests/fixtures/vpc_asr` holds a random-weight wav2vec2 CTC folder (its CTC layer biased towards
the blank and the space, so that its output has words and double spaces), a combined trial dir
of two speakers, original and anonymised, and what VPC 2026's own `evaluate_asr` computed on
them (`expected.json`; how it was made: tests/fixtures/vpc_asr/README.md)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.app.utility import word_error_rates
from pipeline.core.cache import Cache
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.data.audio import audio_info
from pipeline.data.manifest import Utterance, write_manifest
from pipeline.metrics.wer import hypothesis_words, word_errors
from pipeline.stages import transcribe
from tests.helpers import FIXTURES, fixture_copy, utility_experiment

pytest.importorskip("speechbrain")
pytest.importorskip("transformers")

FIXTURE = FIXTURES / "vpc_asr"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())["sets"]
SETS = {"original": "libri_dev_asr", "anonymized": "libri_dev_asr_anon"}


@pytest.fixture(scope="module")
def vpc(tmp_path_factory) -> Path:
    return fixture_copy(tmp_path_factory, "vpc_asr")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def asr(vpc: Path, *extra: str):
    return compose(["data=synthetic_tiny", "asr=speechbrain_ctc", f"asr.folder={vpc / 'exp' / 'asr'}",
                    f"+asr.overrides.wav2vec2_hub={vpc / 'exp' / 'asr' / 'wav2vec2_hub'}", *extra]).asr


def gender_lists(vpc: Path, name: str, out: Path) -> dict[str, Path]:
    """The dir's utterances as vpeval's female and male trial manifests (what a split gives)."""
    folder = vpc / "data" / name
    texts = dict(line.split(" ", 1) for line in (folder / "text").read_text().splitlines())
    speakers = dict(line.split() for line in (folder / "utt2spk").read_text().splitlines())
    genders = dict(line.split() for line in (folder / "spk2gender").read_text().splitlines())
    lists = {"f": [], "m": []}
    for utt, path in (line.split() for line in (folder / "wav.scp").read_text().splitlines()):
        rate, frames, _ = audio_info(vpc / path)
        gender = genders[speakers[utt]]
        lists[gender].append(Utterance(id=utt, speaker=speakers[utt], gender=gender, path=str(vpc / path),
                                       duration=frames / rate, text=texts[utt]))
    return {g: write_manifest(out / f"{name}_{g}.jsonl", utts) for g, utts in lists.items()}


def test_a_splits_lists_give_vpcs_hypotheses_and_wer(vpc, tmp_path):
    cache = Cache(tmp_path / "cache")
    for name in SETS.values():
        manifests = gender_lists(vpc, name, tmp_path)
        found = transcribe.load(transcribe.run(asr(vpc), list(manifests.values()), cache), list(manifests.values()))
        assert found == EXPECTED[name]["hypotheses"]  # every transcript, its spaces included
        texts = dict(line.split(" ", 1) for line in (vpc / "data" / name / "text").read_text().splitlines())
        counts = word_errors(list(texts.values()), [found[u] for u in texts], "vpc_speechbrain")
        errors, words = EXPECTED[name]["wer_line"].split("[ ")[1].split(",")[0].split(" / ")
        assert (counts.errors, counts.words) == (int(errors), int(words))  # SpeechBrain's ErrorRateStats
        assert round(100 * counts.wer, 3) == EXPECTED[name]["WER"]


def test_the_fixture_tells_batches_and_word_splitting_apart(vpc, tmp_path):
    """What vpeval did before: each utterance alone (batch_size 1, VPC's own model gives the same),
    and runs of spaces collapsed (rule `vpc`)."""
    name = SETS["original"]
    manifests = list(gender_lists(vpc, name, tmp_path).values())
    alone = transcribe.load(transcribe.run(asr(vpc, "asr.batch_size=1"), manifests, Cache(tmp_path / "a")), manifests)
    assert alone == EXPECTED[name]["alone"] and alone != EXPECTED[name]["hypotheses"]
    per_list = {}
    for manifest in manifests:  # each gender's list batched on its own: other batches, other transcripts
        per_list.update(transcribe.load(transcribe.run(asr(vpc), manifest, Cache(tmp_path / "b")), manifest))
    assert per_list != EXPECTED[name]["hypotheses"]
    texts = dict(line.split(" ", 1) for line in (vpc / "data" / name / "text").read_text().splitlines())
    hypotheses = [EXPECTED[name]["hypotheses"][u] for u in texts]
    assert any("  " in h for h in hypotheses)
    assert word_errors(list(texts.values()), hypotheses, "vpc").errors != \
        word_errors(list(texts.values()), hypotheses, "vpc_speechbrain").errors


def test_the_experiments_wer_step_pools_the_split_as_vpc(vpc, tmp_path):
    experiment = utility_experiment(["data=vpc2026", "utility.wer_text=vpc_speechbrain",
                                     "detect.bootstrap.n_resamples=50"], tmp_path / "cache")
    experiment.cfg.asr = asr(vpc)
    pairs = {kind: gender_lists(vpc, name, tmp_path) for kind, name in SETS.items()}
    lists = {f"dev_{g}": {kind: pairs[kind][g] for kind in SETS} for g in ("f", "m")}
    sets = {name: ("dev", f"dev_trials_{name[-1]}") for name in lists}
    result = {"sets": {name: {} for name in lists}, "splits": {}}
    word_error_rates(experiment, lists, sets, result)
    assert result["wer_text"] == "vpc_speechbrain"  # the report names it
    for kind, name in SETS.items():
        assert round(100 * result["splits"]["dev"][f"wer_{kind}"], 3) == EXPECTED[name]["WER"]


def test_lists_that_give_one_utterance_two_audio_files_are_one_line(vpc, tmp_path):
    manifests = gender_lists(vpc, SETS["original"], tmp_path)
    anonymised = gender_lists(vpc, SETS["anonymized"], tmp_path / "anon")
    with pytest.raises(VpevalError, match=r"anon/libri_dev_asr_anon_f.jsonl: utterance 2277-128104-0000 is .*"
                                          r"libri_dev_asr_anon/wav/2277-128104-0000.wav here and .*"
                                          r"libri_dev_asr/wav/2277-128104-0000.wav in another list transcribed with it$"):
        transcribe.combined([manifests["f"], anonymised["f"]])


# VPC 2026 Track 2: Whisper through transformers' pipeline (`backend: whisper`)

WHISPER = FIXTURES / "vpc_whisper"
WHISPER_FOUND = json.loads((WHISPER / "expected.json").read_text(encoding="utf-8"))
WHISPER_EXPECTED = WHISPER_FOUND["sets"]


@pytest.mark.parametrize("batch_size", [8, 1])
def test_whisper_gives_vpc_track2s_hypotheses_and_wer(tmp_path, batch_size):
    """`tests/fixtures/vpc_whisper`: a random-weight Whisper (weights scaled so that its text
    depends on the audio) and an English combined trial dir; VPC's `asr_eval_whisper` decoded the
    short utterances in batches of 8 in wav.scp order from the file paths (ffmpeg), vpeval in
    batches sorted by length (8, the recipe's) or one at a time, from soundfile's samples."""
    cfg = compose(["data=synthetic_tiny", "asr=whisper_vpc2026", f"asr.folder={WHISPER / 'whisper'}",
                   "asr.language=english", f"asr.batch_size={batch_size}"]).asr
    cache = Cache(tmp_path / "cache")
    for name, expected in WHISPER_EXPECTED.items():
        manifests = gender_lists(WHISPER, name, tmp_path)
        found = transcribe.load(transcribe.run(cfg, list(manifests.values()), cache), list(manifests.values()))
        assert found == expected["hypotheses"]
        assert len(set(found.values())) > 3  # the text follows the audio
        texts = dict(line.split(" ", 1) for line in (WHISPER / "data" / name / "text").read_text().splitlines())
        counts = word_errors(list(texts.values()), [found[u] for u in texts], "vpc2026_whisper")
        errors, words = expected["wer_line"].split("[ ")[1].split(",")[0].split(" / ")
        assert (counts.errors, counts.words) == (int(errors), int(words))
        assert round(100 * counts.wer, 3) == expected["WER"]


@pytest.mark.parametrize("text", list(WHISPER_FOUND["words"]))
def test_whisper_text_rule_makes_vpcs_words(text):
    """VPC's `plain_text_key` (its `_normalize_transcript`), run on texts with its punctuation,
    curly quotes it keeps, accents and digits."""
    assert hypothesis_words(text, "vpc2026_whisper") == WHISPER_FOUND["words"][text]

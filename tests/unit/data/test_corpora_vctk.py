"""VCTK 0.92: the reader's quirks, speaker sets, 48 -> 16 kHz conversion, common vs diverse trials."""
import os

import pytest
import soundfile as sf

from pipeline.core.cache import DONE, Cache, summary_of
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import Data, typed
from pipeline.data.manifest import read_manifest, read_trials
from pipeline.data.vctk import VCTK, VctkProtocol, sentence_number
from pipeline.stages import prepare, validate
from pipeline.stages.prepare import manifest_path, trials_path
from tests.helpers import vctk_tree

SPEAKERS = {"p225": "F", "p226": "M", "p227": "M", "p228": "F", "p229": "F", "p230": "F", "p231": "F",
            "p232": "M", "p243": "M", "p245": "M", "p280": "F", "p315": "M", "p362": "F"}
UNRECORDED = {"p362": (2, 7)}
COMMON = 4  # sentences 1-4 are "common" in these tiny trees (24 in VCTK)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return vctk_tree(tmp_path_factory.mktemp("vctk"), SPEAKERS, no_text=("p315",), no_mic2=("p280",),
                     unrecorded=UNRECORDED)


def vctk_cfg(root, *overrides):
    """The shipped conf/data/vctk.yaml, shrunk to the tiny tree."""
    return typed(compose([f"data.root={root}", "data.workers=2", "data.reader.speaker_sets.dev={f:2,m:2}",
                          "data.reader.speaker_sets.test={f:2,m:2}", "data.protocol.enroll_utterances=2",
                          f"data.protocol.common_sentences={COMMON}", *overrides], config_name="data/vctk").data,
                 Data, "data")


@pytest.fixture(scope="module")
def prepared(corpus, tmp_path_factory):
    return prepare.run(vctk_cfg(corpus), Cache(tmp_path_factory.mktemp("cache")))


def test_reader_handles_the_known_gaps(corpus):
    mic2 = VCTK(corpus, mic="mic2")
    assert "p280" not in mic2.recordings and "p280" in VCTK(corpus, mic="mic1").recordings
    entries = {e.id: e for e in mic2.entries("train")}
    assert all(e.text == "" for e in entries.values() if e.speaker == "p315")
    assert all(e.text.startswith("Sentence") for e in entries.values() if e.speaker != "p315")
    assert sorted(mic2.recordings["p362"]) == ["001", "003", "004", "005", "006", "008", "009"]
    assert {e.gender for e in entries.values()} == {"f", "m"}
    assert entries["p225_001"].path.endswith("wav48_silence_trimmed/p225/p225_001_mic2.flac")


def test_speaker_sets_are_drawn_per_gender_disjoint_and_seeded(corpus):
    sets = {"dev": {"f": 2, "m": 2}, "test": {"f": 2, "m": 2}}
    a, b = VCTK(corpus, speaker_sets=sets).subsets, VCTK(corpus, speaker_sets=sets).subsets
    c = VCTK(corpus, speaker_sets=sets, seed=5).subsets
    assert a == b and a != c
    assert [len(a[s]) for s in ("dev", "test", "train")] == [4, 4, 4]
    assert set(a["dev"]).isdisjoint(a["test"]) and set(a["train"]).isdisjoint(a["dev"] + a["test"])
    assert sorted(SPEAKERS[s] for s in a["dev"]) == ["F", "F", "M", "M"]
    listed = VCTK(corpus, speaker_sets={"dev": ["p225", "p226"], "test": {"f": 1, "m": 1}}).subsets
    assert listed["dev"] == ["p225", "p226"] and not {"p225", "p226"} & set(listed["test"] + listed["train"])


@pytest.mark.parametrize("sets, message", [
    ({"dev": ["p280", "p226"]}, r"speaker p280 has no mic2 recordings"),
    ({"dev": ["p999"]}, r"speaker p999 is not in speaker-info.txt"),
    ({"dev": ["p225"], "test": ["p225"]}, r"speaker p225 is in two sets"),
    ({"dev": {"f": 9}}, r"9 'f' speakers wanted, 6 left"),
    ({"dev": {"F": 1}}, r"keys must be 'f' and 'm'"),
    ({"train": ["p225"]}, r"'train' is every speaker outside the sets"),
])
def test_bad_speaker_sets_are_named(corpus, sets, message):
    with pytest.raises(VpevalError, match=message):
        VCTK(corpus, speaker_sets=sets).subsets


def test_bad_layouts_are_named(corpus, tmp_path):
    with pytest.raises(VpevalError, match="mic must be one of"):
        VCTK(corpus, mic="mic3")
    with pytest.raises(VpevalError, match="VCTK audio folder not found"):
        VCTK(tmp_path)
    (tmp_path / "wav48_silence_trimmed" / "p900").mkdir(parents=True)
    (tmp_path / "wav48_silence_trimmed" / "p900" / "p900_001_mic2.flac").write_bytes(b"")
    with pytest.raises(VpevalError, match="speaker-info.txt: not found"):
        VCTK(tmp_path).recordings
    (tmp_path / "speaker-info.txt").write_text("ID  AGE  GENDER\np225  23  X\n")
    with pytest.raises(VpevalError, match=r"speaker-info.txt:2: expected 'ID AGE GENDER"):
        VCTK(tmp_path).recordings
    (tmp_path / "speaker-info.txt").write_text("ID  AGE  GENDER\np225  23  F\n")
    with pytest.raises(VpevalError, match=r"speaker p900 .* is not listed"):
        VCTK(tmp_path).recordings


def test_prepare_converts_to_16k_and_writes_diverse_and_common_sets(prepared):
    summary = summary_of(prepared)
    assert summary["eval_sets"] == ["dev", "dev_common", "test", "test_common"]
    train = read_manifest(manifest_path(prepared, "train"))
    everything = train + [u for s in summary["eval_sets"] for k in ("enrolls", "trials_f", "trials_m")
                          for u in read_manifest(manifest_path(prepared, f"{s}_{k}"))]
    assert {u.speaker for u in train}.isdisjoint({u.speaker for u in everything if u not in train})
    assert "p280" not in {u.speaker for u in everything}
    for utt in everything:
        info = sf.info(utt.path)
        assert (info.samplerate, info.channels, utt.sample_rate) == (16000, 1, 16000)
        assert utt.path.startswith(str(prepared / "audio")) and utt.duration == pytest.approx(0.3, abs=1e-3)
    assert summary["converted"] == len({u.id for u in everything})
    for split in ("dev", "test"):
        enrolls = read_manifest(manifest_path(prepared, f"{split}_enrolls"))
        assert enrolls == read_manifest(manifest_path(prepared, f"{split}_common_enrolls"))
        assert len(enrolls) == 2 * 4 and all(sentence_number(u) > COMMON for u in enrolls)
        for g in ("f", "m"):
            diverse = read_manifest(manifest_path(prepared, f"{split}_trials_{g}"))
            common = read_manifest(manifest_path(prepared, f"{split}_common_trials_{g}"))
            assert all(sentence_number(u) > COMMON for u in diverse)
            assert all(sentence_number(u) <= COMMON for u in common)
            assert {u.speaker for u in common} == {u.speaker for u in enrolls if u.gender == g}
            for name, utts in ((f"{split}_trials_{g}", diverse), (f"{split}_common_trials_{g}", common)):
                trials = read_trials(trials_path(prepared, name))
                assert len(trials) == 2 * len(utts) and sum(t.target for t in trials) == len(utts)
    kaldi = sorted(p.name for p in (prepared / "kaldi").iterdir())
    assert kaldi == sorted(f"vctk_{s}_{k}" for s in ("dev", "test") for k in
                           ("enrolls", "trials_f", "trials_m", "trials_f_common", "trials_m_common"))
    result = validate.check(prepared, ("dev", "test", "dev_common", "test_common"), workers=2)
    assert result.problems == [] and "converted" in result.render()


def test_common_set_counts_follow_the_gaps(prepared):
    """Every dev/test speaker has the 4 common sentences, except p362 (sentence 2 unrecorded)."""
    summary = summary_of(prepared)
    for split in ("dev", "test"):
        speakers = {u.speaker for u in read_manifest(manifest_path(prepared, f"{split}_enrolls"))}
        common = sum(summary[f"{split}_common"][g]["trial_utterances"] for g in ("f", "m"))
        assert common == 4 * len(speakers) - ("p362" in speakers)


def test_protocol_is_deterministic(prepared):
    utts = read_manifest(manifest_path(prepared, "train"))
    build = lambda seed: VctkProtocol(seed, 2, COMMON).build(  # noqa: E731
        utts, reader=None, subset="train", name="train", problems=None)
    assert build(0) == build(0) and build(0)[""].enrolls != build(3)[""].enrolls


def test_conversion_resumes_keeping_finished_copies(corpus, tmp_path):
    cache = Cache(tmp_path)
    out = prepare.run(vctk_cfg(corpus), cache)
    copies = sorted((out / "audio").rglob("*.flac"))
    kept, lost = copies[0], copies[1]
    stamp = kept.stat().st_mtime_ns
    (out / DONE).unlink()
    lost.unlink()
    assert prepare.run(vctk_cfg(corpus), cache) == out
    assert lost.is_file() and kept.stat().st_mtime_ns == stamp
    assert os.path.getsize(lost) > 0 and sf.info(lost).samplerate == 16000

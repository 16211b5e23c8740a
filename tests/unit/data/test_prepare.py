"""prepare + validate on a tiny LibriSpeech tree written by the test."""
import pytest

from pipeline.core.cache import Cache, is_complete
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import Data, typed
from pipeline.data.librispeech import LibriSpeech, read_speakers
from pipeline.data.manifest import file_digest, read_manifest, read_trials
from pipeline.stages import prepare, validate
from pipeline.stages.prepare import manifest_path, trials_path
from tests.helpers import librispeech_tree

SPEAKERS = {
    "train-clean-360": {"11": "F", "12": "F", "13": "M", "14": "M"},
    "dev-clean": {"21": "F", "22": "F", "23": "M", "24": "M"},
    "test-clean": {"31": "F", "32": "F", "33": "M", "34": "M"},
}


def data_cfg(root):
    """Corpus settings written out in code (not conf/data/librispeech.yaml), every key given."""
    return typed({
        "name": "librispeech", "tag": "libri", "root": str(root), "sample_rate": 16000, "generate": None,
        "convert_audio": True, "skip_bad": False, "workers": None, "eval_trials": "same_gender", "mixed_seed": 0,
        "reader": {"_target_": "pipeline.data.librispeech.LibriSpeech"},
        "subsets": {"train": ["train-clean-360"], "dev": "dev-clean", "test": "test-clean"},
        "protocol": {"_target_": "pipeline.data.protocol.GeneratedProtocol", "seed": 0, "enroll_fraction": 0.5,
                     "enroll_utterances": 2},
    }, Data, "data")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return librispeech_tree(tmp_path_factory.mktemp("libri"), SPEAKERS)


def test_reader(corpus):
    utts = LibriSpeech(corpus).utterances("dev-clean")
    assert len(utts) == 16 and {u.gender for u in utts} == {"f", "m"}
    assert utts[0].text.startswith("WORDS OF") and utts[0].duration == pytest.approx(0.5)
    assert read_speakers(corpus / "SPEAKERS.TXT")["13"] == "m"


def test_prepare_writes_manifests_trials_and_kaldi_dirs(corpus, tmp_path):
    out = prepare.run(data_cfg(corpus), Cache(tmp_path))
    assert is_complete(out)
    assert len(read_manifest(manifest_path(out, "train"))) == 16
    enrolls = read_manifest(manifest_path(out, "test_enrolls"))
    assert len({u.speaker for u in enrolls}) == 2 and len(enrolls) == 4
    trials = read_trials(trials_path(out, "test_trials_f"))
    assert len(trials) == 1 * (8 - 2) and sum(t.target for t in trials) == 2
    kaldi = out / "kaldi" / "libri_test_trials_f"
    assert sorted(p.name for p in kaldi.iterdir()) == ["spk2gender", "spk2utt", "text", "trials", "utt2spk", "wav.scp"]
    assert (out / "kaldi" / "libri_dev_enrolls" / "enrolls").read_text().count("\n") == 4
    assert validate.run(out, Cache(tmp_path)).counts


def test_prepare_is_reused(corpus, tmp_path):
    cache = Cache(tmp_path)
    assert prepare.run(data_cfg(corpus), cache) == prepare.run(data_cfg(corpus), cache)
    assert [e.reused for e in cache.events] == [False, True]


def test_missing_corpus_folder(tmp_path):
    with pytest.raises(VpevalError, match="corpus folder not found"):
        prepare.run(data_cfg(tmp_path / "nowhere"), Cache(tmp_path))


def test_missing_audio_names_transcript_line(tmp_path):
    root = librispeech_tree(tmp_path / "c", SPEAKERS)
    (root / "dev-clean/22/100/22-100-0002.flac").unlink()
    with pytest.raises(VpevalError, match=r"22-100.trans.txt:3: audio file 22-100-0002.flac is missing"):
        prepare.run(data_cfg(root), Cache(tmp_path / "cache"))


def test_evaluation_speaker_in_training_data(tmp_path):
    speakers = {**SPEAKERS, "dev-clean": {"11": "F", "22": "F", "23": "M", "24": "M"}}
    speakers["train-clean-360"] = {"11": "F", "12": "F", "13": "M", "14": "M"}
    root = tmp_path / "c"
    librispeech_tree(root, {"train-clean-360": speakers["train-clean-360"]})
    librispeech_tree(root / "x", {"dev-clean": speakers["dev-clean"], "test-clean": SPEAKERS["test-clean"]})
    for sub in ("dev-clean", "test-clean"):
        (root / "x" / sub).rename(root / sub)
    rows = (root / "SPEAKERS.TXT").read_text() + (root / "x" / "SPEAKERS.TXT").read_text()
    (root / "SPEAKERS.TXT").write_text(rows)
    with pytest.raises(VpevalError, match=r"speakers \['11'\] are also in the attacker's training data"):
        prepare.run(data_cfg(root), Cache(tmp_path / "cache"))


def test_validation_reports_unknown_trial_utterance(corpus, tmp_path):
    out = prepare.run(data_cfg(corpus), Cache(tmp_path))
    trials = trials_path(out, "dev_trials_m")
    trials.write_text(trials.read_text() + "23 99-100-0000 nontarget\n")
    result = validate.check(out)
    assert any("trial utterance 99-100-0000 is not in dev_trials_m" in p for p in result.problems)
    with pytest.raises(VpevalError, match="validation problem"):
        validate.run(out, Cache(tmp_path / "other"))


def test_audio_replaced_in_the_corpus_changes_the_manifest_that_lists_it(tmp_path):
    """Regression: the corpus fingerprint made a new prepare folder, but its manifests were byte
    for byte the old ones, so every later stage (keyed by a manifest's digest) served the old
    speaker's results, exit 0. Each utterance now carries its file's stamp."""
    root = librispeech_tree(tmp_path / "c", SPEAKERS)
    cache = Cache(tmp_path / "cache")
    first = prepare.run(data_cfg(root), cache)
    names = ("train", "test_trials_m", "test_enrolls")
    before = {name: file_digest(manifest_path(first, name)) for name in names}
    target, source = root / "test-clean/34/100/34-100-0003.flac", root / "test-clean/33/100/33-100-0003.flac"
    data = source.read_bytes()
    target.unlink()
    target.write_bytes(data)
    again = prepare.run(data_cfg(root), cache)
    assert again != first
    assert [u.source_stamp for u in read_manifest(manifest_path(again, "test_trials_m")) if u.id == "34-100-0003"] == \
        [f"{target.stat().st_size}:{target.stat().st_mtime_ns}"]
    after = {name: file_digest(manifest_path(again, name)) for name in names}
    assert after["test_trials_m"] != before["test_trials_m"]
    assert after["train"] == before["train"] and after["test_enrolls"] == before["test_enrolls"]


def test_a_real_corpus_folder_given_to_the_built_in_corpus_is_refused_untouched(corpus, tmp_path):
    """Regression: `vpeval data.root=/corpora/LibriSpeech` (data= forgotten) generated the built-in
    corpus inside the LibriSpeech folder and reported on it, exit 0."""
    before = sorted(p.name for p in corpus.iterdir())
    data = typed(compose([f"data.root={corpus}"]).data, Data, "data")
    with pytest.raises(VpevalError, match=rf"^data.root={corpus}: the built-in corpus \(data=synthetic\) is generated "
                                          r"there, but the folder holds other files \(SPEAKERS.TXT, dev-clean, "
                                          r"test-clean, \.\.\.\); to read a corpus there name its reader \(data="):
        prepare.run(data, Cache(tmp_path))
    assert sorted(p.name for p in corpus.iterdir()) == before

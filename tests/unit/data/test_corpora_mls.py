"""Multilingual LibriSpeech: the reader on an MLS-layout tree written by the test, flac and opus,
its config (one language per run) and preparation with VPC 2026's mixed-gender trials."""
from pathlib import Path

import pytest

from pipeline.core.cache import Cache, summary_of
from pipeline.core.errors import VpevalError
from pipeline.data.manifest import read_manifest, read_trials
from pipeline.data.mls import MultilingualLibriSpeech, read_metainfo
from pipeline.stages import prepare, validate
from pipeline.stages.prepare import manifest_path, trials_path
from tests.helpers import MLS_SPEAKERS, mls_tree, vpc_cfg


@pytest.mark.parametrize("audio_ext", ["flac", "opus"])
def test_reader_lists_the_layout(tmp_path, audio_ext):
    root = mls_tree(tmp_path / "mls", "french", audio_ext=audio_ext)
    entries = MultilingualLibriSpeech(root, "french", audio_ext=audio_ext).entries("dev")
    assert len(entries) == 6 * 3 and [e.problem for e in entries] == [""] * 18
    first = entries[0]
    assert (first.id, first.speaker, first.gender) == ("201_7000_000000", "201", "f")
    assert first.text == "wörter von 201 nummer 0"
    assert first.path == str((root / "mls_french/dev/audio/201/7000" / f"201_7000_000000.{audio_ext}").resolve())
    assert all(Path(e.path).is_file() for e in entries)
    assert {e.speaker: e.gender for e in entries}["205"] == "m"


def test_metainfo_lists_a_speaker_once_per_book(tmp_path):
    root = mls_tree(tmp_path / "mls")
    genders = read_metainfo(root / "mls_german" / "metainfo.txt")
    assert genders == {s: g.lower() for split in MLS_SPEAKERS.values() for s, g in split.items()}
    with (root / "mls_german" / "metainfo.txt").open("a") as f:
        f.write("  201    |     M      |   dev   |   1.000   |   7002   | A Book | Ch 1 \n")
    with pytest.raises(VpevalError, match=r"metainfo.txt:\d+: speaker 201 is listed as m here and as f at line"):
        read_metainfo(root / "mls_german" / "metainfo.txt")


def test_config_picks_the_language(tmp_path):
    cfg = vpc_cfg(tmp_path, "data.language=spanish", config="mls")
    assert cfg.reader["language"] == "spanish" and cfg.tag == "mls_spanish" and cfg.eval_trials == "mixed"


def test_prepare_with_mixed_trials(tmp_path):
    root = mls_tree(tmp_path / "mls", "german")
    out = prepare.run(vpc_cfg(root, "data.language=german", "data.protocol.enroll_utterances=1",
                              config="mls", workers=1), Cache(tmp_path / "cache"))
    assert summary_of(out)["eval_sets"] == ["dev", "test"]
    assert len(read_manifest(manifest_path(out, "train"))) == 4 * 3
    mixed = read_trials(trials_path(out, "test_trials_mixed"))
    tried = {u.id: u for u in read_manifest(manifest_path(out, "test_trials_mixed"))}
    enrolled = {u.speaker: u.gender for u in read_manifest(manifest_path(out, "test_enrolls"))}
    assert {g for g in enrolled.values()} == {"f", "m"}
    cross = [t for t in mixed if enrolled[t.enroll] != tried[t.test].gender]
    assert cross and not any(t.target for t in cross)
    assert sum(t.target for t in mixed) == sum(1 for u in tried.values() if u.speaker in enrolled)
    assert (out / "kaldi" / "mls_german_test_trials_mixed" / "wav.scp").is_file()
    assert validate.check(out, ("dev", "test"), workers=1).problems == []


def test_missing_language_folder_names_the_key(tmp_path):
    root = mls_tree(tmp_path / "mls", "german")
    with pytest.raises(VpevalError, match=r"mls_french: MLS language folder not found .*data.language=french"):
        MultilingualLibriSpeech(root, "french")


def test_vpc_track2_config_names_its_dirs(tmp_path):
    cfg = vpc_cfg(tmp_path, "data.language=german", "data.tag=de", config="vpc_mls")
    assert cfg.subsets == {"train": ["train_german"], "dev": "de_dev", "test": "de_test"}
    assert cfg.protocol["trials"] is None and cfg.protocol["mixed_trials"] == "{subset}_trials_mixed"
    assert cfg.eval_trials == "mixed"

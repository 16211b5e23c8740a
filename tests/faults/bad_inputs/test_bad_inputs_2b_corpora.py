"""Bad inputs: the files of a corpus tree (issue 38: macOS metadata, non-UTF-8 text, symlink
loops, FIFOs, MLS transcripts, one problem met in every subset)."""
from __future__ import annotations

import logging
import os

import pytest

from pipeline.core.cache import Cache
from pipeline.data.corpus import PreparationProblems
from pipeline.data.librispeech import LibriSpeech
from pipeline.stages import prepare
from tests.faults.bad_inputs.catalogue import append_line, cli_message, raised, record, vpeval
from tests.helpers import librispeech_tree, mls_tree, vpc_cfg

SPEAKERS = {"train-clean-360": {"11": "F", "12": "F", "13": "M", "14": "M"},
            "dev-clean": {"21": "F", "22": "F", "23": "M", "24": "M"},
            "test-clean": {"31": "F", "32": "F", "33": "M", "34": "M"}}


@pytest.fixture
def corpus(tmp_path):
    return librispeech_tree(tmp_path / "LibriSpeech", SPEAKERS, utterances=2, seconds=0.1)


def test_macos_metadata_files_are_skipped_and_counted(corpus, tmp_path, caplog):
    """Regression (issue 38): `._*.trans.txt` (AppleDouble, binary) ended in a UnicodeDecodeError."""
    chapter = corpus / "dev-clean" / "21" / "100"
    (chapter / "._21-100.trans.txt").write_bytes(b"\x00\x05\x16\x07\x00\x02Mac OS X\xff\xfe")
    (chapter / "._21-100-0000.flac").write_bytes(b"\x00\x05\x16\x07\xff")
    (corpus / "dev-clean" / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1\xff")
    assert len(LibriSpeech(corpus).entries("dev-clean")) == 8
    with caplog.at_level(logging.INFO, logger="pipeline.stages.prepare"):
        prepare.fingerprint(corpus)
    (line,) = [r.getMessage() for r in caplog.records if "macOS" in r.getMessage()]
    record("macos-metadata", "macOS `._*.trans.txt`, `._*.flac` and `.DS_Store` files in a corpus (skipped)",
           "prepare (one INFO line; preparation goes on)", line, tmp_path, "skipped 3 macOS metadata file(s)")


def test_transcript_not_utf8(corpus, tmp_path):
    """Regression (issue 38): a Latin-1 byte in a transcript ended in a UnicodeDecodeError traceback."""
    trans = corpus / "dev-clean" / "21" / "100" / "21-100.trans.txt"
    trans.write_bytes(trans.read_bytes().replace(b"WORDS OF 21 NUMBER 1", b"CAF\xc9 OF 21"))
    record("transcript-not-utf8", "a transcript with a non-UTF-8 byte (Latin-1 `É`)", "prepare (LibriSpeech reader)",
           raised(LibriSpeech(corpus).entries, "dev-clean"), tmp_path, "21-100.trans.txt:2", "not UTF-8", "0xc9")


def test_speakers_txt_not_utf8(corpus, tmp_path):
    """Regression (issue 38): a reader's name in Latin-1 ended in a UnicodeDecodeError traceback."""
    speakers = corpus / "SPEAKERS.TXT"
    speakers.write_bytes(speakers.read_bytes().replace(b"Reader 12", b"Ren\xe9"))
    record("speakers-not-utf8", "SPEAKERS.TXT with a non-UTF-8 byte in a reader's name", "prepare (LibriSpeech reader)",
           raised(LibriSpeech(corpus).entries, "dev-clean"), tmp_path, "SPEAKERS.TXT:3", "not UTF-8", "0xe9")


def test_symlink_loop(corpus, tmp_path):
    """Regression (issue 38): ELOOP in prepare.fingerprint ended in an OSError traceback."""
    os.symlink("loop.flac", corpus / "dev-clean" / "loop.flac")
    record("symlink-loop", "a symlink loop inside the corpus", "prepare (its first look at the tree)",
           raised(prepare.fingerprint, corpus), tmp_path, "loop.flac", "symlink loop")


def test_fifo_named_like_a_transcript(corpus, tmp_path):
    """Regression (issue 38): reading a FIFO named `*.trans.txt` waited forever."""
    os.mkfifo(corpus / "dev-clean" / "21" / "100" / "21-101.trans.txt")
    record("fifo-transcript", "a FIFO named `*.trans.txt` in the corpus", "prepare (its first look at the tree, "
           "before any file is opened)", raised(prepare.fingerprint, corpus), tmp_path, "21-101.trans.txt", "a FIFO")


def test_speakers_txt_conflict_is_one_problem(corpus, tmp_path):
    """Regression (issue 38): a SPEAKERS.TXT conflict, met by the reader of every subset, was listed 3
    times (a full run counted "4 bad inputs") and followed by "0 'f' speakers" of a split it had emptied."""
    append_line(corpus / "SPEAKERS.TXT", "12 | M | train-clean-360 | 1.00 | Reader 12")
    cfg = vpc_cfg(corpus, config="librispeech", workers=1)
    with pytest.raises(PreparationProblems) as stopped:
        prepare.run(cfg, Cache(tmp_path / "cache"))
    assert stopped.value.problems == [str(stopped.value)]
    record("speakers-conflict-once", "SPEAKERS.TXT listing a speaker as F and M, through the whole preparation",
           "prepare (one problem, once)", str(stopped.value), tmp_path, "SPEAKERS.TXT:14", "speaker 12")


def test_mls_transcript_space_instead_of_tab(tmp_path):
    """Regression (issue 38): reported as a missing audio file named `<id> <text>.flac`."""
    root = mls_tree(tmp_path / "mls", "german", utterances=2, seconds=0.1)
    transcripts = root / "mls_german" / "dev" / "transcripts.txt"
    lines = transcripts.read_text().splitlines()
    transcripts.write_text("\n".join([lines[0].replace("\t", " ", 1), *lines[1:]]) + "\n")
    cfg = vpc_cfg(root, "data.language=german", config="mls", workers=1)
    record("mls-space-not-tab", "an MLS transcript line with a space instead of the TAB after the id",
           "prepare (MLS reader, before any audio is read)", raised(prepare.run, cfg, Cache(tmp_path / "cache")),
           tmp_path, "transcripts.txt:1", "no TAB")


def test_a_real_corpus_given_without_its_reader(corpus, tmp_path):
    """Regression: `vpeval data.root=<LibriSpeech>` without data=librispeech generated the built-in
    corpus inside the user's folder and reported on it, exit 0."""
    message = cli_message(vpeval("validate", f"data.root={corpus}", tmp=tmp_path))
    assert sorted(p.name for p in corpus.iterdir()) == ["SPEAKERS.TXT", "dev-clean", "test-clean", "train-clean-360"]
    record("synthetic-root-holds-a-corpus", "`vpeval data.root=<a LibriSpeech folder>` (data=librispeech forgotten: "
           "the built-in corpus would be generated there)", "prepare (exit 2, before anything is written)", message,
           tmp_path, "data.root=", "the built-in corpus (data=synthetic) is generated there", "data=librispeech")

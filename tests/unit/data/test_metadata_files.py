"""Corpus metadata and lists: a leading byte-order mark is dropped wherever a text file is read,
and a key listed twice with two values (a speaker's sex, an utterance's speaker or text) is an
error naming both lines, while a repeat with the same value is accepted."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.core.errors import VpevalError
from pipeline.data.kaldi import read_text
from pipeline.data.librispeech import LibriSpeech, read_speakers
from pipeline.data.manifest import read_manifest, read_trials, write_manifest
from pipeline.data.vctk import VCTK, read_speaker_info
from pipeline.data.vpc import GivenProtocol, VoicePrivacyDirs
from tests.helpers import damaged, librispeech_tree, utterances, vctk_tree

BOM = "\ufeff"
LIBRI = {"dev-clean": {"1272": "M", "174": "M", "251": "F", "422": "F"}}


def with_bom(path: Path) -> Path:
    """Put a UTF-8 byte-order mark before the file's text, as some Windows editors do."""
    path.write_text(BOM + path.read_text(encoding="utf-8"), encoding="utf-8")
    return path


def entry_fields(entries) -> list[tuple]:
    """What an entry says, without the folder it was read from."""
    return [(e.id, e.speaker, e.gender, Path(e.path).name, e.text, e.where.rpartition(":")[2], e.problem)
            for e in entries]


def first_fields(rows) -> list[str] | None:
    return None if rows is None else [row[0] for row in rows]


# ------------------------------------------------------------ a byte-order mark is not data


@pytest.fixture(scope="module")
def libri(tmp_path_factory) -> Path:
    return librispeech_tree(tmp_path_factory.mktemp("libri") / "LibriSpeech", LIBRI, utterances=1, seconds=0.1)


@pytest.mark.parametrize("comment", [True, False], ids=["before-a-comment", "before-a-speaker"])
def test_speakers_txt_and_transcripts_with_a_bom_read_as_without(libri, tmp_path, comment):
    root = tmp_path / "LibriSpeech"
    shutil.copytree(libri, root)
    speakers = root / "SPEAKERS.TXT"
    expected_speakers, expected = read_speakers(speakers), entry_fields(LibriSpeech(root).entries("dev-clean"))
    if not comment:  # the first line names speaker 1272, which became "\ufeff1272"
        speakers.write_text("".join(f"{line}\n" for line in speakers.read_text().splitlines()
                                    if not line.startswith(";")))
    with_bom(speakers)
    with_bom(root / "dev-clean/1272/100/1272-100.trans.txt")
    assert read_speakers(speakers) == expected_speakers and "1272" in expected_speakers
    assert entry_fields(LibriSpeech(root).entries("dev-clean")) == expected


def test_vctk_speaker_info_and_transcripts_with_a_bom_read_as_without(tmp_path):
    root = vctk_tree(tmp_path / "vctk", {"p225": "F", "p226": "M"}, sentences=2, seconds=0.05, rate=16000)
    expected_genders, expected = read_speaker_info(root / "speaker-info.txt"), VCTK(root).entries("train")
    with_bom(root / "speaker-info.txt")
    with_bom(root / "txt/p225/p225_001.txt")
    assert read_speaker_info(root / "speaker-info.txt") == expected_genders
    assert VCTK(root).entries("train") == expected and expected[0].text == "Sentence 1 read by p225."
    headerless = tmp_path / "speaker-info.txt"
    headerless.write_text(f"{BOM}p225  23  F  English  Somewhere\n", encoding="utf-8")
    assert read_speaker_info(headerless) == {"p225": "f"}


KALDI_FILES = ("wav.scp", "utt2spk", "spk2gender", "text", "enrolls", "trials")


def test_kaldi_dirs_with_a_bom_in_every_file_read_as_without(vpc_folder, tmp_path):
    plain, marked = (damaged(vpc_folder, tmp_path / name, {}) for name in ("plain", "marked"))
    for data in (plain, marked):
        for folder in data.iterdir():
            lines = (folder / "utt2spk").read_text().splitlines()
            (folder / "text").write_text("".join(f"{line.split()[0]} WORDS OF {line.split()[1]}\n" for line in lines))
    for path in marked.glob("*/*"):
        if path.name in KALDI_FILES:
            with_bom(path)
    readers = VoicePrivacyDirs(plain), VoicePrivacyDirs(marked)
    for folder in sorted(p.name for p in plain.iterdir()):
        first, second = (entry_fields(reader.entries(folder)) for reader in readers)
        assert first == second and first[0][4].startswith("WORDS OF")
        assert first_fields(readers[0].enrolls(folder)) == first_fields(readers[1].enrolls(folder))
        if (plain / folder / "trials").is_file():
            assert [t for _, t, _ in readers[0].trials(folder)] == [t for _, t, _ in readers[1].trials(folder)]
    trials = []
    for reader in readers:
        utts = [e.utterance(1.0, 16000) for e in GivenProtocol().entries(reader, "libri_dev")]
        protocols = GivenProtocol().build(utts, reader=reader, subset="libri_dev", name="dev", problems=None)
        trials.append(protocols[""].trials)
    assert trials[0] == trials[1] and sum(map(len, trials[1].values())) == 8
    assert read_text(marked / "libri_dev_enrolls" / "text") == read_text(plain / "libri_dev_enrolls" / "text")


def test_manifests_and_trial_lists_with_a_bom_read_as_without(tmp_path):
    utts = utterances({"1272": "m", "251": "f"}, 2)
    manifest, trials = tmp_path / "m.jsonl", tmp_path / "trials.txt"
    write_manifest(manifest, utts)
    trials.write_text("1272 1272-1-0000 target\n251 1272-1-0001 nontarget\n")
    expected_trials = read_trials(trials)
    with_bom(manifest)
    with_bom(trials)
    assert read_manifest(manifest) == utts
    assert read_trials(trials) == expected_trials and expected_trials[0].enroll == "1272"


# ------------------------------------------------------------ one key, two values


def test_a_speaker_listed_with_two_sexes_in_speakers_txt_names_both_lines(libri, tmp_path):
    speakers = tmp_path / "SPEAKERS.TXT"
    text = (libri / "SPEAKERS.TXT").read_text()
    speakers.write_text(text + "174 | M | dev-clean | 1.00 | Reader 174 again\n")
    assert read_speakers(speakers) == read_speakers(libri / "SPEAKERS.TXT")  # the same sex twice: accepted
    speakers.write_text(text + "174 | F | dev-clean | 1.00 | Reader 174 again\n")
    with pytest.raises(VpevalError, match=r"^.*SPEAKERS.TXT:6: speaker 174 is listed as F here and as M at line 3$"):
        read_speakers(speakers)


def test_a_speaker_listed_with_two_genders_in_speaker_info_names_both_lines(tmp_path):
    info = tmp_path / "speaker-info.txt"
    rows = "ID  AGE  GENDER  ACCENTS  REGION\np225  23  F  English\np226  22  M  English\n"
    info.write_text(rows + "p225  23  f  English\n")
    assert read_speaker_info(info) == {"p225": "f", "p226": "m"}
    info.write_text(rows + "p226  22  F  English\n")
    with pytest.raises(VpevalError, match=r"speaker-info.txt:4: speaker p226 is listed as F here and as M at line 3$"):
        read_speaker_info(info)


KALDI_CONFLICTS = [
    ("spk2gender", "23 m\n", "23 f\n", r"spk2gender:3: speaker 23 is listed as f here and as m at line 1$"),
    ("utt2spk", "23-100-0002 23\n", "23-100-0002 24\n",
     r"utt2spk:5: utterance 23-100-0002 is listed with speaker 24 here and with speaker 23 at line 1$"),
    ("text", "23-100-0002 HELLO\n", "23-100-0002 GOODBYE\n",
     r"text:2: utterance 23-100-0002 is listed with text 'GOODBYE' here and with text 'HELLO' at line 1$"),
]


@pytest.mark.parametrize("file_name, repeat, conflict, message", KALDI_CONFLICTS,
                         ids=[row[0] for row in KALDI_CONFLICTS])
def test_kaldi_key_listed_with_two_values_names_both_lines(vpc_folder, tmp_path, file_name, repeat, conflict,
                                                           message):
    data = damaged(vpc_folder, tmp_path, {})
    path = data / "libri_dev_trials_m" / file_name
    if file_name == "text":
        path.write_text("23-100-0002 HELLO\n")
    path.write_text(path.read_text() + repeat)
    reader = VoicePrivacyDirs(data)
    assert [e.problem for e in reader.entries("libri_dev_trials_m")] == [""] * 4
    path.write_text(path.read_text()[:-len(repeat)] + conflict)
    with pytest.raises(VpevalError, match=message):
        reader.entries("libri_dev_trials_m")

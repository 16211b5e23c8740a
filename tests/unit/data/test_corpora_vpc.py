"""VoicePrivacy Kaldi data dirs: given protocols, wav.scp forms parsed and never executed, bad lists."""
import re
import shutil
from pathlib import Path
import stat

import pytest

from pipeline.core.cache import Cache, summary_of
from pipeline.core.errors import VpevalError
from pipeline.data.kaldi import wav_scp_path
from pipeline.data.manifest import file_digest, read_manifest, read_trials
from pipeline.data.vpc import GivenProtocol, VoicePrivacyDirs
from pipeline.stages import prepare, validate
from pipeline.stages.prepare import manifest_path, trials_path
from tests.helpers import damaged, vpc_cfg, vpc_recipe, wav_value


@pytest.fixture
def trap(tmp_path, monkeypatch):
    """`flac` and `sox` on PATH that leave a marker file if anything ever runs them."""
    marker, bin_dir = tmp_path / "executed", tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("flac", "sox"):
        script = bin_dir / program
        script.write_text(f"#!/bin/sh\ntouch {marker}\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:{shutil.os.environ['PATH']}")
    assert shutil.which("flac") == str(bin_dir / "flac")
    return marker


def test_given_protocol_is_used_and_pipes_are_parsed_never_run(vpc_folder, tmp_path, trap):
    out = prepare.run(vpc_cfg(vpc_folder / "data"), Cache(tmp_path / "cache"))
    assert validate.check(out, ("dev", "test"), workers=2).problems == []
    assert not trap.exists()
    summary = summary_of(out)
    assert summary["eval_sets"] == ["dev", "test"] and summary["converted"] == 0
    train = read_manifest(manifest_path(out, "train"))
    assert len(train) == 16 and {u.gender for u in train} == {"f", "m"}
    for utt in train:
        assert utt.path == str(vpc_folder.resolve() / "corpora/LibriSpeech/train-clean-360" / utt.speaker / "100" /
                               f"{utt.id}.flac")
    enrolls = read_manifest(manifest_path(out, "dev_enrolls"))
    assert [u.id for u in enrolls] == ["21-100-0000", "21-100-0001", "23-100-0000", "23-100-0001"]
    given = (vpc_folder / "data/libri_dev_trials_f/trials").read_text().split("\n")[:-1]
    assert [t.line() for t in read_trials(trials_path(out, "dev_trials_f"))] == given
    assert len(read_manifest(manifest_path(out, "test_trials_m"))) == 4
    assert (out / "kaldi" / "libri_test_trials_m" / "trials").read_text().split("\n")[:-1] == \
        (vpc_folder / "data/libri_test_trials_m/trials").read_text().split("\n")[:-1]


def test_vctk_dirs_give_common_sets(tmp_path):
    data = vpc_recipe(tmp_path / "recipe", vctk_common=True)
    out = prepare.run(vpc_cfg(data, config="vpc_vctk"), Cache(tmp_path / "cache"))
    summary = summary_of(out)
    assert summary["eval_sets"] == ["dev", "dev_common", "test", "test_common"]
    assert read_manifest(manifest_path(out, "dev_common_enrolls")) == read_manifest(manifest_path(out, "dev_enrolls"))
    common = read_manifest(manifest_path(out, "test_common_trials_f"))
    assert sorted(u.id for u in common) == ["31-100-0004", "31-100-0005", "32-100-0004", "32-100-0005"]
    assert (out / "kaldi" / "vctk_test_trials_f_common" / "trials").is_file()
    assert validate.check(out, ("dev", "dev_common"), workers=2).problems == []


@pytest.mark.parametrize("value, path", [
    ("/c/a.flac", "/c/a.flac"),
    ("flac -c -d -s /c/a.flac |", "/c/a.flac"),
    ("flac -c -d -s /c/a.flac|", "/c/a.flac"),
    ("sox /c/a.wav -t wav - |", "/c/a.wav"),
    ("sox /c/a.wav -t wav -r 16000 -b 16 - |", "/c/a.wav"),
    ("sox '/c/a b.wav' -t wav -R - |", "/c/a b.wav"),
])
def test_wav_scp_forms(value, path):
    assert wav_scp_path(value) == path


@pytest.mark.parametrize("value", [
    "flac -c -d -s /c/a.flac | touch /tmp/x |", "flac -c -d -s /c/a.flac; touch /tmp/x |", "cat /c/a.flac |",
    "sox /c/a.wav -t mp3 - |", "sox /c/a.wav -t wav -v 2 - |", "/c/a b.flac", "'/c/a.flac", "",
])
def test_unparseable_wav_scp_values(value):
    with pytest.raises(ValueError):
        wav_scp_path(value)


BAD_LISTS = [
    ("libri_dev_trials_f", "wav.scp", lambda t: t.replace("\n", "\n21-100-0009 touch x; flac -c -d -s y |\n", 1),
     r"libri_dev_trials_f/wav.scp:2: cannot use the audio of 21-100-0009: .* \(never run\)"),
    ("libri_dev_trials_f", "trials", lambda t: t + "21 22-100-0009 nontarget\n",
     r"libri_dev_trials_f/trials:5: trial utterance 22-100-0009 is not in libri_dev_trials_f/wav.scp"),
    ("libri_dev_trials_f", "trials", lambda t: t + "22 22-100-0002 target\n",
     r"trials:5: enrolment speaker 22 has no enrolment utterance in libri_dev_enrolls"),
    ("libri_dev_trials_f", "trials", lambda t: t + "21 22-100-0002 maybe\n",
     r"trials:5: expected 'enroll_speaker test_utterance target\|nontarget'"),
    ("libri_dev_enrolls", "enrolls", lambda t: t + "21-100-0007\n",
     r"libri_dev_enrolls/enrolls:5: enrolment utterance 21-100-0007 is not in"),
    ("libri_test_trials_m", "utt2spk", lambda t: t.replace("33-100-0002 33\n", ""),
     r"libri_test_trials_m/wav.scp:1: utterance 33-100-0002 has no speaker in"),
    ("train-clean-360", "spk2gender", lambda t: t.replace("14 m\n", ""),
     r"train-clean-360/wav.scp:13: speaker 14 of 14-100-0000 has no gender in"),
    ("libri_test_trials_m", "utt2spk", lambda t: t + "34-100-0007 34\n",
     r"utt2spk:5: utterance 34-100-0007 is in utt2spk but not in"),
    ("train-clean-360", "wav.scp", lambda t: t + t.split("\n")[0] + "\n",
     r"train-clean-360/wav.scp:17: duplicate utterance id '11-100-0000' \(first at .*wav.scp:1\)"),
    ("train-clean-360", "wav.scp", lambda t: t.replace("11-100-0001 ", "11-100-0001 /nowhere/x.flac #", 1),
     r"wav.scp:2: cannot use the audio of 11-100-0001"),
    ("train-clean-360", "wav.scp", lambda t: t.replace("12-100-0001.flac", "12-100-0009.flac", 1),
     r"wav.scp:6: audio file 12-100-0009.flac is missing"),
]


@pytest.mark.parametrize("dir_name, file_name, edit, message", BAD_LISTS)
def test_bad_list_lines_are_named(vpc_folder, tmp_path, trap, dir_name, file_name, edit, message):
    data = damaged(vpc_folder, tmp_path, {(dir_name, file_name): [edit]})
    with pytest.raises(VpevalError, match=message + ".*set data.skip_bad=true"):
        prepare.run(vpc_cfg(data), Cache(tmp_path / "cache"))
    assert not trap.exists()


def test_bad_list_lines_are_all_skipped_and_listed(vpc_folder, tmp_path, trap):
    edits = {}
    for dir_name, file_name, edit, _ in BAD_LISTS:
        edits.setdefault((dir_name, file_name), []).append(edit)
    data = damaged(vpc_folder, tmp_path, edits)
    out = prepare.run(vpc_cfg(data, "data.skip_bad=true"), Cache(tmp_path / "cache"))
    skipped = (out / "skipped.txt").read_text()
    for *_, message in BAD_LISTS:
        assert re.search(re.sub(r":\d+:", r":\\d+:", message), skipped), message
    # the bad lines, plus utterance 33-100-0002's trials and speaker 14's other three utterances
    assert summary_of(out)["skipped"] == {"utterances": 8 + 3, "trials": 3 + 1}
    assert len(skipped.splitlines()) == 15
    assert "14" not in {u.speaker for u in read_manifest(manifest_path(out, "train"))}
    assert validate.check(out, workers=2).problems == []
    assert not trap.exists()


@pytest.mark.parametrize("dir_name, file_name, content, message", [
    ("libri_dev_trials_m", "spk2gender", "23 x\n", r"libri_dev_trials_m/spk2gender:1: expected 'speaker f\|m'"),
    ("libri_dev_trials_m", "utt2spk", "23-100-0002\n", r"utt2spk:1: expected 'utterance speaker'"),
    ("libri_dev_trials_m", "segments", "a b 0 1\n", r"segments: segment-level data dirs are not supported"),
    ("libri_dev_trials_m", "trials", None, r"libri_dev_trials_m/trials: not found"),
    ("libri_dev_trials_m", "spk2gender", None, r"spk2gender: not found; a Kaldi data dir needs"),
    ("libri_dev_trials_m", "wav.scp", "\n", r"wav.scp: no utterances listed"),
    ("libri_dev_trials_m", None, None, r"libri_dev_trials_m: data dir not found"),
])
def test_bad_dirs_are_named(vpc_folder, tmp_path, dir_name, file_name, content, message):
    data = damaged(vpc_folder, tmp_path, {})
    target = data / dir_name / file_name if file_name else data / dir_name
    if content is None:
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    else:
        target.write_text(content)
    with pytest.raises(VpevalError, match=message):
        prepare.run(vpc_cfg(data, "data.skip_bad=true"), Cache(tmp_path / "cache"))


def test_relative_paths_follow_path_root(vpc_folder, tmp_path):
    moved = tmp_path / "elsewhere"
    shutil.copytree(vpc_folder / "data", moved)
    reader = VoicePrivacyDirs(moved)
    assert reader.entries("train-clean-360")[0].path == str(moved.parent / wav_value(vpc_folder, "11-100-0000", 0))
    reader = VoicePrivacyDirs(moved, path_root=vpc_folder)
    assert reader.entries("train-clean-360")[0].path == str(vpc_folder / wav_value(vpc_folder, "11-100-0000", 0))
    with pytest.raises(VpevalError, match="VoicePrivacy data folder not found"):
        VoicePrivacyDirs(tmp_path / "nowhere")


def test_enrolment_dir_without_enrolls_list_enrols_all(vpc_folder, tmp_path):
    data = damaged(vpc_folder, tmp_path, {})
    (data / "libri_dev_enrolls" / "enrolls").unlink()
    reader = VoicePrivacyDirs(data)
    utts = [e.utterance(1.0, 16000) for e in GivenProtocol().entries(reader, "libri_dev")]
    protocols = GivenProtocol().build(utts, reader=reader, subset="libri_dev", name="dev", problems=None)
    assert len(protocols[""].enrolls) == 4


def replaced_in_place(path, other) -> None:
    """`path`'s audio replaced by `other`'s (same length), as a user fixing a corpus would."""
    data = other.read_bytes()
    path.unlink()
    path.write_bytes(data)


def test_audio_replaced_outside_the_data_folder_prepares_again_and_changes_the_manifests(tmp_path, caplog):
    """Regression: a VPC data folder's audio lies outside data.root (corpora/), which the key's
    fingerprint did not cover: a trial file replaced there was served from the cache, and every
    later stage with it (keyed by manifests that stayed byte for byte the same), exit 0."""
    recipe = tmp_path / "recipe"
    data = vpc_recipe(recipe)
    cache = Cache(tmp_path / "cache")
    first = prepare.run(vpc_cfg(data), cache)
    before = {name: file_digest(manifest_path(first, name)) for name in ("train", "test_trials_f", "test_enrolls")}
    audio = recipe / "corpora/LibriSpeech/eval/32/100"
    replaced_in_place(audio / "32-100-0002.flac", audio / "32-100-0003.flac")
    with caplog.at_level("WARNING", logger="pipeline.core.cache"):
        again = prepare.run(vpc_cfg(data), cache)
    assert again == first and "32-100-0002.flac changed since it was prepared; building" in caplog.text
    after = {name: file_digest(manifest_path(again, name)) for name in before}
    assert after["test_trials_f"] != before["test_trials_f"]  # the stages reading it are keyed anew
    assert after["train"] == before["train"] and after["test_enrolls"] == before["test_enrolls"]
    assert prepare.run(vpc_cfg(data), cache) == again and [e.reused for e in cache.events][-1]
    (audio / "32-100-0003.flac").unlink()
    with pytest.raises(VpevalError, match="32-100-0003"):  # gone: prepared again, which names it
        prepare.run(vpc_cfg(data), cache)


def test_tab_separated_kaldi_files_read_as_space_separated_ones(vpc_folder, tmp_path):
    """Regression: Kaldi's readers split fields on spaces and tabs; vpeval split on spaces only
    and refused a tab-separated utt2spk, wav.scp or trials file (`expected 'utterance speaker'`)."""
    to_tabs = lambda text: "".join(line.replace(" ", "\t", 1) + "\n" for line in text.splitlines())  # noqa: E731
    data = damaged(vpc_folder, tmp_path, {(name, file): [to_tabs] for name in ("libri_dev_trials_f", "train-clean-360")
                                          for file in ("wav.scp", "utt2spk", "spk2gender")} |
                   {("libri_dev_trials_f", "trials"): [to_tabs]})
    assert "\t" in (data / "libri_dev_trials_f" / "trials").read_text()
    tabs, spaces = (prepare.run(vpc_cfg(root), Cache(tmp_path / name)) for name, root in
                    (("tabs", data), ("spaces", vpc_folder / "data")))
    for name in ("train", "dev_trials_f"):  # the same utterances (the paths differ: a linked copy)
        assert [(u.id, u.speaker, u.gender, Path(u.path).name, u.duration) for u in
                read_manifest(manifest_path(tabs, name))] == \
            [(u.id, u.speaker, u.gender, Path(u.path).name, u.duration) for u in read_manifest(manifest_path(spaces, name))]
    assert read_trials(trials_path(tabs, "dev_trials_f")) == read_trials(trials_path(spaces, "dev_trials_f"))

"""`anonymizer=precomputed` on a VoicePrivacy data folder holding several systems' anonymised
Kaldi dirs (`<list>_<suffix>`): the one named by its suffix is evaluated, training data included."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from pipeline.app.experiment import Experiment
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.data.audio import read_audio, write_audio
from pipeline.data.manifest import read_manifest
from tests.helpers import vpc_recipe

GAINS = {"b1": 0.5, "b2": 0.25}


@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> Path:
    """A VPC recipe folder whose data/ also holds every list anonymised by two 'systems' (gains),
    as VPC ships them: `<list>_<suffix>` dirs, b2 with wav.scp paths relative to the recipe
    folder, b1 with its audio in `<dir>/wav/` and no wav.scp."""
    recipe = tmp_path_factory.mktemp("vpc_systems")
    data = vpc_recipe(recipe)
    for original in sorted(d for d in data.iterdir() if d.is_dir()):
        utt2spk = (original / "utt2spk").read_text()
        for system, gain in GAINS.items():
            anonymised = data / f"{original.name}_{system}"
            anonymised.mkdir()
            lines = []
            for line in utt2spk.splitlines():
                utt, speaker = line.split()
                source = recipe / "corpora/LibriSpeech" / ("train-clean-360" if original.name.startswith("train")
                                                           else "eval") / speaker / "100" / f"{utt}.flac"
                where = recipe / "exp" / system if system == "b2" else anonymised / "wav"
                write_audio(where / f"{utt}.wav", gain * read_audio(source, 16000), 16000)
                lines.append(f"{utt} exp/{system}/{utt}.wav\n")
            if system == "b2":  # b1 as VPC's anonymisation leaves it: data/<list>_b1/wav/*.wav, no wav.scp
                (anonymised / "wav.scp").write_text("".join(lines))
            for name in ("utt2spk", "spk2gender"):
                shutil.copy(original / name, anonymised / name)
    return recipe


def experiment(recipe: Path, tmp_path: Path, suffix: str) -> Experiment:
    return Experiment(compose([f"paths.data={tmp_path}", "data=vpc", f"data.root={recipe / 'data'}",
                               "anonymizer=precomputed", f"anonymizer.folder={recipe / 'data'}",
                               f"anonymizer.suffix={suffix}", "device=cpu"]))


@pytest.mark.parametrize("suffix", ["b2", "b1"])
def test_the_system_named_by_its_suffix_is_evaluated_training_data_included(recipe, tmp_path, suffix):
    run = experiment(recipe, tmp_path, suffix)
    for name in ("train", "dev_enrolls", "test_trials_m"):
        original = {u.id: u for u in read_manifest(run.data("original", name, run.evaluated))}
        anonymised = read_manifest(run.data("anonymized", name, run.evaluated))
        assert [u.id for u in anonymised] == list(original)
        for utt in anonymised:
            np.testing.assert_allclose(read_audio(utt.path, 16000),
                                       GAINS[suffix] * read_audio(original[utt.id].path, 16000), atol=2 / 32768)


def test_a_missing_list_names_the_dir_it_expected(recipe, tmp_path):
    data = tmp_path / "recipe" / "data"
    shutil.copytree(recipe / "data", data, ignore=shutil.ignore_patterns("libri_test_trials_m_b2"))
    for linked in ("corpora", "exp"):
        (tmp_path / "recipe" / linked).symlink_to(recipe / linked)
    run = experiment(tmp_path / "recipe", tmp_path / "runs", "b2")
    with pytest.raises(VpevalError, match=rf"4 utterance\(s\) in no \*_b2 dir \(33-100-0002, .*\): expected "
                                          rf"{data}/libri_test_trials_m_b2/wav.scp, the anonymised libri_test_trials_m"):
        run.data("anonymized", "test_trials_m", run.evaluated)


def test_an_unknown_suffix_names_the_folder(recipe, tmp_path):
    run = experiment(recipe, tmp_path, "b3")
    with pytest.raises(VpevalError, match=r"has no data dir named \*_b3 \(anonymizer.suffix=b3\); data dirs there: "
                                          r"libri_dev_enrolls, libri_dev_enrolls_b1, "):
        run.data("anonymized", "train", run.evaluated)


def test_data_changed_in_place_are_not_taken_for_the_old(recipe, tmp_path):
    from anonymizers.precomputed import PrecomputedParameters

    data = tmp_path / "data"
    shutil.copytree(recipe / "data", data, ignore=shutil.ignore_patterns("*_b2"))
    before = PrecomputedParameters(folder=str(data), suffix="b1").fingerprint(None)
    wav = next((data / "libri_dev_enrolls_b1" / "wav").iterdir())
    wav.write_bytes(wav.read_bytes() + b"\0\0")
    assert PrecomputedParameters(folder=str(data), suffix="b1").fingerprint(None) != before

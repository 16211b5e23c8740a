"""The VoicePrivacy attack model (tomashenko2020 §2): at speaker level, a speaker's enrolment
and trial utterances get different pseudo-speakers, and the anonymised manifest records
which one each utterance received."""
import numpy as np
import torch

from anonymizers.mcadams import McAdams
from pipeline.core.cache import Cache
from pipeline.core.config import compose
from pipeline.data.audio import read_audio, write_audio
from pipeline.data.manifest import Utterance, read_manifest, write_manifest
from pipeline.stages import anonymize
from tests.helpers import tone

SPEAKERS = {"s1": "f", "s2": "m"}


def lists(tmp_path):
    """Two lists (enrolment, trials) with the same two speakers, two utterances each."""
    found = {}
    for list_name in ("dev_enrolls", "dev_trials_f"):
        utts = []
        for n, (speaker, gender) in enumerate(SPEAKERS.items()):
            for i in range(2):
                utt = f"{speaker}-{list_name}-{i}"
                path = write_audio(tmp_path / "audio" / f"{utt}.flac", tone(0.4, 120 + 40 * n + 7 * i, seed=i), 16000)
                utts.append(Utterance(utt, speaker, gender, str(path), 0.4))
        found[list_name] = write_manifest(tmp_path / f"{list_name}.jsonl", utts)
    return found


def anonymized(tmp_path, seed, system="mcadams_speaker"):
    cache = Cache(tmp_path / "cache")
    config = compose([f"anonymizer={system}"]).anonymizer
    return {name: read_manifest(anonymize.run(config, manifest, cache, list_name=name, seed=seed, device="cpu")
                                / "manifest.jsonl")
            for name, manifest in lists(tmp_path).items()}


def test_speaker_level_gives_one_pseudo_speaker_per_speaker_and_list(tmp_path):
    """Regression: the key was the speaker id alone, so a speaker's enrolment and trials
    shared one McAdams alpha and AA on speaker-level systems was far too easy."""
    found = anonymized(tmp_path, seed=3)
    alphas = {}
    for list_name, utts in found.items():
        for utt in utts:
            record = utt.pseudo_speaker
            assert record["key"] == f"{list_name}/{utt.speaker}"
            assert 0.5 <= record["alpha"] <= 0.9
            alphas.setdefault((list_name, utt.speaker), set()).add(record["alpha"])
    assert all(len(drawn) == 1 for drawn in alphas.values())  # one per speaker within a list
    for speaker in SPEAKERS:
        assert alphas[("dev_enrolls", speaker)] != alphas[("dev_trials_f", speaker)]
    other_seed = anonymized(tmp_path, seed=4)
    assert [u.pseudo_speaker["alpha"] for u in other_seed["dev_enrolls"]] != \
           [u.pseudo_speaker["alpha"] for u in found["dev_enrolls"]]


def test_the_recorded_alpha_is_the_one_applied(tmp_path):
    found = anonymized(tmp_path, seed=3)
    originals = {u.id: u for u in read_manifest(tmp_path / "dev_trials_f.jsonl")}
    for utt in found["dev_trials_f"]:
        wave = torch.from_numpy(read_audio(originals[utt.id].path))
        again = McAdams(alpha=utt.pseudo_speaker["alpha"], device="cpu")([wave], [utt.id], [utt.speaker], 16000)[0]
        np.testing.assert_allclose(read_audio(utt.path), again.numpy(), atol=2 / 32768)


def test_utterance_level_keys_are_the_utterance_ids(tmp_path):
    found = anonymized(tmp_path, seed=3, system="mcadams")
    for utts in found.values():
        assert [u.pseudo_speaker["key"] for u in utts] == [u.id for u in utts]
        assert len({u.pseudo_speaker["alpha"] for u in utts}) == len(utts)

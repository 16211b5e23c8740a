"""`attacker=ecapa_ssl` and `backend=cosine_vpc2026` against VPC 2026's own code: the numbers in
tests/fixtures/vpc2026_ssl were computed by VPC's `SpeechBrainVectors.extract_vector`,
`WavLMFeatureExtractor`, `ECAPA_TDNN_test`, `SpeakerEmbeddings.convert_to_spk_level`,
`ASV.compute_distances` and its fine-tuning `WavLMFeatureExtractor` (commit e6810a4; the
fixture's README says how). vpeval loads the same weights and must give the same numbers."""
import json

import numpy as np
import pytest
import soundfile as sf
import torch
from safetensors import safe_open

from pipeline.asv.crops import take_context
from pipeline.asv.ecapa_ssl import SSLSpeakerEncoder, normalise_waveforms, vpc_fbank_input
from pipeline.asv.embed import embed_utterances
from pipeline.asv.model import normalise_mean
from pipeline.asv.scoring import CosineBackend, score_trials
from pipeline.data.audio import read_audio
from pipeline.data.manifest import Trial, Utterance
from tests.helpers import FIXTURES

FIXTURE = FIXTURES / "vpc2026_ssl"
COSINE = 0.99999  # the issue's bar for every utterance


@pytest.fixture(scope="module")
def expected() -> tuple[dict, dict]:
    with safe_open(FIXTURE / "expected.safetensors", "pt") as file:
        return {key: file.get_tensor(key) for key in file.keys()}, file.metadata()


def vpc_sized_encoder(dropout: float = 0.3) -> SSLSpeakerEncoder:
    """VPC's architecture at the fixture's sizes, VPC's checkpoint loaded strictly."""
    encoder = SSLSpeakerEncoder(wavlm=str(FIXTURE / "WavLM-Large.pt"), channels=[32, 32, 32, 32, 96],
                                attention_channels=8, res2net_scale=8, se_channels=8, embedding_dim=16,
                                wavlm_layers=24, dropout=dropout)
    encoder.load_vpc_embedding_model(FIXTURE / "embedding_model.ckpt")
    return encoder.eval()


@pytest.fixture(scope="module")
def encoder() -> SSLSpeakerEncoder:
    return vpc_sized_encoder()


@pytest.fixture(scope="module")
def embedded(encoder, expected) -> dict[int, dict[str, torch.Tensor]]:
    """batch_seconds -> vpeval's embeddings of the fixture's utterances, one per batch (1 s)
    or all nine in one batch (400 s)."""
    found = {}
    for batch_seconds in (1.0, 400.0):
        ids, embeddings = embed_utterances(encoder, utterances(expected[1]), device="cpu",
                                           batch_seconds=batch_seconds, progress=False)
        found[batch_seconds] = dict(zip(ids, torch.from_numpy(embeddings)))
    return found


def utterances(metadata: dict) -> list[Utterance]:
    return [Utterance(id=utt, speaker=utt.split("-")[0], gender="f", path=str(FIXTURE / "audio" / f"{utt}.flac"),
                      duration=sf.info(FIXTURE / "audio" / f"{utt}.flac").duration)
            for utt in metadata["utts"].split()]


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.nn.functional.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0).item()


def test_the_fixture_covers_the_lengths_the_issue_names(expected):
    durations = sorted(round(utt.duration, 2) for utt in utterances(expected[1]))
    assert {1.5, 3.0, 7.0, 10.0, 12.0, 25.0} <= set(durations)
    assert expected[1]["vpc_commit"].startswith("e6810a4")


def test_fbank_branch_equals_vpcs(encoder, expected):
    """Peak-normalised, zero-trimmed utterance -> SpeechBrain Fbank -> sentence mean normalisation."""
    tensors, metadata = expected
    for utt in utterances(metadata):
        wav = torch.from_numpy(read_audio(utt.path))[None]
        trimmed, counts = vpc_fbank_input(wav, torch.tensor([wav.shape[1]]))
        feats, frames = encoder.fbank(trimmed, counts)
        feats = normalise_mean(feats, frames)[:, :int(frames)]
        assert int(frames) == int(tensors[f"fbank_frames.{utt.id}"]), utt.id
        pairs = ([(feats, tensors[f"fbank.{utt.id}"])] if f"fbank.{utt.id}" in tensors else
                 [(feats[:, :100], tensors[f"fbank_head.{utt.id}"]), (feats[:, -100:], tensors[f"fbank_tail.{utt.id}"])])
        for ours, theirs in pairs:
            torch.testing.assert_close(ours, theirs, rtol=0, atol=2e-3, msg=utt.id)


def test_wavlm_branch_equals_vpcs(encoder, expected):
    """The whole, untrimmed utterance, layer-normalised over all of it, every layer's output."""
    tensors, metadata = expected
    for utt in utterances(metadata):
        wav = torch.from_numpy(read_audio(utt.path))[None]
        count = torch.tensor([wav.shape[1]])
        with torch.inference_mode():
            layers, frames = encoder.wavlm_layers(normalise_waveforms(wav, count), count)
        assert int(frames) == int(tensors[f"wavlm_frames.{utt.id}"]) == layers.shape[2], utt.id
        torch.testing.assert_close(layers[:, 0].mean(dim=1), tensors[f"wavlm_mean.{utt.id}"], rtol=0, atol=1e-4,
                                   msg=utt.id)


@pytest.mark.parametrize("batch_seconds", [1.0, 400.0])  # one utterance per batch; all nine in one
def test_extraction_equals_vpcs_embedding_alone_or_batched(embedded, expected, batch_seconds):
    tensors = expected[0]
    for utt_id, embedding in embedded[batch_seconds].items():
        assert cosine(embedding, tensors[f"raw.{utt_id}"]) >= COSINE, utt_id
        torch.testing.assert_close(embedding, tensors[f"raw.{utt_id}"].flatten(), rtol=1e-4, atol=1e-4)


def test_vpcs_vectors_are_the_signs_of_its_embeddings(expected):
    tensors, metadata = expected
    for utt in metadata["utts"].split():
        assert torch.equal(tensors[f"vector.{utt}"], torch.sign(tensors[f"raw.{utt}"]).flatten()), utt


def test_cosine_vpc2026_scores_as_vpcs_enrolment_and_scoring(embedded, expected):
    """Sign vectors, enrolment = their mean (`convert_to_spk_level`), cosine: VPC's trial scores,
    from VPC's embeddings and from vpeval's."""
    tensors, metadata = expected
    utts = {utt.id: utt for utt in utterances(metadata)}
    enrol = [utts[utt] for utt in metadata["enrol_utts"].split()]
    trials = [Trial(enroll, test, label == "target") for enroll, test, label in
              (line.split() for line in (FIXTURE / "trials").read_text().splitlines())]
    backend = CosineBackend(enrolment="mean_raw", embedding="sign", name="cosine_vpc2026")
    vpc_raw = {utt: tensors[f"raw.{utt}"].flatten().numpy() for utt in utts}
    from_vpc = score_trials(backend, enrol, np.stack([vpc_raw[u.id] for u in enrol]), vpc_raw, trials)
    np.testing.assert_allclose(from_vpc, tensors["scores"].numpy(), rtol=0, atol=1e-6)
    ours_by_id = {utt: embedding.numpy() for utt, embedding in embedded[400.0].items()}
    from_vpeval = score_trials(backend, enrol, np.stack([ours_by_id[u.id] for u in enrol]), ours_by_id, trials)
    np.testing.assert_allclose(from_vpeval, tensors["scores"].numpy(), rtol=0, atol=1e-6)
    # the raw embeddings' cosine (backend=cosine's mean of raw vectors here) is another number
    raw_mean = CosineBackend(enrolment="mean_raw")
    np.testing.assert_allclose(score_trials(raw_mean, enrol, np.stack([vpc_raw[u.id] for u in enrol]), vpc_raw,
                                            trials), tensors["scores_raw_mean"].numpy(), rtol=0, atol=1e-6)
    assert not np.allclose(tensors["scores"].numpy(), tensors["scores_raw_mean"].numpy(), atol=1e-3)


def test_fine_tuning_forward_equals_vpcs(expected):
    """VPC's fine-tuning step without augmentation: the 3-s crop to the fbank branch, a 10-s
    context of the clean whole file (normalised over it, cut or zero-padded) to WavLM; train
    mode, dropout 0, batch statistics."""
    tensors, metadata = expected
    model = vpc_sized_encoder(dropout=0.0).train()
    assert not model.wavlm.training
    names = metadata["ft_utts"].split()
    audio = [sf.read(FIXTURE / "audio" / f"{utt}.flac", dtype="int16")[0] for utt in names]
    offsets = np.cumsum([0] + [len(a) for a in audio])
    whole = np.concatenate(audio)
    starts = tensors["ft_wavlm_start"].numpy()
    contexts = take_context(whole, offsets, np.arange(3), np.maximum(starts, 0), model.context_samples, normalize=True)
    crops = np.stack([whole[offsets[i] + start:offsets[i] + start + 48000]
                      for i, start in enumerate(tensors["ft_fbank_start"].numpy())]).astype(np.float32) / 32768
    with torch.no_grad():
        layers, _ = model.wavlm_layers(torch.from_numpy(contexts), torch.full((3,), contexts.shape[1]))
        out = model(torch.from_numpy(crops), context=torch.from_numpy(contexts))
    torch.testing.assert_close(layers.mean(dim=2).transpose(0, 1), tensors["ft_wavlm_mean"], rtol=0, atol=1e-4)
    for row in range(3):
        assert cosine(out[row], tensors["ft_out"][row]) >= COSINE, names[row]
    torch.testing.assert_close(out, tensors["ft_out"][:, 0], rtol=1e-4, atol=1e-4)


def test_a_checkpoint_of_another_size_names_the_first_differing_key(tmp_path):
    state = torch.load(FIXTURE / "embedding_model.ckpt", weights_only=True)
    state["blocks_features.0.tdnn1.conv.conv.weight"] = torch.zeros(32, 16, 1)
    torch.save(state, tmp_path / "embedding_model.ckpt")
    encoder = SSLSpeakerEncoder(wavlm=str(FIXTURE / "WavLM-Large.pt"), channels=[32, 32, 32, 32, 96],
                                attention_channels=8, res2net_scale=8, se_channels=8, embedding_dim=16,
                                wavlm_layers=24)
    with pytest.raises(Exception, match=r"embedding_model.ckpt: embedding_model is from another architecture: "
                                        r".*blocks_features.0.tdnn1.conv.conv.weight"):
        encoder.load_vpc_embedding_model(tmp_path / "embedding_model.ckpt")
    assert json.dumps(encoder.architecture)  # the settings a model folder records stay plain

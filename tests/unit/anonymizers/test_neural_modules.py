"""Torch modules of the speaker-embedding voice converter: F0 tracker, VQ bottleneck, content
encoders, HiFi-GAN-NSF, discriminators, the Householder map, and loading weights from paths."""
import math

import numpy as np
import pytest
import torch
import torchaudio

from anonymizers.vc.checkpoints import build, load_module, require_folder, save_module
from anonymizers.vc.content import SSLContentEncoder, VectorQuantizer, VQContentEncoder
from anonymizers.vc.generator import HiFiGANNSF, SineExcitation
from anonymizers.vc.householder import OHNN_FORMAT, HouseholderMap
from pipeline.signal.f0 import LogF0Stats, YinPitch, log_f0_stats, map_f0
from anonymizers.vc.losses import (
    Discriminators,
    MelLoss,
    MultiResolutionSTFTLoss,
    discriminator_loss,
    generator_losses,
)
from anonymizers.vc.model import VoiceConverter
from pipeline.core.errors import VpevalError
from pipeline.runtime.checkpoint import save_checkpoint

RATE = 16000


pytestmark = pytest.mark.usefixtures("single_thread")


def harmonic(f0, seconds=1.0, rate=RATE, partials=5):
    t = torch.arange(int(seconds * rate)) / rate
    return 0.3 * sum(torch.sin(2 * math.pi * f0 * k * t) / k for k in range(1, partials + 1)) / 2


def tiny_converter(speaker_dim=6):
    torch.manual_seed(0)
    return VoiceConverter(content=VQContentEncoder(channels=16, layers=1, dim=8, codes=8), speaker_dim=speaker_dim,
                          decoder=dict(channels=16, speaker_channels=8, layers=1),
                          generator=dict(upsample_initial_channel=16, resblock_kernel_sizes=[3],
                                         resblock_dilations=[[1, 3]]),
                          excitation=dict(harmonics=4))


TINY_SSL = dict(
    extractor_mode="group_norm", extractor_conv_layer_config=[(16, 10, 5)] + [(16, 3, 2)] * 4 + [(16, 2, 2)] * 2,
    extractor_conv_bias=False, encoder_embed_dim=24, encoder_projection_dropout=0.0, encoder_pos_conv_kernel=8,
    encoder_pos_conv_groups=4, encoder_num_layers=2, encoder_num_heads=2, encoder_attention_dropout=0.0,
    encoder_ff_interm_features=32, encoder_ff_interm_dropout=0.0, encoder_dropout=0.0,
    encoder_layer_norm_first=False, encoder_layer_drop=0.0, aux_num_out=None)


def tiny_ssl(**changes):
    """A tiny wav2vec2 model (`TINY_SSL` with `changes`)."""
    return torchaudio.models.wav2vec2_model(**{**TINY_SSL, **changes})


@pytest.mark.parametrize("f0", [70.0, 110.0, 180.0, 260.0, 420.0])
def test_yin_tracks_harmonic_tones_within_half_a_percent(f0):
    tracked, voiced = YinPitch()(harmonic(f0)[None])
    inner = slice(3, -3)  # the first and last frames see the zero padding
    assert voiced[0, inner].all()
    assert (tracked[0, inner] / f0 - 1).abs().max() < 0.005


def test_yin_leaves_noise_and_silence_unvoiced_and_respects_lengths():
    tracker = YinPitch()
    noise = 0.1 * torch.randn(1, RATE, generator=torch.Generator().manual_seed(0))
    assert tracker(noise)[1].float().mean() < 0.05
    assert not tracker(torch.zeros(1, RATE))[1].any()
    batch = torch.stack([harmonic(150.0), torch.cat([harmonic(200.0, 0.5), torch.zeros(RATE // 2)])])
    f0, voiced = tracker(batch, torch.tensor([RATE, RATE // 2]))
    assert f0.shape == (2, 100) and not voiced[1, 50:].any()
    solo, _ = tracker(harmonic(200.0, 0.5)[None])
    torch.testing.assert_close(f0[1, :50], solo[0])


def test_log_f0_statistics_are_mapped_to_the_target():
    f0 = torch.tensor([[100.0, 120.0, 0.0, 140.0, 110.0]])
    voiced = f0 > 0
    source = log_f0_stats(f0, voiced)
    target = LogF0Stats(torch.tensor([math.log(220.0)]), source.std * 0.5)
    mapped = map_f0(f0, voiced, source, target)
    result = log_f0_stats(mapped, voiced)
    torch.testing.assert_close(result.mean, target.mean)
    torch.testing.assert_close(result.std, target.std)
    assert mapped[0, 2] == 0
    nothing = log_f0_stats(torch.zeros(1, 5), torch.zeros(1, 5, dtype=torch.bool))
    assert torch.isnan(nothing.mean).all()
    torch.testing.assert_close(map_f0(f0, voiced, nothing, target), f0)  # no source statistics: kept


def test_vector_quantizer_outputs_codewords_and_learns_the_data():
    torch.manual_seed(0)
    centres = torch.randn(4, 3) * 3
    data = (centres[torch.randint(4, (2, 200))] + 0.05 * torch.randn(2, 200, 3))
    mask = torch.ones(2, 200, dtype=torch.bool)
    vq = VectorQuantizer(codes=8, dim=3, decay=0.8)
    _, first_loss, _ = vq(data, mask)
    for _ in range(30):
        vq(data, mask)
    vq.eval()
    quantised, loss, index = vq(data, mask)
    torch.testing.assert_close(quantised, vq.codebook[index])
    assert loss < 0.1 * first_loss
    padded, _, _ = vq(data, torch.zeros_like(mask))
    assert not padded.any()  # padded frames are zero


def test_vq_content_encoder_shapes_and_gradients():
    encoder = VQContentEncoder(channels=16, layers=2, dim=8, codes=8)
    waves = 0.1 * torch.randn(2, 4000)
    content = encoder(waves, torch.tensor([4000, 3000]))
    assert content.features.shape == (2, 25, 8) and content.mask.sum(1).tolist() == [25, 19]
    assert not content.features[1, 19:].any()
    content.features.sum().backward()  # straight-through estimator reaches the convolutions
    assert encoder.convs.input.weight.grad.abs().sum() > 0


def test_ssl_content_encoder_loads_weights_from_a_path(tmp_path):
    source = tiny_ssl()
    path = save_checkpoint(tmp_path / "ssl.pt", source.state_dict())
    encoder = SSLContentEncoder(ssl_model=tiny_ssl(), weights=str(path), layer=2, dim=8, codes=None)
    for name, value in source.state_dict().items():
        torch.testing.assert_close(encoder.ssl.state_dict()[name], value)
    assert not any(p.requires_grad for p in encoder.ssl.parameters())
    content = encoder(0.1 * torch.randn(2, 8000), torch.tensor([8000, 6000]))
    assert content.features.shape == (2, 50, 8) and not content.features[1, 38:].any()


def test_ssl_weights_of_another_architecture_or_pickled_code_are_refused(tmp_path):
    other = tiny_ssl(extractor_conv_layer_config=[(8, 10, 5)], encoder_num_layers=1)
    wrong = save_checkpoint(tmp_path / "wrong.pt", other.state_dict())
    with pytest.raises(VpevalError, match=r"wrong\.pt: SSL model is from another architecture: .*missing keys.*"
                                          r"shape mismatches \[encoder.feature_projection.layer_norm.bias: expected \(16,\) found \(8,\)"):
        SSLContentEncoder(ssl_model=tiny_ssl(), weights=str(wrong))
    pickled = tmp_path / "pickled.pt"
    torch.save({"weights": np.ones(3), "hook": print}, pickled)
    with pytest.raises(VpevalError, match="refused to load, it holds more than weights"):
        SSLContentEncoder(ssl_model=tiny_ssl(), weights=str(pickled))
    corrupted = tmp_path / "corrupted.pt"
    corrupted.write_bytes(wrong.read_bytes()[:200])
    with pytest.raises(VpevalError, match="corrupted.pt: not a readable torch checkpoint"):
        SSLContentEncoder(ssl_model=tiny_ssl(), weights=str(corrupted))


def test_sine_excitation_follows_f0_and_is_noise_when_unvoiced():
    excitation = SineExcitation(RATE, harmonics=1)
    with torch.no_grad():
        excitation.merge.weight.fill_(5.0)
        excitation.merge.bias.zero_()
    f0 = torch.full((1, RATE), 200.0)
    f0[0, RATE // 2:] = 0
    out = excitation(f0, torch.randn(1, RATE, generator=torch.Generator().manual_seed(1)))[0, 0]
    spectrum = torch.fft.rfft(out[:RATE // 2]).abs()
    assert abs(int(spectrum.argmax()) * 2 - 200) <= 2  # 0.5 s: bins every 2 Hz
    assert out[RATE // 2:].std() > 0.05  # noise, not silence


def test_hifigan_nsf_shapes_and_batching_does_not_change_an_utterance():
    generator = HiFiGANNSF(in_channels=6, upsample_rates=(5, 4, 4, 2), upsample_kernel_sizes=(10, 8, 8, 4),
                           upsample_initial_channel=16, resblock_kernel_sizes=(3, 5), resblock_dilations=((1, 3), (1,)))
    torch.manual_seed(0)
    conditioning, excitation = torch.randn(2, 6, 30), torch.randn(2, 1, 30 * 160)
    frames = torch.tensor([30, 20])
    with torch.no_grad():
        both = generator(conditioning, excitation, frames)
        alone = generator(conditioning[1:, :, :20], excitation[1:, :, :3200], frames[1:])
    assert both.shape == (2, 4800) and both.abs().max() <= 1
    torch.testing.assert_close(both[1, :3200], alone[0], atol=1e-6, rtol=0)
    assert not both[1, 3200:].any()
    with pytest.raises(ValueError, match="twice"):
        HiFiGANNSF(in_channels=6, upsample_rates=(4,), upsample_kernel_sizes=(7,))


def test_voice_converter_reconstructs_a_batch_and_sees_the_speaker():
    model = tiny_converter().eval()
    waves = torch.stack([harmonic(120.0, 0.5), torch.cat([harmonic(180.0, 0.3), torch.zeros(3200)])])
    lengths = torch.tensor([8000, 4800])
    speakers = torch.randn(2, 6)
    with torch.no_grad():
        output, loss = model(waves, lengths, speakers)
        analysis = model.analyse(waves, lengths)
        noise = torch.randn(2, 8000)
        one = model.synthesise(analysis.content.features, analysis.f0, analysis.voiced, speakers, analysis.frames, noise)
        other = model.synthesise(analysis.content.features, analysis.f0, analysis.voiced, -speakers, analysis.frames, noise)
    assert output.shape == (2, 8000) and loss.ndim == 0
    assert (one - other).abs().max() > 1e-4  # the speaker embedding conditions the output
    with pytest.raises(ValueError, match="hop_length"):
        VoiceConverter(content=VQContentEncoder(), speaker_dim=4, hop_length=200)


def test_reconstruction_losses_and_discriminators():
    target = harmonic(150.0, 0.5)[None].repeat(2, 1)
    stft, mel = MultiResolutionSTFTLoss(), MelLoss()
    assert stft(target, target) < 1e-4 and mel(target, target) < 1e-4
    assert stft(0.5 * target, target) > stft(0.9 * target, target) > 0
    discriminators = Discriminators(periods=(2, 3), scales=2, period_channels=(4, 8), scale_channels=(4, 16))
    real, fake = discriminators(target), discriminators(0.1 * torch.randn(2, 8000))
    assert len(real) == 4
    adversarial, matching = generator_losses(real, fake)
    assert discriminator_loss(real, fake) > 0 and adversarial > 0 and matching > 0


def test_householder_map_is_orthogonal_and_deterministic():
    ohnn = HouseholderMap(dim=12, seed=3)
    matrix = ohnn.matrix()
    torch.testing.assert_close(matrix @ matrix.T, torch.eye(12), atol=1e-5, rtol=0)
    x = torch.randn(7, 12)
    torch.testing.assert_close(ohnn(x), x @ matrix.T, atol=1e-5, rtol=0)
    torch.testing.assert_close(ohnn(x), HouseholderMap(dim=12, seed=3)(x))
    with torch.no_grad():
        ohnn.vectors.mul_(torch.linspace(0.1, 10, 12)[:, None])  # any weights: still orthogonal
    torch.testing.assert_close(ohnn(x).norm(dim=1), x.norm(dim=1), atol=1e-5, rtol=0)
    assert HouseholderMap(dim=12, reflections=3).vectors.shape == (3, 12)


def test_model_folders_load_safely(tmp_path):
    ohnn = HouseholderMap(dim=5, seed=1)
    spec = {"_target_": "anonymizers.vc.householder.HouseholderMap", "dim": 5, "seed": 1}
    save_module(tmp_path / "ohnn", ohnn, spec, {"format": OHNN_FORMAT})
    loaded, info = load_module(tmp_path / "ohnn", OHNN_FORMAT, HouseholderMap, "OHNN", "cpu")
    torch.testing.assert_close(loaded.vectors, ohnn.vectors)
    assert info["model"] == spec
    save_module(tmp_path / "bigger", HouseholderMap(dim=6), {**spec, "dim": 6}, {"format": OHNN_FORMAT})
    (tmp_path / "ohnn" / "model.pt").write_bytes((tmp_path / "bigger" / "model.pt").read_bytes())
    with pytest.raises(VpevalError, match=r"OHNN is from another architecture: 1 shape mismatches "
                                          r"\[vectors: expected \(5, 5\) found \(6, 6\)\]"):
        load_module(tmp_path / "ohnn", OHNN_FORMAT, HouseholderMap, "OHNN", "cpu")
    with pytest.raises(VpevalError, match="refused builder 'os.system'"):
        build({"_target_": "os.system", "command": "true"}, tmp_path / "model.json")
    with pytest.raises(VpevalError, match="anonymizer.ohnn_model is not set: .*training.ohnn"):
        require_folder(None, "anonymizer.ohnn_model", "python -m anonymizers.training.ohnn")

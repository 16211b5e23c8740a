"""Speaker encoder: Kaldi fbank, shapes, padding invariance, AAM head, config checks."""
import pytest
import torch
import torchaudio.compliance.kaldi as kaldi

from pipeline.asv.features import KaldiFbank
from pipeline.asv.model import AAMSoftmaxHead, SpeakerEncoder, normalise_mean
from pipeline.core.errors import VpevalError

TINY = dict(channels=[32, 32, 32, 32, 96], kernel_sizes=[5, 3, 3, 3, 1], dilations=[1, 2, 3, 4, 1],
            attention_channels=16, res2net_scale=4, se_channels=16, embedding_dim=24)


pytestmark = pytest.mark.usefixtures("single_thread")


def random_batch_norm_statistics(module: torch.nn.Module) -> None:
    """Give every BatchNorm non-trivial running statistics, as a trained model has."""
    generator = torch.Generator().manual_seed(3)
    for layer in module.modules():
        if isinstance(layer, torch.nn.BatchNorm1d):
            layer.running_mean.copy_(torch.randn(layer.running_mean.shape, generator=generator))
            layer.running_var.copy_(torch.rand(layer.running_var.shape, generator=generator) + 0.5)


def test_batched_fbank_matches_torchaudio_kaldi_per_utterance():
    generator = torch.Generator().manual_seed(0)
    lengths = [16000, 12345, 401, 400]
    wavs = torch.randn(len(lengths), 16000, generator=generator) * 0.1
    feats, frames = KaldiFbank(16000, 80)(wavs, torch.tensor(lengths))
    for row, length in enumerate(lengths):
        reference = kaldi.fbank(wavs[row:row + 1, :length] * 32768, num_mel_bins=80, sample_frequency=16000,
                                dither=0.0)
        assert frames[row] == reference.shape[0]
        torch.testing.assert_close(feats[row, :frames[row]], reference, rtol=1e-5, atol=1e-3)


def fft_fbank(fbank: KaldiFbank, wavs: torch.Tensor) -> torch.Tensor:
    """The fbank as computed before the real DFT: torch.fft.rfft of the windowed frames."""
    frames = (wavs * 32768).unfold(1, fbank.window_size, fbank.window_shift)
    frames = frames - frames.mean(dim=-1, keepdim=True)
    previous = torch.cat([frames[..., :1], frames[..., :-1]], dim=-1)
    window = torch.hann_window(fbank.window_size, periodic=False, dtype=torch.float64).pow(0.85).float()
    power = torch.fft.rfft((frames - fbank.preemphasis * previous) * window, n=fbank.fft_size).abs().pow(2)
    return (power @ fbank.mel_banks).clamp(min=torch.finfo(torch.float32).eps).log()


def test_real_dft_fbank_matches_the_fft_fbank_within_2e_3_and_is_as_accurate():
    generator = torch.Generator().manual_seed(1)
    t = torch.arange(32000) / 16000
    wavs = torch.stack([
        torch.randn(32000, generator=generator) * 0.1,  # noise
        0.3 * torch.sin(2 * torch.pi * 150 * t) + 1e-5 * torch.randn(32000, generator=generator),  # 100 dB range
        torch.randn(32000, generator=generator) * 1e-4,  # quiet
        torch.zeros(32000),  # digital silence: every band at the floor
    ])
    fbank = KaldiFbank(16000, 80)
    feats, _ = fbank(wavs, torch.full((4,), 32000))
    fft = fft_fbank(fbank, wavs)
    torch.testing.assert_close(feats, fft, rtol=0, atol=2e-3)  # measured: 1.2e-3 on the tone, 2.5e-4 on noise
    for row in range(len(wavs)):  # float32 rounding of either kind: as close to a float64 Kaldi fbank
        exact = kaldi.fbank(wavs[row:row + 1].double() * 32768, num_mel_bins=80, sample_frequency=16000,
                            dither=0.0).float()
        assert (feats[row] - exact).abs().mean() <= 1.1 * (fft[row] - exact).abs().mean() + 1e-7


def test_fbank_has_no_complex_operations():
    traced = torch.fx.experimental.proxy_tensor.make_fx(KaldiFbank(16000, 80))(torch.randn(2, 4000),
                                                                                torch.tensor([4000, 3000]))
    dtypes = {node.meta["val"].dtype for node in traced.graph.nodes if isinstance(node.meta.get("val"), torch.Tensor)}
    assert dtypes and not any(dtype.is_complex for dtype in dtypes)
    assert not any("fft" in str(node.target) for node in traced.graph.nodes)


def test_encoder_output_shape_and_head_loss():
    encoder = SpeakerEncoder(**TINY)
    embeddings = encoder(torch.randn(3, 8000) * 0.1)
    assert embeddings.shape == (3, 24)
    head = AAMSoftmaxHead(24, n_speakers=5)
    labels = torch.tensor([0, 3, 4])
    loss, cosines = head(embeddings, labels)
    assert cosines.shape == (3, 5) and bool((cosines.abs() <= 1 + 1e-6).all())
    # The margin makes the loss larger than plain scaled-cosine cross-entropy.
    plain = torch.nn.functional.cross_entropy(30.0 * cosines, labels)
    assert loss.item() > plain.item()
    loss.backward()
    assert head.weight.grad is not None


def test_padding_does_not_change_embeddings():
    torch.manual_seed(0)
    encoder = SpeakerEncoder(**TINY).eval()
    random_batch_norm_statistics(encoder)
    lengths = [24000, 16000, 9000, 3000, 500]
    generator = torch.Generator().manual_seed(1)
    wavs = [torch.randn(n, generator=generator) * 0.1 for n in lengths]
    padded_length = max(lengths) + 777
    batch = torch.zeros(len(lengths), padded_length)
    for row, wav in enumerate(wavs):
        batch[row, :len(wav)] = wav
    wav_lens = torch.tensor(lengths, dtype=torch.float64) / padded_length
    with torch.no_grad():
        together = encoder(batch, wav_lens)
        for row, wav in enumerate(wavs):
            alone = encoder(wav[None])[0]
            torch.testing.assert_close(together[row], alone, rtol=0, atol=1e-5)


def test_naive_padding_would_change_embeddings():
    """The reflect-fill is needed: SpeechBrain's forward with lengths alone sees the padding."""
    torch.manual_seed(0)
    encoder = SpeakerEncoder(**TINY).eval()
    random_batch_norm_statistics(encoder)
    wav = torch.randn(9000) * 0.1
    batch = torch.zeros(2, 16000)
    batch[0], batch[1, :9000] = torch.randn(16000) * 0.1, wav
    with torch.no_grad():
        feats, frames = encoder.fbank(batch, torch.tensor([16000, 9000]))
        naive = encoder.ecapa(normalise_mean(feats, frames), frames / feats.shape[1]).squeeze(1)[1]
        alone = encoder(wav[None])[0]
    assert (naive - alone).abs().max() > 1e-3


def test_too_short_utterance_is_an_error():
    with pytest.raises(ValueError, match="400 samples"):
        SpeakerEncoder(**TINY)(torch.zeros(2, 8000), torch.tensor([1.0, 0.01]))


@pytest.mark.parametrize("change, message", [
    (dict(kernel_sizes=[5, 3, 3, 4, 1]), "odd"),
    (dict(channels=[32, 30, 32, 32, 96]), "res2net_scale"),
    (dict(dilations=[1, 2, 1]), "same length"),
])
def test_bad_architecture_is_a_clear_error(change, message):
    with pytest.raises(VpevalError, match=message):
        SpeakerEncoder(**{**TINY, **change})


@pytest.mark.gpu
def test_bf16_autocast_on_cuda_stays_close_to_fp32():
    encoder = SpeakerEncoder(**TINY).cuda().eval()
    wavs = torch.randn(4, 16000, device="cuda") * 0.1
    with torch.no_grad():
        reference = encoder(wavs)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            fast = encoder(wavs)
    cosine = torch.nn.functional.cosine_similarity(reference, fast.float())
    assert bool((cosine > 0.99).all())

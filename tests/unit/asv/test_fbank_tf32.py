"""The fbank's real-DFT product where float32 matrix products run in TF32 (CUDA after SpeechBrain's
import): split into three TF32 products, it keeps float32's accuracy. TF32 is emulated on CPU
(operands rounded to 10-bit mantissas, exact products), through the fbank's own code path."""
from __future__ import annotations

import functools
import importlib
import subprocess
import sys

import pytest
import torch
import torchaudio.compliance.kaldi as kaldi

from pipeline.asv import features
from pipeline.asv.features import KaldiFbank, tf32_proof_matmul, to_tf32

RATE = 16000


def emulated_tf32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A float32 product as TF32 tensor cores compute it: operands rounded, products exact."""
    return (to_tf32(a).double() @ to_tf32(b).double()).float()


def wide_range() -> torch.Tensor:
    """A tone with noise 100 dB below it, noise, and a quiet stretch: where the DFT cancels most."""
    generator = torch.Generator().manual_seed(3)
    t = torch.arange(2 * RATE) / RATE
    tone = 0.3 * torch.sin(2 * torch.pi * 150 * t) + 1e-5 * torch.randn(2 * RATE, generator=generator)
    return torch.stack([tone, torch.randn(2 * RATE, generator=generator) * 0.1,
                        torch.randn(2 * RATE, generator=generator) * 1e-4])


def fbank_with(monkeypatch, product) -> torch.Tensor:
    """The fbank's features with the CUDA-with-TF32 branch taken and `product` for its DFT."""
    with monkeypatch.context() as patch:
        patch.setattr(features, "tf32_matmuls", lambda x: True)
        patch.setattr(features, "tf32_proof_matmul", product)
        return KaldiFbank(RATE, 80)(wide_range(), torch.full((3,), 2 * RATE))[0]


def errors(feats: torch.Tensor) -> torch.Tensor:
    """|feats - a float64 Kaldi fbank| of `wide_range`."""
    wavs = wide_range()
    exact = [kaldi.fbank(wavs[row:row + 1].double() * 32768, num_mel_bins=80, sample_frequency=RATE,
                         dither=0.0).float() for row in range(len(wavs))]
    return (feats - torch.stack(exact)).abs()


def test_split_product_keeps_float32_accuracy_where_one_tf32_product_loses_it(monkeypatch):
    """Against a float64 Kaldi fbank (measured: mean 9.7e-5, max 6e-3 for both float32 and the
    split in TF32; one TF32 product: mean 6e-2, max 2.2, i.e. 9.6 dB)."""
    float32 = errors(KaldiFbank(RATE, 80)(wide_range(), torch.full((3,), 2 * RATE))[0])  # one product (CPU)
    split = errors(fbank_with(monkeypatch, functools.partial(tf32_proof_matmul, matmul=emulated_tf32)))
    single = errors(fbank_with(monkeypatch, emulated_tf32))
    assert split.mean() <= 1.1 * float32.mean() and split.max() <= 1.1 * float32.max()
    assert single.mean() > 100 * float32.mean() and single.max() > 1.0


def test_split_branch_on_cpu_is_as_accurate_as_the_one_product(monkeypatch):
    """The torch operations CUDA runs (bit rounding, three products), here without TF32."""
    float32 = errors(KaldiFbank(RATE, 80)(wide_range(), torch.full((3,), 2 * RATE))[0])
    split = errors(fbank_with(monkeypatch, tf32_proof_matmul))
    assert split.mean() <= 1.1 * float32.mean() and split.max() <= 1.1 * float32.max()


def test_split_branch_compiles_without_graph_breaks(monkeypatch):
    monkeypatch.setattr(features, "tf32_matmuls", lambda x: True)  # the branch CUDA takes under TF32
    torch._dynamo.reset()
    fbank, wavs, lengths = KaldiFbank(RATE, 80), torch.randn(2, 8000) * 0.1, torch.tensor([8000, 6000])
    explanation = torch._dynamo.explain(fbank)(wavs, lengths)
    assert explanation.graph_break_count == 0, [reason.reason for reason in explanation.break_reasons]
    torch._dynamo.reset()
    compiled = torch.compile(fbank, fullgraph=True)(wavs, lengths)[0]  # Inductor generates the bit rounding
    torch.testing.assert_close(compiled, fbank(wavs, lengths)[0], rtol=0, atol=1e-3)


def test_tf32_branch_only_on_cuda_with_tf32_allowed():
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        for allowed in (True, False):
            torch.backends.cuda.matmul.allow_tf32 = allowed
            assert not features.tf32_matmuls(torch.zeros(2))  # a CPU tensor: never
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_importing_speechbrain_allows_tf32_matmuls():
    """Why the split exists: SpeechBrain's import turns TF32 on for the whole process."""
    code = ("import torch; before = torch.backends.cuda.matmul.allow_tf32; import pipeline.asv.model; "
            "print(before, torch.backends.cuda.matmul.allow_tf32)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fbank_with_tf32_on_is_as_accurate_as_the_cpu_fbank():
    importlib.import_module("speechbrain")  # its import allows TF32, as in every vpeval run
    assert torch.backends.cuda.matmul.allow_tf32
    fbank, wavs, lengths = KaldiFbank(RATE, 80), wide_range(), torch.full((3,), 2 * RATE)
    on_cpu = errors(fbank(wavs, lengths)[0])
    on_cuda = errors(fbank.cuda()(wavs.cuda(), lengths.cuda())[0].cpu())
    assert on_cuda.mean() <= 2 * on_cpu.mean() and on_cuda.max() < 0.05  # one TF32 product: 6e-2, 2.2

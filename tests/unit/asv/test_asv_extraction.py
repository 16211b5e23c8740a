"""Extraction keeps the GPU fed: fixed padded-length buckets, decoded-cache audio, no host sync."""
import numpy as np
import pytest
import torch

from pipeline.asv import audio_cache as audio_cache_module
from pipeline.asv import embed as embed_module
from pipeline.asv.embed import Embed, _embed_batches, bucket_length, embed_utterances, length_buckets
from pipeline.asv.model import SpeakerEncoder

TINY = dict(channels=[16, 16, 48], kernel_sizes=[5, 3, 1], dilations=[1, 2, 1], attention_channels=8,
            se_channels=8, embedding_dim=12, res2net_scale=4)

pytestmark = pytest.mark.usefixtures("single_thread")


def test_bucket_lengths_are_a_small_fixed_set_with_little_padding():
    samples = np.arange(1, 35 * 16000, 37)
    lengths = np.array([bucket_length(int(n), 160) for n in samples])
    assert (lengths >= samples).all() and (lengths % 160 == 0).all()
    assert len(set(lengths.tolist())) < 50
    speech = samples >= 64 * 160
    assert (lengths[speech] / samples[speech]).max() <= 1.1


def test_batches_are_padded_to_bucket_lengths(corpus, monkeypatch):
    encoder = SpeakerEncoder(**TINY)
    shapes = []
    real = SpeakerEncoder.embed_samples
    monkeypatch.setattr(SpeakerEncoder, "embed_samples",
                        lambda self, wavs, n: shapes.append(wavs.shape[1]) or real(self, wavs, n))
    embed_utterances(encoder, corpus[1], batch_seconds=3, progress=False)
    assert len(shapes) > 3
    assert all(bucket_length(length, 160) == length for length in shapes)


def test_decoded_cache_gives_the_same_embeddings_and_is_reused(corpus, tmp_path, monkeypatch):
    torch.manual_seed(0)
    encoder = SpeakerEncoder(**TINY)
    val = corpus[1]
    _, decoded = embed_utterances(encoder, val, batch_seconds=5, progress=False)
    _, cached = embed_utterances(encoder, val, batch_seconds=5, progress=False, audio_cache=tmp_path)
    np.testing.assert_allclose(cached, decoded, rtol=0, atol=1e-5 * np.abs(decoded).max())
    assert len(list(tmp_path.iterdir())) == 1

    def no_decoding(*args, **kwargs):
        raise AssertionError("audio decoded again")

    monkeypatch.setattr(embed_module, "read_audio", no_decoding)
    monkeypatch.setattr(audio_cache_module, "read_audio", no_decoding)
    _, again = embed_utterances(encoder, val, batch_seconds=5, progress=False, audio_cache=tmp_path)
    np.testing.assert_array_equal(again, cached)


def test_no_host_sync_per_batch(corpus):
    """On the meta device any host sync (`.item()`, `bool(tensor)`, `.cpu()`) raises: the whole
    batch loop runs there, so it never waits for the device."""
    encoder = SpeakerEncoder(**TINY).to("meta").eval()
    val = corpus[1]
    batches = length_buckets([utt.duration for utt in val], 3.0)
    embeddings = _embed_batches(Embed(encoder, None), val, batches, torch.device("meta"), None, 1, None, False, 3.0)
    assert embeddings.device.type == "meta" and embeddings.shape == (len(val), 12)


@pytest.mark.gpu
def test_extraction_batches_do_not_sync_on_cuda(corpus):
    encoder = SpeakerEncoder(**TINY).cuda().eval()
    val = corpus[1]
    batches = length_buckets([utt.duration for utt in val], 3.0)
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call raises
    try:
        embeddings = _embed_batches(Embed(encoder, None), val, batches, torch.device("cuda"), torch.bfloat16, 2, None,
                                    False, 3.0)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    _, reference = embed_utterances(encoder.cpu(), val, progress=False)
    cosine = torch.nn.functional.cosine_similarity(embeddings.cpu(), torch.from_numpy(reference))
    assert bool((cosine > 0.99).all())


def test_compiled_extraction_equals_eager_and_compiles_once_for_every_batch_shape(corpus):
    """attacker.extraction.compile: one dynamic-shape graph for the buckets' lengths and batch
    sizes (a graph per shape would recompile dozens of times on a real corpus)."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    encoder = SpeakerEncoder(**TINY).eval()
    val = corpus[1]
    _, eager = embed_utterances(encoder, val, batch_seconds=3, progress=False)
    torch._dynamo.reset()
    counters.clear()
    shapes = {(len(b), bucket_length(int(max(val[i].duration for i in b) * 16000), 160))
              for b in length_buckets([utt.duration for utt in val], 3.0)}
    _, compiled = embed_utterances(encoder, val, batch_seconds=3, progress=False, compile=True)
    assert len(shapes) > 3
    graphs = counters["stats"]["unique_graphs"]
    assert 1 <= graphs <= 2, counters["stats"]  # the first shape's graph, then a dynamic one
    np.testing.assert_allclose(compiled, eager, rtol=0, atol=1e-5 * np.abs(eager).max())
    # every extract stage loads its own encoder: another one (other weights) reuses the graphs
    other = SpeakerEncoder(**TINY).eval()
    _, other_eager = embed_utterances(other, val, batch_seconds=3, progress=False)
    _, other_compiled = embed_utterances(other, val, batch_seconds=3, progress=False, compile=True)
    assert counters["stats"]["unique_graphs"] == graphs
    np.testing.assert_allclose(other_compiled, other_eager, rtol=0, atol=1e-5 * np.abs(other_eager).max())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_extraction_under_cuda_graphs_keeps_each_batch_output(corpus):
    """reduce-overhead replays one CUDA graph per shape into the same output buffer: two
    batches of one shape (an out-of-memory split's halves) must both survive."""
    torch.manual_seed(0)
    encoder = SpeakerEncoder(**TINY).cuda().eval()
    wavs = torch.randn(4, 32000, device="cuda") * 0.1
    lengths = torch.tensor([32000, 30000, 31000, 29000], device="cuda")
    embed = Embed(encoder, "reduce-overhead")
    with torch.inference_mode():
        eager = encoder.embed_samples(wavs, lengths)
        outputs = [embed(wavs[rows], lengths[rows]) for rows in (slice(0, 2), slice(2, 4)) for _ in range(3)]

    def same(a, b):  # TF32 convolutions on CUDA: equal directions, not equal bits
        return bool((torch.nn.functional.cosine_similarity(a.float(), b.float()) > 0.9999).all())

    assert same(torch.cat([outputs[2], outputs[5]]), eager)
    assert same(outputs[0], eager[:2])  # not overwritten by the later runs of its graph
    _, on_cpu = embed_utterances(encoder.cpu(), corpus[1], batch_seconds=3, progress=False)
    _, compiled = embed_utterances(encoder.cuda(), corpus[1], batch_seconds=3, progress=False,
                                   compile="reduce-overhead")
    assert same(torch.from_numpy(compiled), torch.from_numpy(on_cpu))


def test_a_compile_failure_in_extraction_is_one_line(corpus, monkeypatch):
    from pipeline.core.errors import VpevalError

    def failing_backend(graph, example_inputs):
        raise RuntimeError("no kernel for this")

    real_compile = torch.compile
    monkeypatch.setattr(embed_module.torch, "compile",
                        lambda function, dynamic, mode: real_compile(function, dynamic=dynamic, backend=failing_backend))
    torch._dynamo.reset()
    with pytest.raises(VpevalError, match=r"^attacker\.extraction\.compile=default: torch\.compile failed "
                                          r"\(.*no kernel for this.*\); set attacker\.extraction\.compile=false$"):
        embed_utterances(SpeakerEncoder(**TINY).eval(), corpus[1], batch_seconds=3, progress=False, compile=True)


def test_a_batch_that_does_not_fit_memory_is_embedded_in_halves(corpus, monkeypatch, caplog):
    """Issue 36: an out-of-memory batch is split (down to one utterance), with the same embeddings."""
    torch.manual_seed(0)
    encoder = SpeakerEncoder(**TINY)
    val = corpus[1]
    _, whole = embed_utterances(encoder, val, batch_seconds=30, progress=False)
    real, sizes = SpeakerEncoder.embed_samples, []

    def small_memory(self, wavs, lengths):
        sizes.append(len(wavs))
        if len(wavs) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(self, wavs, lengths)
    monkeypatch.setattr(SpeakerEncoder, "embed_samples", small_memory)
    _, split = embed_utterances(encoder, val, batch_seconds=30, progress=False)
    np.testing.assert_allclose(split, whole, rtol=0, atol=1e-5 * np.abs(whole).max())
    assert max(sizes) > 2 and "embedded in halves" in caplog.text

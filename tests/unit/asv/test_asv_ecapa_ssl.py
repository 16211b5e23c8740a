"""attacker=ecapa_ssl: VPC 2026's parameter layout, both WavLM formats, fusion, frozen WavLM, bad checkpoints."""
from pathlib import Path

import pytest
import torch
from speechbrain.lobes.models.ECAPA_TDNN import ECAPA_TDNN, SERes2NetBlock
from transformers import WavLMModel

from pipeline.asv.ecapa_ssl import FusedECAPA, SSLSpeakerEncoder, resampling_matrix, vpc_fbank_input
from pipeline.asv.encoder import check_encoder
from pipeline.asv.wavlm import layer_outputs, load_wavlm
from pipeline.core.errors import VpevalError
from tests.helpers import wavlm_hf_folder, wavlm_microsoft_file

VPC = dict(channels=[1024, 1024, 1024, 1024, 3072], kernel_sizes=[5, 3, 3, 3, 1], dilations=[1, 2, 3, 4, 1],
           attention_channels=128, res2net_scale=8, se_channels=128, global_context=True, embedding_dim=192)
TINY = dict(channels=[32, 32, 32, 32, 96], kernel_sizes=[5, 3, 3, 3, 1], dilations=[1, 2, 3, 4, 1],
            attention_channels=16, res2net_scale=4, se_channels=16, global_context=True, embedding_dim=24)


def vpc_layout(sizes: dict, layers: int) -> dict:
    """Names and shapes of VPC's ECAPA_TDNN_test, rebuilt from its description: SpeechBrain's
    ECAPA_TDNN (blocks, mfa, asp, asp_bn, fc), one C->C SE-Res2Net block per ECAPA block
    (blocks_features) and the layer weights."""
    c, k, d = sizes["channels"], sizes["kernel_sizes"], sizes["dilations"]
    ecapa = ECAPA_TDNN(80, lin_neurons=sizes["embedding_dim"], channels=c, kernel_sizes=k, dilations=d,
                       attention_channels=sizes["attention_channels"], res2net_scale=sizes["res2net_scale"],
                       se_channels=sizes["se_channels"])
    layout = {name: tuple(t.shape) for name, t in ecapa.state_dict().items()}
    for i in range(len(c) - 1):
        block = SERes2NetBlock(c[i], c[i], res2net_scale=sizes["res2net_scale"], se_channels=sizes["se_channels"],
                               kernel_size=k[i], dilation=d[i])
        layout |= {f"blocks_features.{i}.{name}": tuple(t.shape) for name, t in block.state_dict().items()}
    return layout | {"weighted_sum.layer_weights": (layers,)}


def fused(sizes: dict, layers: int) -> FusedECAPA:
    return FusedECAPA(input_size=80, wavlm_layers=layers, dropout=0.3, **{k: v for k, v in sizes.items()
                                                                          if k != "global_context"},
                      global_context=True)


def test_vpc_sizes_have_vpc_names_shapes_and_count():
    ours = {name: tuple(t.shape) for name, t in fused(VPC, 24).state_dict().items()}
    expected = vpc_layout(VPC, 24)
    assert ours == expected
    count = sum(p.numel() for p in fused(VPC, 24).parameters())
    assert count == sum(torch.Size(s).numel() for n, s in expected.items() if "running_" not in n
                        and "num_batches" not in n)


@pytest.fixture(scope="module")
def wavlm_files(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("wavlm")
    hf = wavlm_hf_folder(folder / "hf")
    return hf, wavlm_microsoft_file(folder / "WavLM-Tiny.pt", hf)


def speech(seconds: float, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    t = torch.arange(int(seconds * 16000)) / 16000
    return 0.3 * torch.sin(2 * torch.pi * (120 + 40 * seed) * t) + 0.05 * torch.randn(len(t), generator=generator)


def test_both_wavlm_formats_give_the_same_layers(wavlm_files):
    hf, pt = wavlm_files
    wavs = torch.stack([speech(1.0, 0), speech(1.0, 1)])
    with torch.inference_mode():
        from_folder, from_file = layer_outputs(load_wavlm(hf), wavs), layer_outputs(load_wavlm(pt), wavs)
        reference_model = WavLMModel.from_pretrained(hf).eval()
        reference = reference_model(wavs, output_hidden_states=True)
        last_normalised = reference_model.encoder.layer_norm(from_folder[1])
    assert from_folder.shape == (2, 2, 49, 32)
    torch.testing.assert_close(from_file, from_folder, rtol=0, atol=1e-6)
    # every layer's own output: the first ones as transformers returns them, the last before the final norm
    torch.testing.assert_close(from_folder[0], reference.hidden_states[1])
    torch.testing.assert_close(reference.last_hidden_state, last_normalised)


def test_a_half_precision_folder_loads_as_float32_with_every_weight(tmp_path, wavlm_files):
    """The model is built on the meta device and given the file's tensors (no random
    initialisation): each must arrive, in the model's float32, whatever the file's dtype."""
    WavLMModel.from_pretrained(wavlm_files[0]).half().save_pretrained(tmp_path / "half")
    loaded, reference = load_wavlm(tmp_path / "half"), WavLMModel.from_pretrained(tmp_path / "half")
    state = loaded.state_dict()
    assert all(not t.is_meta and t.dtype == torch.float32 for t in state.values())
    for name, tensor in reference.state_dict().items():
        torch.testing.assert_close(state[name], tensor.float(), rtol=0, atol=0, msg=name)


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")  # transformers' own attention
@pytest.mark.parametrize("layout", ["large", "base"])
@pytest.mark.parametrize("padded", [False, True])
def test_layer_outputs_are_transformers_hidden_states(tmp_path, layout, padded):
    """`layer_outputs` walks WavLMModel's submodules itself (no output-capturing hooks): every
    layer's output equals what transformers' own forward collects, bit for bit, for a pre-norm
    (Large: the last layer before the final norm) and a post-norm (Base: group-norm CNN) WavLM."""
    sizes = {} if layout == "large" else dict(do_stable_layer_norm=False, feat_extract_norm="group")
    folder = wavlm_hf_folder(tmp_path / layout, num_hidden_layers=3, **sizes)
    wavs = torch.stack([speech(1.3, 0), speech(1.3, 1)])
    mask = torch.ones_like(wavs, dtype=torch.long)
    if padded:
        mask[1, 12000:] = 0
    model = load_wavlm(folder, sdpa=False)
    with torch.inference_mode():
        ours = layer_outputs(model, wavs, mask if padded else None)
        reference = model(wavs, attention_mask=mask if padded else None, output_hidden_states=True)
        last = model.encoder.layer_norm(ours[-1]) if layout == "large" else ours[-1]
    assert ours.shape == (3, 2, 64, 32) and len(reference.hidden_states) == 4  # the input of layer 0, then 3 outputs
    torch.testing.assert_close(ours, torch.stack(reference.hidden_states[1:]), rtol=0, atol=0)
    torch.testing.assert_close(last, reference.last_hidden_state, rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")  # transformers
def test_the_wavlm_forward_compiles_as_one_graph(wavlm_files):
    """The WavLM forward alone, with and without a padding mask, is one graph for torch.compile
    (the training forward's own test is below)."""
    model = load_wavlm(wavlm_files[0])
    wavs, mask = torch.stack([speech(1.0, 0), speech(1.0, 1)]), torch.ones(2, 16000, dtype=torch.long)
    mask[1, 9000:] = 0
    for attention_mask in (None, mask):
        torch._dynamo.reset()
        with torch.inference_mode():
            explanation = torch._dynamo.explain(layer_outputs)(model, wavs, attention_mask)
        assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), \
            [reason.reason for reason in explanation.break_reasons]


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
@pytest.mark.parametrize("padded", [False, True])
def test_sdpa_attention_equals_transformers(wavlm_files, padded):
    """WavLM's attention through SDPA (the default) against transformers' own
    `F.multi_head_attention_forward` path: every layer within 1e-5 in float32, with and without
    a padding mask (the masked frames of the shorter utterance are not compared)."""
    wavs = torch.stack([speech(1.3, 0), speech(1.3, 1)])
    mask = torch.ones_like(wavs, dtype=torch.long)
    if padded:
        mask[1, 12000:] = 0
        wavs[1, 12000:] = 0
    with torch.inference_mode():
        reference = layer_outputs(load_wavlm(wavlm_files[0], sdpa=False), wavs, mask if padded else None)
        sdpa = layer_outputs(load_wavlm(wavlm_files[0]), wavs, mask if padded else None)
    frames = load_wavlm(wavlm_files[0])._get_feat_extract_output_lengths(12000) if padded else sdpa.shape[2]
    torch.testing.assert_close(sdpa[:, 0], reference[:, 0], rtol=0, atol=1e-5)
    torch.testing.assert_close(sdpa[:, 1, :frames], reference[:, 1, :frames], rtol=0, atol=1e-5)


def encoder(wavlm: Path, **changes) -> SSLSpeakerEncoder:
    torch.manual_seed(0)
    return SSLSpeakerEncoder(wavlm=str(wavlm), wavlm_layers=2, wavlm_seconds=1.5, **{**TINY, **changes}).eval()


def test_both_formats_give_the_same_embeddings(wavlm_files):
    hf, pt = wavlm_files
    wavs = torch.stack([speech(1.2, 2), speech(1.2, 3)])
    with torch.inference_mode():
        torch.testing.assert_close(encoder(pt)(wavs), encoder(hf)(wavs), rtol=0, atol=1e-5)


def with_zeros(wav: torch.Tensor, before: int, after: int) -> torch.Tensor:
    return torch.cat([torch.zeros(before), wav, torch.zeros(after)])


def test_an_utterance_embeds_the_same_alone_or_in_a_ragged_batch(wavlm_files):
    model = encoder(wavlm_files[0])
    # longer and shorter than wavlm_seconds (no longer a bound at extraction), some with zeros to trim
    utts = [speech(2.0, 4), with_zeros(speech(0.7, 5), 800, 3000), speech(1.1, 6), with_zeros(speech(3.1, 7), 0, 17)]
    padded = torch.nn.utils.rnn.pad_sequence(utts, batch_first=True)
    lengths = torch.tensor([len(u) for u in utts])
    with torch.inference_mode():
        batch = model.embed_samples(padded, lengths)
        alone = torch.cat([model(u[None]) for u in utts])
    torch.testing.assert_close(batch, alone, rtol=1e-4, atol=1e-4)


def test_extraction_sees_whole_utterances_trimmed_for_fbank_only(wavlm_files):
    """VPC's evaluation: fbank on the peak-normalised, zero-trimmed utterance; WavLM on all of it."""
    model = encoder(wavlm_files[0])
    wav = speech(2.5, 3)  # longer than the 1.5 s training context: WavLM sees all of it
    padded = with_zeros(wav, 1600, 2400)
    with torch.inference_mode():
        whole = model(padded[None])
        frames = model.wavlm_layers(padded[None], torch.tensor([len(padded)]))[1]
        layers = model.wavlm_layers(torch.nn.functional.layer_norm(padded, padded.shape)[None],
                                    torch.tensor([len(padded)]))
        by_hand = model._embed(wav[None] / wav.abs().max(), torch.tensor([len(wav)]), layers, ragged=False)
        cut = model(with_zeros(wav[:24000], 1600, 2400)[None])
    assert int(frames) == model.wavlm._get_feat_extract_output_lengths(len(padded))
    torch.testing.assert_close(whole, by_hand, rtol=1e-5, atol=1e-5)
    assert torch.nn.functional.cosine_similarity(whole, cut).item() < 0.9999  # the last second counts


def test_vpc_fbank_input_peak_normalises_and_trims_exact_zeros():
    wavs = torch.tensor([[0.0, 0.0, 0.25, 0.0, -0.5, 0.0, 0.0], [0.1, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0]])
    trimmed, counts = vpc_fbank_input(wavs, torch.tensor([7, 3]))
    assert counts.tolist() == [3, 2]
    assert trimmed.tolist() == [[0.5, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0], [0.5, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]]


def test_training_forward_gives_wavlm_the_context_not_the_crop(wavlm_files):
    model = encoder(wavlm_files[0])
    crops = torch.stack([speech(1.0, 1), speech(1.0, 2)])
    contexts = torch.stack([speech(1.5, 3), speech(1.5, 4)])
    with torch.inference_mode():
        trained = model(crops, context=contexts)
        layers = model.wavlm_layers(contexts, torch.tensor([24000, 24000]))
        by_hand = model._embed(crops, torch.tensor([16000, 16000]), layers, ragged=False)
        other = model(crops, context=torch.stack([speech(1.5, 5), speech(1.5, 6)]))
    torch.testing.assert_close(trained, by_hand, rtol=0, atol=0)
    assert not torch.allclose(trained, other, atol=1e-3)


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")  # transformers
def test_the_training_forward_has_no_data_dependent_branch(wavlm_files):
    """Regression (the H200 profile of 2026-11-29: the GPU idle a third of each ecapa_ssl step):
    the training forward asked the device whether the full-length contexts were ragged, a wait
    for the GPU every step; traced, such a question is a graph break on `Tensor.item()`. And the
    frozen WavLM under inference mode (`is_inference_mode_enabled`), transformers' output
    capturing, a forward hook and a warnings filter made it six graphs with WavLM's forward run
    eagerly: one graph now, what CUDA graphs capture whole."""
    model = encoder(wavlm_files[0]).train()
    crops, contexts = torch.stack([speech(1.0, 1), speech(1.0, 2)]), torch.stack([speech(1.5, 3), speech(1.5, 4)])
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(model)(crops, context=contexts)
    assert explanation.graph_break_count == 0, [reason.reason for reason in explanation.break_reasons]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_training_step_does_not_sync_on_cuda(wavlm_files):
    model = encoder(wavlm_files[0]).cuda().train()
    crops = torch.stack([speech(1.0, 1), speech(1.0, 2)]).cuda()
    contexts = torch.stack([speech(1.5, 3), speech(1.5, 4)]).cuda()
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call raises
    try:
        model(crops, context=contexts).sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_training_with_cuda_graphs_learns(wavlm_files, corpus, tmp_path):
    """The whole ecapa_ssl step, frozen WavLM included, under torch.compile + CUDA graphs."""
    import json
    import math

    from pipeline.asv.train import train_attacker
    from tests.helpers import typed_attacker

    cfg = typed_attacker("ecapa_ssl_tiny", (f"attacker.model.wavlm={wavlm_files[0]}", "attacker.model.wavlm_seconds=1.5",
                                            "attacker.training.compile=reduce-overhead",
                                            "attacker.training.precision=bf16", "attacker.training.batch_size=8",
                                            "attacker.training.epochs=3"))
    out = train_attacker(cfg, corpus[0], tmp_path, device="cuda", seed=1, validate=lambda encoder: 0.5)
    log = [json.loads(line) for line in (out / "training_log.jsonl").read_text().splitlines()]
    assert all(math.isfinite(record["loss"]) for record in log) and log[-1]["loss"] < log[0]["loss"]


def test_wavlm_runs_float32_under_autocast_unless_asked(wavlm_files):
    seen = []
    for wavlm_autocast in (False, True):
        model = encoder(wavlm_files[0], wavlm_autocast=wavlm_autocast)
        handle = model.wavlm.encoder.layers[0].register_forward_hook(lambda m, a, out: seen.append(out[0].dtype))
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            model(speech(1.0, 2)[None])
        handle.remove()
    assert seen == [torch.float32, torch.bfloat16]


def test_an_utterance_over_max_seconds_is_refused_by_id_before_any_work(wavlm_files, tmp_path):
    from pipeline.asv.embed import embed_utterances
    from pipeline.data.manifest import Utterance

    model = encoder(wavlm_files[0], max_seconds=2.0)
    utts = [Utterance(id=f"u{i}", speaker="s", gender="f", path=str(tmp_path / f"missing{i}.flac"), duration=d)
            for i, d in enumerate([1.0, 2.5, 3.5])]
    with pytest.raises(VpevalError, match=r"missing2.flac: utterance 'u2' is 3.5 s, longer than the 2 s "
                                          r"attacker.model.max_seconds \(2 such utterances\)"):
        embed_utterances(model, utts, device="cpu")


def vpc_resample(x: torch.Tensor, n: int) -> torch.Tensor:
    """VPC's resample_tensor, re-written from its description with explicit loops."""
    t = x.shape[2]
    if t > n:
        sizes = [t // n] * (n - t % n) + [t // n + 1] * (t % n)
        starts = [sum(sizes[:i]) for i in range(n)]
        return torch.stack([x[:, :, s:s + w].mean(dim=2) for s, w in zip(starts, sizes)], dim=2)
    return torch.stack([x[:, :, j % t] for j in range(n)], dim=2)


@pytest.mark.parametrize("source, frames", [(499, 301), (499, 499), (499, 1001), (7, 3), (10, 4)])
def test_resampling_matches_vpc(source, frames):
    x = torch.randn(1, 3, source, dtype=torch.float64)
    matrix = resampling_matrix(torch.tensor([source]), torch.tensor([frames]), frames + 5, source).double()
    ours = torch.bmm(x, matrix.transpose(1, 2))
    torch.testing.assert_close(ours[:, :, :frames], vpc_resample(x, frames))
    assert not ours[:, :, frames:].any()


def test_vpc_checkpoint_loads_without_missing_or_unexpected_keys(wavlm_files, tmp_path):
    model = encoder(wavlm_files[1])
    generator = torch.Generator().manual_seed(1)
    state = {f"module.{name}": torch.randn(shape, generator=generator) if shape else torch.tensor(3)
             for name, shape in vpc_layout(TINY, 2).items()}
    torch.save(state, tmp_path / "embedding_model.ckpt")
    model.load_vpc_embedding_model(tmp_path / "embedding_model.ckpt")
    assert torch.equal(model.ecapa.weighted_sum.layer_weights, state["module.weighted_sum.layer_weights"])
    del state["module.fc.conv.bias"]
    torch.save(state, tmp_path / "partial.ckpt")
    with pytest.raises(VpevalError, match=r"partial.ckpt: embedding_model is from another architecture: 1 missing keys"):
        model.load_vpc_embedding_model(tmp_path / "partial.ckpt")


def test_wavlm_is_frozen_and_outside_parameters_and_state(wavlm_files):
    model = check_encoder(encoder(wavlm_files[0]), "test").train()
    assert not model.wavlm.training
    assert not any(name.startswith("wavlm") or "wavlm" in name for name in model.state_dict())
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in model.ecapa.parameters())
    before = {name: p.clone() for name, p in model.wavlm.named_parameters()}
    model(torch.stack([speech(1.0, 7), speech(1.0, 8)])).square().sum().backward()
    assert model.ecapa.weighted_sum.layer_weights.grad is not None and model.ecapa.blocks[0].conv.conv.weight.grad.any()
    assert all(p.grad is None and not p.requires_grad for p in model.wavlm.parameters())
    assert all(torch.equal(before[name], p) for name, p in model.wavlm.named_parameters())


def test_bf16_autocast_runs_and_stays_close_on_cpu(wavlm_files):
    model = encoder(wavlm_files[0])
    wavs = torch.stack([speech(1.0, 9), speech(1.0, 10)])
    with torch.inference_mode():
        reference = model(wavs)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(wavs)
    assert low.dtype == torch.bfloat16
    cosine = torch.nn.functional.cosine_similarity(low.float(), reference)
    assert bool((cosine > 0.99).all()), cosine


@pytest.mark.parametrize("problem, message", [
    ("size", r"WavLM-Tiny.pt: WavLM of hidden size 32 with 2 layers, but attacker.model needs channels\[0\]=64"),
    ("foreign", r"foreign.pt: model is from another architecture: .*1 unexpected keys \[decoder.weight\]"),
    ("shape", r"shape.pt: model is from another architecture: .*shape mismatches \[encoder.layer_norm.weight: "
              r"expected \(32,\) found \(31,\)\]"),
    ("not_wavlm", r"not_wavlm.pt: not a WavLM checkpoint \(a torch file with 'cfg' and 'model'"),
])
def test_bad_wavlm_checkpoints_are_one_line_naming_the_file(wavlm_files, tmp_path, problem, message):
    pt = wavlm_files[1]
    checkpoint = torch.load(pt)
    if problem == "foreign":
        checkpoint["model"]["decoder.weight"] = torch.zeros(3)
    elif problem == "shape":
        checkpoint["model"]["encoder.layer_norm.weight"] = torch.zeros(31)
    elif problem == "not_wavlm":
        checkpoint = checkpoint["model"]
    path = pt if problem == "size" else tmp_path / f"{problem}.pt"
    if problem != "size":
        torch.save(checkpoint, path)
    changes = {"channels": [64, 64, 64, 64, 192]} if problem == "size" else {}
    with pytest.raises(VpevalError, match=message) as error:
        encoder(path, **changes)
    assert "\n" not in str(error.value)


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")  # transformers
@pytest.mark.parametrize("training", [False, True])
def test_compiled_forward_and_backward_match_eager(wavlm_files, training):
    """torch.compile (AOT autograd, the graph Inductor would get) through the frozen WavLM, in
    the evaluation forward and in the training one (crops and WavLM contexts; traced into the
    graph, a WavLM under inference mode rather than no_grad fails there: "Cannot set
    version_counter for inference tensor")."""
    model = encoder(wavlm_files[0])
    wavs = torch.stack([speech(1.0, 11), speech(1.0, 12)])
    kwargs = {"context": torch.stack([speech(1.5, 13), speech(1.5, 14)])} if training else {}
    model(wavs, **kwargs).sum().backward()
    eager = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager")
    out = compiled(wavs, **kwargs)
    out.sum().backward()
    with torch.no_grad():
        torch.testing.assert_close(out, model(wavs, **kwargs), rtol=1e-4, atol=1e-4)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, eager[name], rtol=1e-3, atol=1e-4, msg=name)

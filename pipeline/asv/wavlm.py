"""A frozen WavLM loaded offline from a path, as transformers' `WavLMModel`, and its layer outputs.

Two formats load into the same model:

- Microsoft's checkpoint (`WavLM-Large.pt`, what VPC 2026 ships): a torch file holding `cfg`
  (WavLM's config dict) and `model` (a state dict in Microsoft's / fairseq's naming);
- a Hugging Face folder (`config.json` with `model_type: wavlm` and `model.safetensors` or
  `pytorch_model.bin`), as `WavLMModel.save_pretrained` writes it.

Attention runs through `torch.nn.functional.scaled_dot_product_attention` (`use_sdpa`), with
WavLM's gated relative position bias and the padding mask as its additive mask: the same
numbers as transformers' `F.multi_head_attention_forward` call (within 1e-5 in float32), without
materialising the averaged attention weights that call returns, and on CUDA by the fused
kernels that accept a mask.

`layer_outputs` returns what VPC's `WavLMFeatureExtractor` takes from Microsoft's
`extract_features(..., ret_layer_results=True)`: the output of every transformer layer
(layer 0, the input of the first, dropped), before the encoder's final layer norm.

>>> model = load_wavlm("exp/asv_ssl/WavLM-Large.pt")  # doctest: +SKIP
>>> layer_outputs(model, torch.zeros(2, 160000)).shape  # doctest: +SKIP
torch.Size([24, 2, 499, 1024])
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import torch
import torch.nn.functional as F

from pipeline.core.errors import VpevalError
from pipeline.runtime.checkpoint import load_checkpoint, load_state_checked

if TYPE_CHECKING:
    from transformers import WavLMConfig, WavLMModel


def wavlm_classes():
    """transformers' (WavLMConfig, WavLMModel), imported when a WavLM is built (transformers is an
    optional dependency: the `ssl` extra)."""
    try:
        from transformers import WavLMConfig, WavLMModel
    except ImportError:
        raise VpevalError("attacker.model.wavlm: a WavLM needs the transformers package: "
                          "pip install -c constraints.txt -e '.[ssl]'") from None
    return WavLMConfig, WavLMModel

# Microsoft WavLM config keys -> transformers WavLMConfig arguments
CONFIG_KEYS = {"encoder_layers": "num_hidden_layers", "encoder_embed_dim": "hidden_size",
               "encoder_ffn_embed_dim": "intermediate_size", "encoder_attention_heads": "num_attention_heads",
               "activation_fn": "hidden_act", "layer_norm_first": "do_stable_layer_norm", "conv_bias": "conv_bias",
               "conv_pos": "num_conv_pos_embeddings", "conv_pos_groups": "num_conv_pos_embedding_groups",
               "num_buckets": "num_buckets", "max_distance": "max_bucket_distance"}
# Microsoft's parameter names -> transformers' (regular expressions, applied in order, first match)
KEY_RULES = [
    (r"^mask_emb$", "masked_spec_embed"),
    (r"^feature_extractor\.conv_layers\.(\d+)\.0\.(weight|bias)$", r"feature_extractor.conv_layers.\1.conv.\2"),
    (r"^feature_extractor\.conv_layers\.(\d+)\.2\.1\.(weight|bias)$", r"feature_extractor.conv_layers.\1.layer_norm.\2"),
    (r"^feature_extractor\.conv_layers\.0\.2\.(weight|bias)$", r"feature_extractor.conv_layers.0.layer_norm.\1"),
    (r"^layer_norm\.(weight|bias)$", r"feature_projection.layer_norm.\1"),
    (r"^post_extract_proj\.(weight|bias)$", r"feature_projection.projection.\1"),
    (r"^encoder\.pos_conv\.0\.bias$", "encoder.pos_conv_embed.conv.bias"),
    (r"^encoder\.pos_conv\.0\.weight_g$", "encoder.pos_conv_embed.conv.parametrizations.weight.original0"),
    (r"^encoder\.pos_conv\.0\.weight_v$", "encoder.pos_conv_embed.conv.parametrizations.weight.original1"),
    (r"^encoder\.layer_norm\.(weight|bias)$", r"encoder.layer_norm.\1"),
    (r"^encoder\.layers\.(\d+)\.self_attn\.(q|k|v|out)_proj\.(weight|bias)$", r"encoder.layers.\1.attention.\2_proj.\3"),
    (r"^encoder\.layers\.(\d+)\.self_attn\.grep_linear\.(weight|bias)$",
     r"encoder.layers.\1.attention.gru_rel_pos_linear.\2"),
    (r"^encoder\.layers\.(\d+)\.self_attn\.grep_a$", r"encoder.layers.\1.attention.gru_rel_pos_const"),
    (r"^encoder\.layers\.(\d+)\.self_attn\.relative_attention_bias\.weight$",
     r"encoder.layers.\1.attention.rel_attn_embed.weight"),
    (r"^encoder\.layers\.(\d+)\.self_attn_layer_norm\.(weight|bias)$", r"encoder.layers.\1.layer_norm.\2"),
    (r"^encoder\.layers\.(\d+)\.fc1\.(weight|bias)$", r"encoder.layers.\1.feed_forward.intermediate_dense.\2"),
    (r"^encoder\.layers\.(\d+)\.fc2\.(weight|bias)$", r"encoder.layers.\1.feed_forward.output_dense.\2"),
    (r"^encoder\.layers\.(\d+)\.final_layer_norm\.(weight|bias)$", r"encoder.layers.\1.final_layer_norm.\2"),
]


def hf_config(cfg: Mapping[str, Any], path: Path) -> WavLMConfig:
    """transformers' WavLMConfig equal to a Microsoft WavLM `cfg` (refusing what it cannot express)."""
    if not cfg.get("relative_position_embedding", False) or not cfg.get("gru_rel_pos", False):
        raise VpevalError(f"{path}: cfg: WavLM without gated relative position embedding "
                          f"(relative_position_embedding, gru_rel_pos) is not supported")
    mode = cfg.get("extractor_mode", "default")
    if mode not in ("default", "layer_norm"):
        raise VpevalError(f"{path}: cfg.extractor_mode={mode!r}: must be default or layer_norm")
    try:
        conv = [tuple(int(v) for v in layer) for layer in _conv_layers(str(cfg["conv_feature_layers"]))]
    except (KeyError, ValueError, TypeError) as exc:
        raise VpevalError(f"{path}: cfg.conv_feature_layers unreadable ({exc})") from None
    arguments = {hf: cfg[ms] for ms, hf in CONFIG_KEYS.items() if ms in cfg}
    return wavlm_classes()[0](**arguments, feat_extract_norm="layer" if mode == "layer_norm" else "group",
                       conv_dim=[c[0] for c in conv], conv_kernel=[c[1] for c in conv], conv_stride=[c[2] for c in conv])


def _conv_layers(text: str) -> list:
    """The value of fairseq's `conv_feature_layers`, e.g. '[(512,10,5)] + [(512,3,2)] * 4', without eval."""
    layers: list = []
    for term in text.split("+"):
        match = re.fullmatch(r"\s*\[\s*\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)\s*\]\s*(?:\*\s*(\d+))?\s*", term)
        if not match:
            raise ValueError(f"unsupported term {term.strip()!r}")
        layers += [match.groups()[:3]] * int(match.group(4) or 1)
    return layers


def hf_key(name: str) -> str | None:
    """transformers' name of Microsoft's parameter `name` (None: not a WavLM parameter)."""
    for pattern, replacement in KEY_RULES:
        if re.match(pattern, name):
            return re.sub(pattern, replacement, name)
    return None


def sdpa_self_attention(attention, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None,
                        gated_position_bias: torch.Tensor) -> tuple[torch.Tensor, None]:
    """transformers' `WavLMAttention.torch_multi_head_self_attention` through SDPA: softmax(q k^T
    / sqrt(d) + gated position bias, -inf on padded keys) v, then the output projection."""
    batch, length, width = hidden_states.shape
    heads = attention.num_heads

    def split(x: torch.Tensor) -> torch.Tensor:
        return x.view(batch, length, heads, width // heads).transpose(1, 2)

    bias = gated_position_bias.view(batch, heads, length, length)
    if attention_mask is not None:
        bias = bias.masked_fill(~attention_mask.bool()[:, None, None, :], float("-inf"))
    query, key, value = (split(projection(hidden_states))
                         for projection in (attention.q_proj, attention.k_proj, attention.v_proj))
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=bias.to(query.dtype),
                                            dropout_p=attention.dropout if attention.training else 0.0)
    return attention.out_proj(output.transpose(1, 2).reshape(batch, length, width)), None


def use_sdpa(model: WavLMModel) -> WavLMModel:
    """`model` with every layer's attention through `sdpa_self_attention` (weights untouched)."""
    for layer in model.encoder.layers:
        layer.attention.torch_multi_head_self_attention = functools.partial(sdpa_self_attention, layer.attention)
    return model


def load_wavlm(path: str | Path, *, sdpa: bool = True) -> WavLMModel:
    """The WavLM at `path` (Microsoft .pt file or Hugging Face folder), frozen, in eval mode, on CPU,
    its attention through SDPA unless `sdpa` is false; a checkpoint of another size or with
    foreign keys is one line naming the file and the keys."""
    wavlm_classes()  # a missing library first: no file can be read without it
    path = Path(path)
    if path.is_dir():
        model = _load_hf_folder(path)
    elif path.is_file():
        checkpoint = load_checkpoint(path)
        if not isinstance(checkpoint.get("cfg"), Mapping) or not isinstance(checkpoint.get("model"), Mapping):
            raise VpevalError(f"{path}: not a WavLM checkpoint (a torch file with 'cfg' and 'model', as "
                              f"Microsoft's WavLM-Large.pt)")
        renamed = {hf_key(name) or name: tensor for name, tensor in checkpoint["model"].items()}
        model = built_with(hf_config(checkpoint["cfg"], path), renamed, path)
    else:
        raise VpevalError(f"{path}: WavLM checkpoint not found (a WavLM-Large.pt file or a Hugging Face folder)")
    model = model.requires_grad_(False).eval()
    return use_sdpa(model) if sdpa else model


def _load_hf_folder(path: Path) -> WavLMModel:
    config_path = path / "config.json"
    try:
        config = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise VpevalError(f"{config_path}: not a readable Hugging Face config ({str(exc).splitlines()[0]})") from None
    if config.get("model_type") != "wavlm":
        raise VpevalError(f"{config_path}: model_type is {config.get('model_type')!r}, not wavlm")
    weights = [path / name for name in ("model.safetensors", "pytorch_model.bin") if (path / name).is_file()]
    if not weights:
        raise VpevalError(f"{path}: no model.safetensors or pytorch_model.bin")
    if weights[0].suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            state = load_file(weights[0])
        except (SafetensorError, OSError) as exc:  # a truncated download: "incomplete metadata, ..."
            raise VpevalError(f"{weights[0]}: not a readable safetensors file ({str(exc).strip() or type(exc).__name__}); "
                              "truncated? copy it again") from None
    else:
        state = load_checkpoint(weights[0])
    state = {name.removeprefix("wavlm."): tensor for name, tensor in state.items()}  # a WavLMFor... head's body
    return built_with(wavlm_classes()[0].from_dict(config), state, weights[0])


def built_with(config: WavLMConfig, state: Mapping[str, torch.Tensor], path: Path) -> WavLMModel:
    """transformers' WavLMModel of `config` holding the weights `state` (read from `path`), built
    on the meta device and given the state's tensors: no random initialisation of weights that
    the state replaces (3.3 of the 4 s a WavLM-Large took to load on a 2-core CPU)."""
    with torch.device("meta"):
        model = wavlm_classes()[1](config)
    load_state_checked(model, state, path, "model", assign=True)
    return model


def layer_outputs(model: WavLMModel, wavs: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """(L, B, T, C) outputs of the L transformer layers for (B, N) waveforms, before the final
    layer norm of a pre-norm (Large) encoder; with a (B, N) `attention_mask` (1 on samples)
    each utterance's frames are those of the utterance alone (its padding frames are not).

    `WavLMModel.forward` in eval mode, step by step through its own submodules (feature encoder,
    projection, padding frames zeroed, positional convolution, layers), without the hooks by
    which transformers collects hidden states: `torch.compile` traces it as one graph."""
    features = model.feature_extractor(wavs).transpose(1, 2)
    frames = None if attention_mask is None else model._get_feature_vector_attention_mask(
        features.shape[1], attention_mask, add_adapter=False)
    hidden, _ = model.feature_projection(features)
    if frames is not None:
        hidden = hidden.masked_fill(~frames[..., None], 0.0)
    encoder = model.encoder
    hidden = hidden + encoder.pos_conv_embed(hidden)
    if not model.config.do_stable_layer_norm:  # a post-norm (Base) encoder normalises before its first layer
        hidden = encoder.layer_norm(hidden)
    outputs, position_bias = [], None
    for layer in encoder.layers:
        hidden, position_bias = layer(hidden, attention_mask=frames, position_bias=position_bias)
        outputs.append(hidden)
    return torch.stack(outputs)

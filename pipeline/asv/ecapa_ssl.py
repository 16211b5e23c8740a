"""VoicePrivacy 2026's `ecapa_ssl` attacker: an ECAPA-TDNN over fbank fused with a frozen WavLM.

Re-implemented from VPC 2026's `evaluation/privacy/asv/ecapa_model_wavlm_24layer.py` and its
extractors, with the same parameter names and shapes (`FusedECAPA`), so VPC's
`embedding_model.ckpt` loads into `SSLSpeakerEncoder.ecapa` unchanged:

- fbank branch: SpeechBrain's Fbank (80 mels) with sentence mean normalisation -> a TDNN block
  and SE-Res2Net blocks (`blocks`), as SpeechBrain's ECAPA_TDNN;
- WavLM branch: the waveform, layer-normalised over the utterance (WavLM-Large's `normalize`),
  through the frozen WavLM; the outputs of all its transformer layers (layer 0 dropped) summed
  with learnable softmax weights (`weighted_sum`), then one SE-Res2Net block per ECAPA block
  (`blocks_features`);
- fusion: the WavLM branch's last blocks, resampled to the fbank frame count as VPC's
  `resample_tensor` does (averaging consecutive bins when longer, tiling when shorter),
  multiply the fbank branch's, then multi-layer aggregation, attentive statistics pooling,
  batch norm and the embedding layer, as ECAPA_TDNN.

What each branch sees follows VPC's scripts (checked against VPC's own code on the fixture in
tests/fixtures/vpc2026_ssl):

- evaluation (`embed_samples`; VPC's `SpeechBrainVectors.extract_vector`): the fbank branch
  sees the utterance peak-normalised (`normalize_wave`: -30 LUFS, then divided by its peak)
  with the exact zeros at both ends trimmed (`np.trim_zeros`); WavLM sees the whole file as
  read, untrimmed, normalised over all of it, neither cut nor padded. A batch gives every
  utterance its own lengths (WavLM's attention mask, length-aware blocks), so an embedding
  does not depend on its batch.
- training (`forward(crops, context=...)`; VPC's `train_speaker_embeddings_ssl_ft.py`): the
  fbank branch sees the (augmented) crop; WavLM sees `context`, a random `wavlm_seconds` of the
  clean whole utterance the crop comes from, normalised over the whole utterance, then cut or
  zero-padded (`pipeline.asv.crops.take_context`).

WavLM runs in float32 as in VPC, also under bf16 autocast, unless `wavlm_autocast` is set.
It runs under `torch.no_grad` and is not a registered submodule: it has no gradients,
no optimiser state, and is not in the state dict (its weights come from the `wavlm` path).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from speechbrain.lobes.models.ECAPA_TDNN import (
    AttentiveStatisticsPooling,
    BatchNorm1d,
    Conv1d,
    SERes2NetBlock,
    TDNNBlock,
)
from torch import nn

from pipeline.asv.crops import LAYER_NORM_EPS
from pipeline.asv.encoder import ENCODER_SETTINGS, build_frontend, frontend_spec
from pipeline.asv.model import SPEECHBRAIN_FRONTEND, ReflectFill, normalise_mean, se_res2net
from pipeline.asv.wavlm import layer_outputs, load_wavlm
from pipeline.core.checks import Checked
from pipeline.core.errors import VpevalError
from pipeline.runtime.checkpoint import load_checkpoint, load_state_checked

VPC_EMBEDDING_WEIGHTS = "embedding_model.ckpt"
VPC_WAVLM = "WavLM-Large.pt"


class WeightedLayerSum(nn.Module):
    """Softmax-weighted sum of the WavLM layer outputs (weights start equal)."""

    def __init__(self, num_layers: int):
        super().__init__()
        self.layer_weights = nn.Parameter(torch.ones(num_layers))

    def forward(self, layers: torch.Tensor) -> torch.Tensor:
        """(L, B, T, C) -> (B, T, C)."""
        return torch.tensordot(F.softmax(self.layer_weights, dim=0).to(layers.dtype), layers, dims=1)


class FusedECAPA(nn.Module):
    """The parameters of VPC 2026's `ECAPA_TDNN_test`, under the same names (see the module doc)."""

    def __init__(self, *, input_size: int, channels: Sequence[int], kernel_sizes: Sequence[int],
                 dilations: Sequence[int], attention_channels: int, res2net_scale: int, se_channels: int,
                 global_context: bool, embedding_dim: int, wavlm_layers: int, dropout: float):
        super().__init__()
        se = dict(res2net_scale=res2net_scale, se_channels=se_channels, activation=nn.ReLU, groups=1, dropout=dropout)
        self.blocks = nn.ModuleList(
            [TDNNBlock(input_size, channels[0], kernel_sizes[0], dilations[0], nn.ReLU, 1, dropout)]
            + [SERes2NetBlock(channels[i - 1], channels[i], kernel_size=kernel_sizes[i], dilation=dilations[i], **se)
               for i in range(1, len(channels) - 1)])
        self.blocks_features = nn.ModuleList(
            [SERes2NetBlock(channels[i], channels[i], kernel_size=kernel_sizes[i], dilation=dilations[i], **se)
             for i in range(len(channels) - 1)])
        self.mfa = TDNNBlock(channels[-2] * (len(channels) - 2), channels[-1], kernel_sizes[-1], dilations[-1],
                             nn.ReLU, groups=1, dropout=dropout)
        self.weighted_sum = WeightedLayerSum(wavlm_layers)
        self.asp = AttentiveStatisticsPooling(channels[-1], attention_channels=attention_channels,
                                              global_context=global_context)
        self.asp_bn = BatchNorm1d(input_size=channels[-1] * 2)
        self.fc = Conv1d(in_channels=channels[-1] * 2, out_channels=embedding_dim, kernel_size=1)


def resampling_matrix(sources: torch.Tensor, targets: torch.Tensor, total_target: int,
                      total_source: int) -> torch.Tensor:
    """(B, total_target, total_source): row j of utterance b maps its `sources[b]` frames to its
    frame j < targets[b] as VPC's `resample_tensor` does (zero rows beyond): downsampling
    averages consecutive bins, the first ones `source // n` frames wide, the last `source % n`
    one frame wider; upsampling tiles the sequence (frame j takes frame j mod source).

    >>> resampling_matrix(torch.tensor([5, 5]), torch.tensor([3, 7]), 7, 5)[0, :3].tolist()
    [[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 0.5, 0.5]]
    >>> resampling_matrix(torch.tensor([5, 5]), torch.tensor([3, 7]), 7, 5)[1].argmax(dim=1).tolist()
    [0, 1, 2, 3, 4, 0, 1]
    """
    j = torch.arange(total_target, device=targets.device)[None, :]
    frames, source = targets[:, None], sources.to(targets.device)[:, None]
    base, extra = torch.div(source, frames, rounding_mode="floor"), source % frames
    wider_from = frames - extra
    downsampling = source > frames
    start = torch.where(downsampling, j * base + (j - wider_from).clamp(min=0), j % source)
    count = torch.where(downsampling, base + (j >= wider_from).long(), torch.ones_like(j))
    t = torch.arange(total_source, device=targets.device)[None, None, :]
    inside = (t >= start[..., None]) & (t < (start + count)[..., None]) & (j < frames)[..., None]
    return inside.float() / count[..., None].float()


def vpc_fbank_input(wavs: torch.Tensor, num_samples: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What VPC's evaluation gives its fbank branch: each utterance divided by its peak
    (`normalize_wave`) with the exact zeros at both ends removed (`np.trim_zeros`), left-aligned
    in the batch; returns (waveforms, sample counts). An utterance of zeros only is kept whole.

    >>> vpc_fbank_input(torch.tensor([[0.0, 0.5, -1.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0, 9.0]]), torch.tensor([5, 4]))
    (tensor([[ 0.5000, -1.0000,  0.0000,  0.0000,  0.0000],
            [ 1.0000,  0.0000,  0.0000,  0.0000,  0.0000]]), tensor([2, 1]))
    """
    positions = torch.arange(wavs.shape[1], device=wavs.device)[None, :]
    nonzero = (wavs != 0) & (positions < num_samples[:, None])
    found = nonzero.any(dim=1)
    first = torch.where(found, nonzero.int().argmax(dim=1), 0)
    last = torch.where(found, wavs.shape[1] - 1 - nonzero.flip(1).int().argmax(dim=1), num_samples - 1)
    counts = last - first + 1
    index = (first[:, None] + positions).clamp(max=wavs.shape[1] - 1)
    trimmed = torch.gather(wavs, 1, index) * (positions < counts[:, None])
    peak = trimmed.abs().amax(dim=1, keepdim=True)
    return torch.where(peak > 0, trimmed / peak.clamp(min=torch.finfo(wavs.dtype).tiny), trimmed), counts


def normalise_waveforms(wavs: torch.Tensor, num_samples: torch.Tensor) -> torch.Tensor:
    """Each utterance's first num_samples normalised to zero mean and unit variance over them
    (torch's `layer_norm` over the utterance, WavLM-Large's `normalize`), zeros after."""
    valid = (torch.arange(wavs.shape[1], device=wavs.device)[None, :] < num_samples[:, None]).to(wavs.dtype)
    count = num_samples.clamp(min=1)[:, None].to(wavs.dtype)
    mean = (wavs * valid).sum(dim=1, keepdim=True) / count
    var = ((wavs - mean) * valid).square().sum(dim=1, keepdim=True) / count
    return (wavs - mean) / torch.sqrt(var + LAYER_NORM_EPS) * valid


class SSLSpeakerEncoder(nn.Module, Checked):
    """Waveforms -> speaker embeddings with VPC 2026's `ecapa_ssl` (an `encoder.Encoder`).

    `wavlm` is the path of the frozen WavLM (Microsoft .pt file or Hugging Face folder); its
    hidden size must be `channels[0]` and its depth `wavlm_layers`. `wavlm_seconds` is the
    length of the training context WavLM sees (see the module doc); `max_seconds` bounds the
    utterances extraction accepts (WavLM's attention memory grows with the square of the length).
    """

    settings_checks = ENCODER_SETTINGS

    def __init__(self, *, wavlm: str, sample_rate: int = 16000, n_mels: int = 80, frontend: Any = SPEECHBRAIN_FRONTEND,
                 channels: Sequence[int] = (1024, 1024, 1024, 1024, 3072), kernel_sizes: Sequence[int] = (5, 3, 3, 3, 1),
                 dilations: Sequence[int] = (1, 2, 3, 4, 1), attention_channels: int = 128, res2net_scale: int = 8,
                 se_channels: int = 128, global_context: bool = True, embedding_dim: int = 192,
                 wavlm_layers: int = 24, wavlm_seconds: float = 10.0, normalize_waveform: bool = True,
                 wavlm_autocast: bool = False, max_seconds: float = 60.0, dropout: float = 0.3):
        super().__init__()
        channels, kernel_sizes, dilations = list(channels), list(kernel_sizes), list(dilations)
        if not len(channels) == len(kernel_sizes) == len(dilations) or len(channels) < 3:
            raise VpevalError(f"attacker.model: channels, kernel_sizes and dilations need the same length (>= 3), "
                              f"got {len(channels)}, {len(kernel_sizes)}, {len(dilations)}")
        if len(set(channels[:-1])) != 1:
            raise VpevalError(f"attacker.model.channels={channels}: the SE-Res2Net blocks of both branches need "
                              f"one width (all but the last equal)")
        if any(k % 2 == 0 for k in kernel_sizes) or channels[0] % res2net_scale:
            raise VpevalError(f"attacker.model: kernel_sizes must be odd and channels multiples of res2net_scale, "
                              f"got {kernel_sizes}, {channels}, {res2net_scale}")
        if not float(wavlm_seconds) > 0 or not float(max_seconds) > 0:
            raise VpevalError(f"attacker.model: wavlm_seconds and max_seconds must be positive, "
                              f"got {wavlm_seconds}, {max_seconds}")
        frontend = frontend_spec(frontend)
        self.architecture = dict(
            wavlm=str(wavlm), sample_rate=int(sample_rate), n_mels=int(n_mels), frontend=frontend, channels=channels,
            kernel_sizes=kernel_sizes, dilations=dilations, attention_channels=int(attention_channels),
            res2net_scale=int(res2net_scale), se_channels=int(se_channels), global_context=bool(global_context),
            embedding_dim=int(embedding_dim), wavlm_layers=int(wavlm_layers), wavlm_seconds=float(wavlm_seconds),
            normalize_waveform=bool(normalize_waveform), wavlm_autocast=bool(wavlm_autocast),
            max_seconds=float(max_seconds), dropout=float(dropout))
        self.sample_rate, self.embedding_dim = int(sample_rate), int(embedding_dim)
        self.fbank = build_frontend(frontend, self.sample_rate, int(n_mels))
        self.min_samples, self.frame_hop = self.fbank.window_size, self.fbank.window_shift
        model = load_wavlm(wavlm)
        found = (model.config.hidden_size, model.config.num_hidden_layers)
        if found != (channels[0], int(wavlm_layers)):
            raise VpevalError(f"{wavlm}: WavLM of hidden size {found[0]} with {found[1]} layers, but attacker.model "
                              f"needs channels[0]={channels[0]} and wavlm_layers={wavlm_layers}")
        self._wavlm = (model,)  # a tuple: frozen, not a submodule (not in parameters() or the state dict)
        self.context_samples = round(float(wavlm_seconds) * self.sample_rate)  # training: see crops.take_context
        self.max_samples = round(float(max_seconds) * self.sample_rate)
        self.normalize_waveform = bool(normalize_waveform)
        self.wavlm_autocast = bool(wavlm_autocast)
        self.ecapa = FusedECAPA(input_size=int(n_mels), channels=channels, kernel_sizes=kernel_sizes,
                                dilations=dilations, attention_channels=int(attention_channels),
                                res2net_scale=int(res2net_scale), se_channels=int(se_channels),
                                global_context=bool(global_context), embedding_dim=int(embedding_dim),
                                wavlm_layers=int(wavlm_layers), dropout=float(dropout))
        self.max_conv_padding = max(d * (k - 1) // 2 for k, d in zip(kernel_sizes, dilations))

    @property
    def wavlm(self) -> nn.Module:
        return self._wavlm[0]

    def _apply(self, fn, recurse=True):  # .to(device) / .float() also move the frozen WavLM
        self.wavlm._apply(fn, recurse)
        return super()._apply(fn, recurse)

    def load_vpc_embedding_model(self, path: str | Path) -> None:
        """Load VPC 2026's `embedding_model.ckpt` (an `ECAPA_TDNN_test` state dict, maybe
        DDP's `module.`-prefixed, maybe under 'state_dict') into `ecapa`, strictly."""
        state = load_checkpoint(path)
        state = state.get("state_dict", state)
        state = {name.removeprefix("module."): tensor for name, tensor in state.items()}
        load_state_checked(self.ecapa, state, path, "embedding_model")

    def forward(self, wavs: torch.Tensor, wav_lens: torch.Tensor | None = None,
                context: torch.Tensor | None = None) -> torch.Tensor:
        """(B, N) waveforms in [-1, 1], optional (B,) relative lengths -> (B, embedding_dim).

        With `context` (training, (B, S) WavLM inputs from `crops.take_context`), the fbank
        branch sees `wavs` as they are and WavLM sees `context`; without, each utterance is
        embedded as VPC's evaluation does (`embed_samples`)."""
        padded = wavs.shape[1]
        if wav_lens is None:
            num_samples = torch.full((wavs.shape[0],), padded, dtype=torch.long, device=wavs.device)
        else:
            num_samples = torch.round(wav_lens.to(wavs.device, torch.float64) * padded).long()
        if padded < self.min_samples or (wav_lens is not None and bool((num_samples < self.min_samples).any())):
            raise ValueError(f"every utterance needs at least {self.min_samples} samples (one fbank frame)")
        if context is None:
            return self.embed_samples(wavs, num_samples)
        full = torch.full((context.shape[0],), context.shape[1], dtype=torch.long, device=context.device)
        return self._embed(wavs, num_samples, self.wavlm_layers(context, full, ragged=False),
                           ragged=wav_lens is not None)

    def embed_samples(self, wavs: torch.Tensor, num_samples: torch.Tensor) -> torch.Tensor:
        """(B, N) waveforms + (B,) sample counts -> embeddings as VPC's evaluation computes them
        (see the module doc); each as if embedded alone."""
        fbank_wavs, fbank_samples = vpc_fbank_input(wavs, num_samples)
        if bool((fbank_samples < self.min_samples).any()):
            raise ValueError(f"every utterance needs at least {self.min_samples} samples between its first and "
                             f"last non-zero sample (one fbank frame)")
        inputs = normalise_waveforms(wavs.float(), num_samples) if self.normalize_waveform else wavs
        return self._embed(fbank_wavs, fbank_samples, self.wavlm_layers(inputs, num_samples), ragged=True)

    def wavlm_layers(self, wavs: torch.Tensor, num_samples: torch.Tensor,
                     ragged: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """((L, B, T, C) WavLM layer outputs, (B,) valid frame counts) of waveforms already
        normalised for WavLM, each over its first num_samples (the attention mask); in float32
        unless `wavlm_autocast`, without autograd (`no_grad`: unlike inference mode, its outputs
        need no copy to enter the trainable part's graph, and torch.compile traces it).
        `ragged`: whether any is shorter than the batch (None: found from num_samples, which
        waits for the device; training's contexts are full, so its steps never wait here)."""
        mask = torch.arange(wavs.shape[1], device=wavs.device)[None, :] < num_samples[:, None]
        ragged = not bool(mask.all()) if ragged is None else ragged
        with torch.autocast(device_type=wavs.device.type, enabled=self.wavlm_autocast and torch.is_autocast_enabled(
                wavs.device.type)), torch.no_grad():
            layers = layer_outputs(self.wavlm, wavs if self.wavlm_autocast else wavs.float(),
                                   mask.long() if ragged else None)
            frames = self.wavlm._get_feat_extract_output_lengths(num_samples).long()
        return layers, frames

    def _embed(self, wavs: torch.Tensor, num_samples: torch.Tensor, wavlm: tuple[torch.Tensor, torch.Tensor], *,
               ragged: bool) -> torch.Tensor:
        feats, num_frames = self.fbank(wavs, num_samples)
        feats = normalise_mean(feats, num_frames)
        ecapa = self.ecapa
        x, fill, rel_lens = self._ragged(feats.transpose(1, 2), num_frames, ragged)
        outputs = []
        for block in ecapa.blocks:
            outputs.append(x := self._block(block, x, fill, rel_lens))
        layers, ssl_frames = wavlm
        ssl = ecapa.weighted_sum(layers)
        ssl, ssl_fill, ssl_lens = self._ragged(ssl.transpose(1, 2), ssl_frames, ragged)
        ssl_outputs = []
        for block in ecapa.blocks_features:
            ssl_outputs.append(ssl := self._block(block, ssl, ssl_fill, ssl_lens))
        ssl = torch.cat(ssl_outputs[1:], dim=1)
        resample = resampling_matrix(ssl_frames, num_frames, x.shape[2], ssl.shape[2]).to(ssl.dtype)
        fused = torch.cat(outputs[1:], dim=1) * torch.bmm(ssl, resample.transpose(1, 2))
        x = ecapa.mfa(fused if fill is None else fill(fused))
        x = ecapa.asp_bn(ecapa.asp(x, lengths=rel_lens))
        return ecapa.fc(x).squeeze(2)

    def _ragged(self, x: torch.Tensor, frames: torch.Tensor,
                ragged: bool) -> tuple[torch.Tensor, ReflectFill | None, torch.Tensor | None]:
        """(B, C, T) features padded for the blocks' convolutions, with the reflection fill and
        relative lengths that make each utterance's result its own (None, None: all full length)."""
        if not ragged and x.shape[2] > self.max_conv_padding:
            return x, None, None
        x = F.pad(x, (0, self.max_conv_padding))
        # half a frame below the count: SpeechBrain's `arange < lengths * L` masks are exact
        return x, ReflectFill(frames, x.shape[2]), (frames.to(x.dtype) - 0.5) / x.shape[2]

    @staticmethod
    def _block(block: nn.Module, x: torch.Tensor, fill: ReflectFill | None, rel_lens: torch.Tensor | None):
        if fill is None:
            return block(x)
        if isinstance(block, TDNNBlock):
            return block(fill(x))
        return se_res2net(block, x, rel_lens, fill)


def load_vpc_ssl_folder(folder: str | Path) -> SSLSpeakerEncoder:
    """VPC 2026's `exp/asv_ssl` folder (`embedding_model.ckpt` + `WavLM-Large.pt`) as an encoder
    of VPC's sizes (eval mode, CPU)."""
    folder = Path(folder)
    encoder = SSLSpeakerEncoder(wavlm=str(folder / VPC_WAVLM))
    encoder.load_vpc_embedding_model(folder / VPC_EMBEDDING_WEIGHTS)
    return encoder.eval()

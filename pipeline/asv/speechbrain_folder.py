"""SpeechBrain ECAPA model folders (what `EncoderClassifier.from_hparams` loads offline) <-> vpeval encoders.

A folder holds `hyperparams.yaml` and `embedding_model.ckpt` (the ECAPA_TDNN state dict), as
the VoicePrivacy 2024 toolkit's ASV models do. Importing never runs the yaml: it is parsed
with a safe YAML loader that keeps HyperPyYAML's tags (`!new:`, `!ref`, ...) as inert values;
only three entries are read, and each must name the one class vpeval rebuilds itself:

- `compute_features`: `speechbrain.lobes.features.Fbank` with default settings except
  `n_mels` / `sample_rate` (or vpeval's `SpeechBrainKaldiFbank`, which `export` writes for
  Kaldi-front-end attackers);
- `mean_var_norm`: `speechbrain.processing.features.InputNormalization`, sentence-level
  mean normalisation without variance normalisation;
- `embedding_model`: `speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN` with groups of 1.

The checkpoint is read with `torch.load(weights_only=True)`. Anything else is refused with
one line naming the file and the mismatch.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import yaml
from speechbrain.lobes.models.ECAPA_TDNN import ECAPA_TDNN

from pipeline.asv.ecapa_ssl import VPC_WAVLM, load_vpc_ssl_folder
from pipeline.asv.embed import load_encoder
from pipeline.asv.features import KaldiFbank
from pipeline.asv.model import KALDI_FRONTEND, SPEECHBRAIN_FRONTEND, SpeakerEncoder
from pipeline.core.errors import VpevalError
from pipeline.core.fileio import write_text
from pipeline.runtime.checkpoint import load_checkpoint, load_state_checked, save_checkpoint

HYPERPARAMS = "hyperparams.yaml"
EMBEDDING_WEIGHTS = "embedding_model.ckpt"
ECAPA_CLASS = "speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN"
NORMALIZATION_CLASS = "speechbrain.processing.features.InputNormalization"
KALDI_FOR_SPEECHBRAIN = "pipeline.asv.speechbrain_folder.SpeechBrainKaldiFbank"
# compute_features classes a folder may name -> the vpeval front end that computes the same features
FEATURE_CLASSES = {"speechbrain.lobes.features.Fbank": SPEECHBRAIN_FRONTEND, KALDI_FOR_SPEECHBRAIN: KALDI_FRONTEND}
# Fbank arguments and the only values vpeval's front ends reproduce (n_mels, sample_rate: any)
FBANK_DEFAULTS = {"deltas": False, "context": False, "requires_grad": False, "f_min": 0, "f_max": None,
                  "n_fft": 400, "filter_shape": "triangular", "param_change_factor": 1.0, "param_rand_factor": 0.0,
                  "win_length": 25, "hop_length": 10}
ECAPA_ARGUMENTS = {"input_size": "n_mels", "lin_neurons": "embedding_dim", "channels": "channels",
                   "kernel_sizes": "kernel_sizes", "dilations": "dilations", "attention_channels": "attention_channels",
                   "res2net_scale": "res2net_scale", "se_channels": "se_channels", "global_context": "global_context"}
ECAPA_IGNORED = ("device",)  # placement only


class Tagged:
    """A HyperPyYAML tagged node (`!new:speechbrain...ECAPA_TDNN {...}`), kept as data."""

    def __init__(self, tag: str, value: Any):
        self.tag, self.value = tag, value


class _InertLoader(yaml.SafeLoader):
    """yaml.SafeLoader that turns every `!tag` into a `Tagged` value instead of running it."""


def _tagged(loader: _InertLoader, suffix: str, node: yaml.Node) -> Tagged:
    if isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_scalar(node)
    return Tagged(suffix, value)


_InertLoader.add_multi_constructor("!", _tagged)


class SpeechBrainKaldiFbank(KaldiFbank):
    """vpeval's Kaldi fbank with SpeechBrain's `compute_features(wavs)` call (whole rows), so an
    exported Kaldi-front-end attacker runs inside SpeechBrain's `EncoderClassifier`."""

    def __init__(self, n_mels: int = 80, sample_rate: int = 16000):
        super().__init__(sample_rate, n_mels)

    def forward(self, wavs: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        lengths = torch.full((wavs.shape[0],), wavs.shape[1], dtype=torch.long, device=wavs.device)
        return super().forward(wavs, lengths)[0]


def read_hyperparams(path: Path) -> dict:
    """The top-level mapping of a HyperPyYAML file, tags kept inert."""
    try:
        spec = yaml.load(path.read_text(), Loader=_InertLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        raise VpevalError(f"{path}: not readable YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(spec, dict):
        raise VpevalError(f"{path}: expected a mapping of hyperparameters")
    return spec


def _resolve(value: Any, spec: dict, path: Path, key: str) -> Any:
    """Replace `!ref <name>` by the top-level value `name` (recursively in lists)."""
    if isinstance(value, list):
        return [_resolve(item, spec, path, key) for item in value]
    if isinstance(value, Tagged) and value.tag == "ref":
        name = str(value.value).strip()
        if not (name.startswith("<") and name.endswith(">") and name[1:-1] in spec):
            raise VpevalError(f"{path}: {key}: unsupported reference !ref {value.value} (only !ref <top-level key>)")
        return _resolve(spec[name[1:-1]], spec, path, key)
    if isinstance(value, Tagged):
        raise VpevalError(f"{path}: {key}: unsupported tag !{value.tag} in an argument")
    return value


def _entry(spec: dict, key: str, allowed: tuple[str, ...], path: Path) -> tuple[str, dict]:
    """(class name, resolved arguments) of the `!new:` entry `key`, which must name one of `allowed`."""
    node = spec.get(key)
    if not isinstance(node, Tagged) or not node.tag.startswith("new:"):
        raise VpevalError(f"{path}: '{key}' missing or not a !new: object (an ECAPA folder as "
                          f"EncoderClassifier.from_hparams loads it needs one)")
    target = node.tag[len("new:"):]
    if target not in allowed:
        raise VpevalError(f"{path}: another architecture: {key} is {target}, vpeval imports {' or '.join(allowed)}")
    arguments = node.value if isinstance(node.value, dict) else {}
    return target, {name: _resolve(value, spec, path, f"{key}.{name}") for name, value in arguments.items()}


def _architecture(spec: dict, path: Path) -> dict:
    """SpeakerEncoder arguments equivalent to the folder's front end, normalisation and ECAPA_TDNN."""
    features_class, features = _entry(spec, "compute_features", tuple(FEATURE_CLASSES), path)
    sample_rate = int(features.get("sample_rate", 16000))
    if features.get("f_max") == sample_rate // 2:  # Fbank's default, spelled out
        features.pop("f_max")
    for name, value in features.items():
        if name in ("n_mels", "sample_rate") or (name in ("left_frames", "right_frames")
                                                 and not features.get("context", False)):
            continue
        if name not in FBANK_DEFAULTS or value != FBANK_DEFAULTS[name]:
            raise VpevalError(f"{path}: compute_features.{name}={value!r} is not supported "
                              f"(vpeval reproduces Fbank with its defaults except n_mels and sample_rate)")
    _, norm = _entry(spec, "mean_var_norm", (NORMALIZATION_CLASS,), path)
    if norm.get("norm_type", "global") != "sentence" or norm.get("std_norm", True) or not norm.get("mean_norm", True):
        raise VpevalError(f"{path}: mean_var_norm must be sentence-level mean normalisation "
                          f"(norm_type: sentence, std_norm: False), got {norm}")
    _, ecapa = _entry(spec, "embedding_model", (ECAPA_CLASS,), path)
    unknown = sorted(set(ecapa) - set(ECAPA_ARGUMENTS) - {"groups", *ECAPA_IGNORED})
    if unknown:
        raise VpevalError(f"{path}: embedding_model arguments {unknown} are not supported")
    if any(int(g) != 1 for g in ecapa.get("groups", [1])):
        raise VpevalError(f"{path}: embedding_model.groups={ecapa['groups']} is not supported (only groups of 1)")
    n_mels = int(features.get("n_mels", 40))  # Fbank's own default
    if int(ecapa.get("input_size", n_mels)) != n_mels:
        raise VpevalError(f"{path}: embedding_model.input_size={ecapa['input_size']} but compute_features "
                          f"gives {n_mels} mel bins")
    architecture = {ECAPA_ARGUMENTS[name]: value for name, value in ecapa.items() if name in ECAPA_ARGUMENTS}
    architecture.update(n_mels=n_mels, sample_rate=sample_rate,
                        frontend=FEATURE_CLASSES[features_class])
    return architecture


def load_speechbrain_encoder(folder: str | Path) -> SpeakerEncoder:
    """A vpeval encoder (eval mode, CPU) with the weights of a SpeechBrain ECAPA folder."""
    folder = Path(folder)
    if not folder.is_dir():
        raise VpevalError(f"{folder}: SpeechBrain model folder not found")
    hyperparams, weights = folder / HYPERPARAMS, folder / EMBEDDING_WEIGHTS
    for needed in (hyperparams, weights):
        if not needed.is_file():
            raise VpevalError(f"{needed}: missing (a SpeechBrain ECAPA folder holds {HYPERPARAMS} and "
                              f"{EMBEDDING_WEIGHTS})")
    architecture = _architecture(read_hyperparams(hyperparams), hyperparams)
    try:
        encoder = SpeakerEncoder(**architecture)
    except TypeError as exc:
        raise VpevalError(f"{hyperparams}: embedding_model: {exc}") from None
    load_state_checked(encoder.ecapa, load_checkpoint(weights), weights, "embedding_model")
    return encoder.eval()


def load_attacker_folder(folder: str | Path) -> torch.nn.Module:
    """The encoder (eval mode, CPU) of a vpeval attacker folder (model.json), a VPC 2026 `ecapa_ssl`
    folder (`WavLM-Large.pt` + `embedding_model.ckpt`) or a SpeechBrain ECAPA folder."""
    folder = Path(folder)
    if (folder / "model.json").is_file():
        return load_encoder(folder, "cpu")
    if (folder / VPC_WAVLM).is_file():
        return load_vpc_ssl_folder(folder)
    return load_speechbrain_encoder(folder)


def folder_files(folder: str | Path) -> list[Path]:
    """The files that define the encoder of an attacker, VPC ecapa_ssl or SpeechBrain folder (for cache keys)."""
    folder = Path(folder)
    names = ("model.json", "model.pt") if (folder / "model.json").is_file() else \
        (EMBEDDING_WEIGHTS, VPC_WAVLM) if (folder / VPC_WAVLM).is_file() else (HYPERPARAMS, EMBEDDING_WEIGHTS)
    return [folder / name for name in names if (folder / name).is_file()]


def _yaml_list(values: list) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def hyperparams_text(encoder: SpeakerEncoder) -> str:
    """The hyperparams.yaml of an exported encoder (HyperPyYAML, loadable by `EncoderClassifier`)."""
    arch = encoder.architecture
    features_class = {frontend: name for name, frontend in FEATURE_CLASSES.items()}[arch["frontend"]["_target_"]]
    return f"""# vpeval attacker exported for speechbrain.inference.speaker.EncoderClassifier.from_hparams
n_mels: {arch['n_mels']}
sample_rate: {arch['sample_rate']}

compute_features: !new:{features_class}
    n_mels: !ref <n_mels>
    sample_rate: !ref <sample_rate>

mean_var_norm: !new:{NORMALIZATION_CLASS}
    norm_type: sentence
    std_norm: False

embedding_model: !new:{ECAPA_CLASS}
    input_size: !ref <n_mels>
    channels: {_yaml_list(arch['channels'])}
    kernel_sizes: {_yaml_list(arch['kernel_sizes'])}
    dilations: {_yaml_list(arch['dilations'])}
    groups: {_yaml_list([1] * len(arch['channels']))}
    attention_channels: {arch['attention_channels']}
    res2net_scale: {arch['res2net_scale']}
    se_channels: {arch['se_channels']}
    global_context: {arch['global_context']}
    lin_neurons: {arch['embedding_dim']}

modules:
    compute_features: !ref <compute_features>
    mean_var_norm: !ref <mean_var_norm>
    embedding_model: !ref <embedding_model>

pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer
    loadables:
        embedding_model: !ref <embedding_model>
"""


def export_speechbrain_folder(encoder: SpeakerEncoder, out_dir: str | Path) -> Path:
    """Write `encoder` as a SpeechBrain ECAPA folder: embedding_model.ckpt, then hyperparams.yaml."""
    out_dir = Path(out_dir)
    if not isinstance(getattr(encoder, "ecapa", None), ECAPA_TDNN) or \
            encoder.architecture.get("frontend", {}).get("_target_") not in FEATURE_CLASSES.values():
        raise VpevalError(f"a {type(encoder).__name__} attacker cannot be exported as a SpeechBrain ECAPA folder "
                          f"(only an ECAPA-TDNN over a front end SpeechBrain has)")
    out_dir.mkdir(parents=True, exist_ok=True)
    save_checkpoint(out_dir / EMBEDDING_WEIGHTS, {name: tensor.detach().to("cpu", copy=True)
                                                  for name, tensor in encoder.ecapa.state_dict().items()})
    write_text(out_dir / HYPERPARAMS, hyperparams_text(encoder))
    return out_dir

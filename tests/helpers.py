"""In-code fixtures shared by tests: tiny corpora written with generated audio, VoicePrivacy
recipe folders, the toy speakers of the ASV tests, attacker model folders."""
from __future__ import annotations

import importlib.util
import json
import shutil
from dataclasses import fields
from pathlib import Path

import hydra
import numpy as np
import soundfile as sf
import torch
from scipy.signal import lfilter
from speechbrain.lobes.models.ECAPA_TDNN import ECAPA_TDNN

from pipeline.app.train_vc.command import SEARCHPATH_OVERRIDE
from pipeline.asv.embed import embed_utterances
from pipeline.asv.scoring import length_normalise
from pipeline.asv.train import attacker_settings
from pipeline.core.config import CONFIG_DIR, REPO_ROOT, compose
from pipeline.core.config_tree import TRAIN_VC_CONFIG_DIR
from pipeline.core.fileio import write_json
from pipeline.core.schemas import Data, Split, typed
from pipeline.data.audio import write_audio
from pipeline.data.manifest import Utterance
from pipeline.metrics.results import ConditionResult, DetectSettings, JudgedPair, RunConfig, RunSummary
from pipeline.runtime.checkpoint import save_checkpoint
from pipeline.stages.prepare import manifest_path
from tests.oracles.signals import speech_like

FIXTURES = Path(__file__).resolve().parent / "fixtures"  # tests/fixtures/


def fixture_copy(tmp_path_factory, name: str) -> Path:
    """A copy of tests/fixtures/<name> (SpeechBrain and FunASR may write beside the models they load)."""
    return Path(shutil.copytree(FIXTURES / name, tmp_path_factory.mktemp(name) / name))


def recipe_script(recipe: str, script: str):
    """A recipe's stand-alone script (recipes/<recipe>/<script>.py) loaded as a module."""
    spec = importlib.util.spec_from_file_location(script, REPO_ROOT / "recipes" / recipe / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def training_config(name: str, overrides: list[str]):
    """A `vpeval train-vc` config (conf_train_vc/<name>.yaml) composed as the command composes it."""
    with hydra.initialize_config_dir(config_dir=str(TRAIN_VC_CONFIG_DIR), version_base="1.3"):
        return hydra.compose(config_name=name, overrides=[*overrides, SEARCHPATH_OVERRIDE])


def tone(seconds: float, f0: float, rate: int = 16000, seed: int = 0) -> np.ndarray:
    """A harmonic tone with a little noise: cheap, decodable, speaker-ish audio."""
    t = np.arange(int(seconds * rate)) / rate
    wav = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6))
    wav += 0.01 * np.random.default_rng(seed).standard_normal(t.size)
    return (0.3 * wav / np.abs(wav).max()).astype(np.float32)


def waves(*specs) -> list[np.ndarray]:
    """(seconds, seed) pairs -> float32 numpy speech-like waveforms (`tests.oracles.signals.speech_like`)."""
    return [speech_like(seconds, seed) for seconds, seed in specs]


def librispeech_tree(root: Path, speakers: dict[str, dict[str, str]], utterances: int = 4,
                     seconds: float = 0.5) -> Path:
    """Write a LibriSpeech-layout tree. `speakers`: subset -> {speaker id: 'F' | 'M'}."""
    rows = [";ID  |SEX| SUBSET           |MINUTES| NAME"]
    for subset, genders in speakers.items():
        for n, (spk, sex) in enumerate(genders.items()):
            rows.append(f"{spk} | {sex} | {subset} | 1.00 | Reader {spk}")
            chapter = root / subset / spk / "100"
            chapter.mkdir(parents=True, exist_ok=True)
            lines = []
            for i in range(utterances):
                utt = f"{spk}-100-{i:04d}"
                write_audio(chapter / f"{utt}.flac", tone(seconds, 100 + 20 * n + 5 * i, seed=i), 16000)
                lines.append(f"{utt} WORDS OF {spk} NUMBER {i}")
            (chapter / f"{spk}-100.trans.txt").write_text("\n".join(lines) + "\n")
    (root / "SPEAKERS.TXT").write_text("\n".join(rows) + "\n")
    return root


MLS_SPEAKERS = {"train": {"101": "F", "102": "F", "103": "M", "104": "M"},
                "dev": {"201": "F", "202": "F", "203": "F", "204": "M", "205": "M", "206": "M"},
                "test": {"301": "F", "302": "F", "303": "F", "304": "M", "305": "M", "306": "M"}}


def mls_tree(root: Path, language: str = "german", speakers: dict[str, dict[str, str]] = MLS_SPEAKERS,
             utterances: int = 3, seconds: float = 0.3, audio_ext: str = "flac") -> Path:
    """Write an MLS-layout tree of one language (`root/mls_<language>/`): metainfo.txt (one row
    per speaker and book), per split transcripts.txt, segments.txt and
    audio/<speaker>/<book>/<speaker>_<book>_<n>.<audio_ext> (flac, or opus as the opus release)."""
    folder = root / f"mls_{language}"
    meta = [" SPEAKER   |   GENDER   | PARTITION  |  MINUTES   |  BOOK ID   |   TITLE   |   CHAPTER   "]
    for split, genders in speakers.items():
        transcripts, segments = [], []
        for n, (spk, sex) in enumerate(genders.items()):
            for book in ("7000", "7001"):
                meta.append(f"  {spk}    |     {sex}      |   {split}   |   1.000   |   {book}   | A Book | Ch 1 ")
            for i in range(utterances):
                book = ("7000", "7001")[i % 2]
                utt = f"{spk}_{book}_{i:06d}"
                path = folder / split / "audio" / spk / book / f"{utt}.{audio_ext}"
                path.parent.mkdir(parents=True, exist_ok=True)
                sf.write(str(path), tone(seconds, 100 + 15 * n + 5 * i, seed=i), 16000,
                         **({"format": "OGG", "subtype": "OPUS"} if audio_ext == "opus" else {}))
                transcripts.append(f"{utt}\twörter von {spk} nummer {i}")
                segments.append(f"{utt}\thttp://archive.org/x/{book}.mp3\t{i}.0\t{i}.3")
        (folder / split / "transcripts.txt").write_text("\n".join(transcripts) + "\n")
        (folder / split / "segments.txt").write_text("\n".join(segments) + "\n")
    (folder / "metainfo.txt").write_text("\n".join(meta) + "\n")
    return root


def utterances(speakers: dict[str, str], n: int) -> list[Utterance]:
    """`n` fake utterances per speaker (`speakers`: id -> 'f' | 'm'); paths are not real."""
    return [Utterance(f"{spk}-1-{i:04d}", spk, g, f"/x/{spk}-{i}.flac", 1.0)
            for spk, g in speakers.items() for i in range(n)]


def vctk_tree(root: Path, speakers: dict[str, str], sentences: int = 9, seconds: float = 0.3,
              rate: int = 48000, no_text: tuple[str, ...] = (), no_mic2: tuple[str, ...] = (),
              unrecorded: dict[str, tuple[int, ...]] | None = None) -> Path:
    """Write a VCTK 0.92 tree (`speakers`: id -> 'F' | 'M'), sentences 1..`sentences`, both mics.

    Quirks: speakers in `no_text` get no transcripts (as p315), those in `no_mic2` no mic2
    audio (as p280), and `unrecorded` sentences keep their transcript but lose both
    recordings (as some of p362's).
    """
    unrecorded = unrecorded or {}
    rows = ["ID  AGE  GENDER  ACCENTS  REGION COMMENTS "]
    for n, (spk, sex) in enumerate(speakers.items()):
        rows.append(f"{spk}  23  {sex}    English    Somewhere")
        audio, text = root / "wav48_silence_trimmed" / spk, root / "txt" / spk
        audio.mkdir(parents=True, exist_ok=True)
        for i in range(1, sentences + 1):
            utt = f"{spk}_{i:03d}"
            if spk not in no_text:
                text.mkdir(parents=True, exist_ok=True)
                (text / f"{utt}.txt").write_text(f"Sentence {i} read by {spk}.\n")
            if i in unrecorded.get(spk, ()):
                continue
            for mic in ("mic1", "mic2"):
                if mic == "mic2" and spk in no_mic2:
                    continue
                write_audio(audio / f"{utt}_{mic}.flac", tone(seconds, 90 + 15 * n + 3 * i, rate, seed=i), rate)
    (root / "speaker-info.txt").write_text("\n".join(rows) + "\n")
    return root


def kaldi_dir(folder: Path, rows: list[tuple[str, str, str, str]], enrolls: list[str] | None = None,
              trials: list[str] | None = None) -> Path:
    """Write a Kaldi data dir; `rows` are (utterance, speaker, gender, wav.scp value)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wav.scp").write_text("".join(f"{utt} {value}\n" for utt, _, _, value in rows))
    (folder / "utt2spk").write_text("".join(f"{utt} {spk}\n" for utt, spk, _, _ in rows))
    genders = dict((spk, g) for _, spk, g, _ in rows)
    (folder / "spk2gender").write_text("".join(f"{spk} {g}\n" for spk, g in sorted(genders.items())))
    if enrolls is not None:
        (folder / "enrolls").write_text("".join(f"{utt}\n" for utt in enrolls))
    if trials is not None:
        (folder / "trials").write_text("".join(f"{line}\n" for line in trials))
    return folder


def edit_manifest(folder: Path, name: str, edit) -> None:
    """Rewrite manifest `name` of a prepared folder record by record: `edit(record) -> list of records`."""
    path = manifest_path(folder, name)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(r) + "\n" for record in records for r in edit(record)))


# --- VoicePrivacy recipe folders (Kaldi data dirs) ----------------------------------------------

VPC_TRAIN = {"11": "F", "12": "F", "13": "M", "14": "M"}
VPC_EVAL = {"dev": {"21": "F", "22": "F", "23": "M", "24": "M"},
            "test": {"31": "F", "32": "F", "33": "M", "34": "M"}}
VPC_ENROLLED = {"dev": ("21", "23"), "test": ("31", "33")}
WAV_SCP_FORMS = ("{rel}", "{abs}", "flac -c -d -s {abs} |", "sox {abs} -t wav - |")


def wav_value(recipe: Path, utt: str, n: int) -> str:
    """Cycle through the wav.scp forms the VPC dirs use (relative paths start at the recipe folder)."""
    speaker, chapter, _ = utt.split("-")
    subset = "train-clean-360" if speaker in VPC_TRAIN else "eval"
    rel = f"corpora/LibriSpeech/{subset}/{speaker}/{chapter}/{utt}.flac"
    return WAV_SCP_FORMS[n % len(WAV_SCP_FORMS)].format(rel=rel, abs=recipe / rel)


def vpc_recipe(recipe: Path, vctk_common: bool = False) -> Path:
    """A VPC recipe folder: audio under corpora/, Kaldi dirs under data/ (libri_* or vctk_* sets).
    Returns the data folder."""
    librispeech_tree(recipe / "corpora" / "LibriSpeech",
                     {"train-clean-360": VPC_TRAIN, "eval": {**VPC_EVAL["dev"], **VPC_EVAL["test"]}})
    data = recipe / "data"
    rows = lambda speakers, utts=range(4): [  # noqa: E731
        (f"{s}-100-{i:04d}", s, g.lower(), wav_value(recipe, f"{s}-100-{i:04d}", n))
        for n, (s, g) in enumerate(speakers.items()) for i in utts]
    kaldi_dir(data / "train-clean-360", rows(VPC_TRAIN))
    prefix = "vctk" if vctk_common else "libri"
    for split, speakers in VPC_EVAL.items():
        enrolled = {s: speakers[s] for s in VPC_ENROLLED[split]}
        enrolls = rows(enrolled, range(2))
        kaldi_dir(data / f"{prefix}_{split}_enrolls", enrolls, enrolls=[r[0] for r in enrolls])
        variants = {"": range(2, 4), "_common": range(4, 6)} if vctk_common else {"": range(2, 4)}
        for suffix, utts in variants.items():
            for g in ("f", "m"):
                tried = rows({s: x for s, x in speakers.items() if x.lower() == g}, utts)
                kaldi_dir(data / f"{prefix}_{split}_trials_{g}{suffix}", tried, trials=[
                    f"{s} {utt} {'target' if spk == s else 'nontarget'}"
                    for s in enrolled if speakers[s].lower() == g for utt, spk, _, _ in tried])
    if vctk_common:
        for speaker in {**VPC_EVAL["dev"], **VPC_EVAL["test"]}:
            for i in range(4, 6):
                src = recipe / f"corpora/LibriSpeech/eval/{speaker}/100/{speaker}-100-0000.flac"
                shutil.copy(src, src.with_name(f"{speaker}-100-{i:04d}.flac"))
    return data


def damaged(recipe: Path, tmp_path: Path, edits) -> Path:
    """A copy of the recipe's data folder with files edited: {(dir, file): [edit(text) -> text]}."""
    data = tmp_path / "recipe" / "data"
    shutil.copytree(recipe / "data", data)
    (tmp_path / "recipe" / "corpora").symlink_to(recipe / "corpora")
    for (dir_name, file_name), functions in edits.items():
        target = data / dir_name / file_name
        for edit in functions:
            target.write_text(edit(target.read_text()))
    return data


def vpc_cfg(root: Path, *overrides: str, config: str = "vpc", workers: int = 2):
    """The corpus settings (typed `data`) of a VPC data folder."""
    return typed(compose([f"data.root={root}", f"data.workers={workers}", *overrides],
                         config_name=f"data/{config}").data, Data, "data")


# --- the toy speakers of the ASV tests (the `corpus` fixture in conftest.py) -------------------
# A few synthetic "speakers", harmonic voices with their own F0 range, vocal tract length
# (formant scale) and spectral tilt; each utterance varies pitch, formants and rhythm.

TOY_RATE = 16000


def toy_voice(speaker: int, utterance: int, seconds: float) -> np.ndarray:
    """A harmonic voice: speaker F0 / formant scale / tilt, utterance-varied prosody and vowels."""
    voice = np.random.default_rng([7, speaker])
    take = np.random.default_rng([7, speaker, utterance])
    f0_base, tract_scale, tilt = voice.uniform(90, 220), voice.uniform(0.85, 1.15), voice.uniform(0.8, 1.6)
    t = np.arange(int(seconds * TOY_RATE)) / TOY_RATE
    f0 = f0_base * (1 + take.uniform(-0.12, 0.12)) * (1 + 0.08 * np.sin(2 * np.pi * take.uniform(1, 3) * t
                                                                         + take.uniform(0, 2 * np.pi)))
    phase = 2 * np.pi * np.cumsum(f0) / TOY_RATE
    wav = sum(h ** -tilt * np.sin(h * phase) for h in range(1, int(4000 / f0_base)))
    for formant, bandwidth in ((500, 80), (1500, 120), (2500, 160)):
        frequency = formant * tract_scale * (1 + take.uniform(-0.15, 0.15))
        radius = np.exp(-np.pi * bandwidth / TOY_RATE)
        wav = lfilter([1 - radius], [1, -2 * radius * np.cos(2 * np.pi * frequency / TOY_RATE), radius ** 2], wav)
    wav = wav * (0.6 + 0.4 * np.sin(2 * np.pi * take.uniform(3, 5) * t) ** 2)
    wav = wav + 0.01 * np.abs(wav).max() * take.standard_normal(len(t))
    return (0.5 * wav / np.abs(wav).max()).astype(np.float32)


# --- attackers ----------------------------------------------------------------------------------

def attacker_config(name: str = "ecapa_tiny", overrides: tuple[str, ...] = ()):
    with hydra.initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return hydra.compose(overrides=[f"+attacker={name}", *overrides]).attacker


def typed_attacker(name: str = "ecapa_tiny", overrides: tuple[str, ...] = ()):
    """`attacker_config(name, overrides)` as the typed settings `train_attacker` takes."""
    return attacker_settings(attacker_config(name, overrides))


def equal_error_rate(scores: np.ndarray, target: np.ndarray) -> float:
    """Threshold-sweep EER, enough for tests."""
    order = np.argsort(-scores, kind="stable")
    target = target[order]
    miss = 1 - np.cumsum(target) / target.sum()
    false_alarm = np.cumsum(~target) / (~target).sum()
    best = np.argmin(np.abs(miss - false_alarm))
    return float((miss[best] + false_alarm[best]) / 2)


def validation_eer(encoder, val: list[Utterance], world=None) -> float:
    """EER of cosine scores over every pair of validation utterances, embedded on the encoder's
    device (by `world`'s ranks if given)."""
    _, embeddings = embed_utterances(encoder, val, batch_seconds=20, progress=False, world=world)
    normalised = length_normalise(embeddings)
    pairs = np.triu_indices(len(val), 1)
    speakers = np.array([utt.speaker for utt in val])
    return equal_error_rate((normalised @ normalised.T)[pairs], (speakers[:, None] == speakers[None, :])[pairs])


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def encoder_folder(folder: Path, encoder, **spec_changes) -> Path:
    """An attacker model folder as `pipeline.asv.train` writes it: `encoder`'s weights (model.pt)
    and its builder (model.json), with `spec_changes` applied to the builder's arguments."""
    save_checkpoint(folder / "model.pt", encoder.state_dict())
    write_json(folder / "model.json", {"model": {"_target_": "pipeline.asv.model.SpeakerEncoder",
                                                 **encoder.architecture, **spec_changes}})
    return folder


# --- SpeechBrain ECAPA folders (the VPC 2024 ASV model layout) ----------------------------------

VPC_HYPERPARAMS = """\
# as VPC 2024's evaluation/privacy/asv/asv_train/hparams/ecapa/hyperparams.yaml, smaller sizes
seed: 1234
__set_seed: !apply:torch.manual_seed [!ref <seed>]
n_mels: 80
left_frames: 0
right_frames: 0
deltas: False

compute_features: !new:speechbrain.lobes.features.Fbank
    n_mels: !ref <n_mels>

mean_var_norm: !new:speechbrain.processing.features.InputNormalization
    norm_type: sentence
    std_norm: False

embedding_model: !new:speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN
    input_size: !ref <n_mels>
    channels: [16, 16, 16, 16, 48]
    kernel_sizes: [5, 3, 3, 3, 1]
    dilations: [1, 2, 3, 4, 1]
    attention_channels: 8
    se_channels: 8
    lin_neurons: 12

classifier: !new:speechbrain.lobes.models.ECAPA_TDNN.Classifier
    input_size: 12
    out_neurons: 7

modules:
    compute_features: !ref <compute_features>
    embedding_model: !ref <embedding_model>
    mean_var_norm: !ref <mean_var_norm>
    classifier: !ref <classifier>

pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer
    loadables:
        embedding_model: !ref <embedding_model>
"""


def speechbrain_asv_folder(folder: Path, seed: int = 0, hyperparams: str | None = None) -> Path:
    """A VPC-layout SpeechBrain ECAPA folder: VPC's hyperparameters (or `hyperparams`) and
    SpeechBrain's ECAPA_TDNN (VPC_HYPERPARAMS' sizes), random weights."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hyperparams.yaml").write_text(hyperparams or VPC_HYPERPARAMS)
    torch.manual_seed(seed)
    ecapa = ECAPA_TDNN(80, channels=[16, 16, 16, 16, 48], kernel_sizes=[5, 3, 3, 3, 1], dilations=[1, 2, 3, 4, 1],
                       attention_channels=8, se_channels=8, lin_neurons=12)
    with torch.no_grad():
        for parameter in ecapa.parameters():  # random, not SpeechBrain's init, so that every weight matters
            parameter.add_(0.05 * torch.randn_like(parameter))
    torch.save(ecapa.state_dict(), folder / "embedding_model.ckpt")
    return folder


# A tiny random-weight WavLM (transformers' own classes) with WavLM-Large's structure: pre-norm
# encoder, layer-norm conv extractor with the 320x conv stack, gated relative position bias.
TINY_WAVLM = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                  conv_dim=(16,) * 7, feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True,
                  num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, num_buckets=32, max_bucket_distance=80)


def wavlm_hf_folder(folder: Path, seed: int = 0, **sizes) -> Path:
    """A random-weight WavLMModel saved as a Hugging Face folder (`save_pretrained`)."""
    from transformers import WavLMConfig, WavLMModel

    torch.manual_seed(seed)
    model = WavLMModel(WavLMConfig(**{**TINY_WAVLM, **sizes}))
    with torch.no_grad():  # random biases and norms too, so that a wrongly mapped one shows
        for name, tensor in model.state_dict().items():
            if name.endswith(("bias", "layer_norm.weight", "gru_rel_pos_const")):
                tensor.copy_(torch.randn_like(tensor) * 0.1 + (1.0 if name.endswith(("weight", "const")) else 0.0))
    model.save_pretrained(folder)
    return folder


# transformers -> Microsoft WavLM.py parameter names (plain substring replacements, in order)
MICROSOFT_NAMES = [("pos_conv_embed.conv.parametrizations.weight.original0", "pos_conv.0.weight_g"),
                   ("pos_conv_embed.conv.parametrizations.weight.original1", "pos_conv.0.weight_v"),
                   ("pos_conv_embed.conv.bias", "pos_conv.0.bias"),
                   ("masked_spec_embed", "mask_emb"), (".conv.weight", ".0.weight"), (".conv.bias", ".0.bias"),
                   ("feature_projection.layer_norm.", "layer_norm."),
                   ("feature_projection.projection.", "post_extract_proj."),
                   ("attention.gru_rel_pos_linear.", "self_attn.grep_linear."),
                   ("attention.gru_rel_pos_const", "self_attn.grep_a"),
                   ("attention.rel_attn_embed.", "self_attn.relative_attention_bias."),
                   ("attention.", "self_attn."), (".feed_forward.intermediate_dense.", ".fc1."),
                   (".feed_forward.output_dense.", ".fc2.")]


def microsoft_name(name: str) -> str:
    if name.startswith("feature_extractor.") and ".layer_norm." in name:  # conv block: Sequential(conv, drop, (T, LN, T), GELU)
        return name.replace(".layer_norm.", ".2.1.")
    if name.startswith("encoder.layers.") and ".layer_norm." in name and "final_layer_norm" not in name:
        name = name.replace(".layer_norm.", ".self_attn_layer_norm.")
    for old, new in MICROSOFT_NAMES:
        name = name.replace(old, new)
    return name


def wavlm_microsoft_file(path: Path, hf_folder: Path, normalize: bool = True) -> Path:
    """The WavLM of `hf_folder` as Microsoft's checkpoint format: {'cfg': WavLM.py config, 'model': state}."""
    from transformers import WavLMModel

    model = WavLMModel.from_pretrained(hf_folder)
    c = model.config
    conv = " + ".join(f"[({d},{k},{s})]" for d, k, s in zip(c.conv_dim, c.conv_kernel, c.conv_stride))
    cfg = {"extractor_mode": "layer_norm" if c.feat_extract_norm == "layer" else "default",
           "encoder_layers": c.num_hidden_layers, "encoder_embed_dim": c.hidden_size,
           "encoder_ffn_embed_dim": c.intermediate_size, "encoder_attention_heads": c.num_attention_heads,
           "activation_fn": "gelu", "layer_norm_first": c.do_stable_layer_norm, "conv_feature_layers": conv,
           "conv_bias": c.conv_bias, "normalize": normalize, "conv_pos": c.num_conv_pos_embeddings,
           "conv_pos_groups": c.num_conv_pos_embedding_groups, "relative_position_embedding": True,
           "num_buckets": c.num_buckets, "max_distance": c.max_bucket_distance, "gru_rel_pos": True}
    state = {microsoft_name(name): tensor for name, tensor in model.state_dict().items()}
    torch.save({"cfg": cfg, "model": state}, path)
    return path


def condition(row: dict) -> ConditionResult:
    """A ConditionResult from a flat test row: its labels and typed fields by name (system s1,
    enrolment and trials anonymised unless given), every other key a metric column."""
    names = {f.name for f in fields(ConditionResult)} - {"metrics"}
    given = {"anonymizer": "s1", "attacker_anonymizer": row.get("anonymizer", "s1"), "enroll": "anonymized",
             "trials": "anonymized", **{k: v for k, v in row.items() if k in names}}
    return ConditionResult(**given, metrics={k: v for k, v in row.items() if k not in names})


def run_config(**changes) -> RunConfig:
    """A run's config summary for tests: one evaluated system, its matched attacker."""
    detect = DetectSettings(method="gap", false_alarm=0.05, tolerance=0.05, column=True,
                            trusted=changes.pop("trusted", None))
    base = dict(name="test", data="synthetic_tiny", data_tag="synth", anonymizer="s1", attacker_anonymizer="s1",
                attacker="ecapa_tiny", backend="cosine", attacks="OO, AA", seed=0, anonymization_seed=0,
                detect=detect, detection_group="synthetic/ecapa_tiny/cosine#abc123", validation_protocol="p")
    return RunConfig(**{**base, **changes})


def run_summary(records: list[dict] = (), detection: list = (), **changes) -> RunSummary:
    """A run's results for tests from flat record rows and detection rows (JudgedPairs or
    their fields); `changes`: RunSummary fields, and RunConfig fields for its config."""
    own = {f.name for f in fields(RunSummary)}
    config = run_config(**{k: v for k, v in changes.items() if k not in own})
    pairs = [d if isinstance(d, JudgedPair) else JudgedPair(**d) for d in detection]
    base = dict(config_hash="h", config=config, records=[condition(r) for r in records], detection=pairs,
                detection_fit=[], score_files={}, stages=[])
    return RunSummary(**{**base, **{k: v for k, v in changes.items() if k in own}})


def schema_problems(value, schema: dict, root: dict | None = None, where: str = "$") -> list[str]:
    """Where `value` breaks a JSON Schema of the kinds `pipeline.metrics.results.json_schema`
    writes ($ref, oneOf, anyOf, type, properties, required, additionalProperties, items)."""
    root = root or schema
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    for key in ("oneOf", "anyOf"):
        if key in schema:
            fits = [not schema_problems(value, option, root, where) for option in schema[key]]
            if (sum(fits) != 1) if key == "oneOf" else not any(fits):
                return [f"{where}: fits {sum(fits)} of the {key} options"]
    kinds = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list,
             "null": type(None)}
    types = schema.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(isinstance(value, kinds[t]) and not (isinstance(value, bool) and t in ("integer", "number"))
                   for t in types):
            return [f"{where}: {type(value).__name__} is not {'/'.join(types)}"]
    problems = []
    if isinstance(value, dict):
        problems += [f"{where}.{key}: missing" for key in schema.get("required", []) if key not in value]
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties", {})
        for key, item in value.items():
            if key in properties:
                problems += schema_problems(item, properties[key], root, f"{where}.{key}")
            elif extra is False:
                problems.append(f"{where}.{key}: not in the schema")
            elif isinstance(extra, dict):
                problems += schema_problems(item, extra, root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += schema_problems(item, schema["items"], root, f"{where}[{i}]")
    return problems


EMOTION_HPARAMS = """n_mels: 20
compute_features: !new:speechbrain.lobes.features.Fbank
    n_mels: !ref <n_mels>
mean_var_norm: !new:speechbrain.processing.features.InputNormalization
    norm_type: sentence
    std_norm: False
embedding_model: !new:speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN
    input_size: !ref <n_mels>
    channels: [16, 16, 16, 16, 48]
    lin_neurons: 8
classifier: !new:speechbrain.lobes.models.ECAPA_TDNN.Classifier
    input_size: 8
    out_neurons: 4
label_encoder: !new:speechbrain.dataio.encoder.CategoricalEncoder
modules:
    compute_features: !ref <compute_features>
    mean_var_norm: !ref <mean_var_norm>
    embedding_model: !ref <embedding_model>
    classifier: !ref <classifier>
pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer
    loadables:
        embedding_model: !ref <embedding_model>
        classifier: !ref <classifier>
        label_encoder: !ref <label_encoder>
"""
EMOTIONS = ["ang", "hap", "neu", "sad"]


def emotion_folder(folder: Path) -> Path:
    """A SpeechBrain EncoderClassifier folder with random weights, saved by SpeechBrain's classes."""
    from speechbrain.dataio.encoder import CategoricalEncoder
    from speechbrain.lobes.models.ECAPA_TDNN import ECAPA_TDNN, Classifier

    folder.mkdir(parents=True)
    (folder / "hyperparams.yaml").write_text(EMOTION_HPARAMS)
    torch.manual_seed(0)
    torch.save(ECAPA_TDNN(20, channels=[16, 16, 16, 16, 48], lin_neurons=8).state_dict(), folder / "embedding_model.ckpt")
    torch.save(Classifier(8, out_neurons=4).state_dict(), folder / "classifier.ckpt")
    encoder = CategoricalEncoder()
    encoder.update_from_iterable(EMOTIONS)
    encoder.save(folder / "label_encoder.ckpt")
    return folder


def split_of(cfg) -> Split:
    """A composed config's `split` section as the split stage takes it."""
    return typed(cfg.split, Split, "split")


def split_settings(**given) -> Split:
    """Split settings: `given` over what the train-vc configs give (holdout by speaker,
    selection on half the validation speakers, none named, all trials)."""
    return typed({"holdout": "speaker", "unseen_speakers": None, "select_fraction": 0.5, "sparse_trials": None,
                  **given}, Split, "split")


def utility_experiment(overrides: list[str], cache_dir: Path):
    """What `pipeline.app.utility`'s steps read of an experiment (its config, cache and typed
    sections), from a composed config, without preparing a corpus."""
    from types import SimpleNamespace

    from pipeline.core.cache import Cache
    from pipeline.core.schemas import Detect, Utility

    cfg = compose(["data.root=/corpus", *overrides])
    return SimpleNamespace(cfg=cfg, cache=Cache(cache_dir), detect=typed(cfg.detect, Detect, "detect"),
                           utility=typed(cfg.utility, Utility, "utility"), data_settings=typed(cfg.data, Data, "data"))


# VPC 2026 Track 1's recogniser layout (SpeechBrain's asr-wav2vec2-librispeech), tiny and random
CTC_CHARACTERS = ["<blank>", " ", "'", *"ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
CTC_HIDDEN = 16
CTC_HPARAMS = f"""\
sample_rate: 16000
blank_index: 0
wav2vec2_hub: facebook/wav2vec2-large-960h-lv60-self   # what SpeechBrain's folder names; set by overrides
wav2vec2: !new:speechbrain.lobes.models.huggingface_transformers.wav2vec2.Wav2Vec2
    source: !ref <wav2vec2_hub>
    output_norm: True
    freeze: True
    save_path: wav2vec2_checkpoints
enc: !new:speechbrain.lobes.models.VanillaNN.VanillaNN
    input_shape: [null, null, {CTC_HIDDEN}]
    activation: !name:torch.nn.LeakyReLU
    dnn_blocks: 1
    dnn_neurons: {CTC_HIDDEN}
ctc_lin: !new:speechbrain.nnet.linear.Linear
    input_size: {CTC_HIDDEN}
    n_neurons: {len(CTC_CHARACTERS)}
log_softmax: !new:speechbrain.nnet.activations.Softmax
    apply_log: True
asr_model: !new:torch.nn.ModuleList
    - [!ref <enc>, !ref <ctc_lin>]
tokenizer: !new:speechbrain.dataio.encoder.CTCTextEncoder
encoder: !new:speechbrain.nnet.containers.LengthsCapableSequential
    wav2vec2: !ref <wav2vec2>
    enc: !ref <enc>
    ctc_lin: !ref <ctc_lin>
    log_softmax: !ref <log_softmax>
decoding_function: !name:speechbrain.decoders.ctc_greedy_decode
    blank_id: !ref <blank_index>
modules:
    encoder: !ref <encoder>
pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer
    loadables:
        wav2vec2: !ref <wav2vec2>
        asr: !ref <asr_model>
        tokenizer: !ref <tokenizer>
"""


def encoder_asr_folder(folder: Path, seed: int = 0) -> Path:
    """A random-weight wav2vec2 CTC EncoderASR folder; the Hugging Face model its yaml starts from
    in `wav2vec2_hub/` (config, feature extractor, weights that wav2vec2.ckpt replaces)."""
    import transformers
    from speechbrain.dataio.encoder import CTCTextEncoder
    from speechbrain.lobes.models.VanillaNN import VanillaNN
    from speechbrain.nnet.linear import Linear

    folder.mkdir(parents=True)
    (folder / "hyperparams.yaml").write_text(CTC_HPARAMS)
    torch.manual_seed(seed)
    config = transformers.Wav2Vec2Config(hidden_size=CTC_HIDDEN, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=32, conv_dim=(8, 8), conv_kernel=(10, 3),
                                         conv_stride=(5, 2), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2)
    transformers.Wav2Vec2Model(config).save_pretrained(folder / "wav2vec2_hub")  # the hub model VPC's yaml names
    wav2vec2 = transformers.Wav2Vec2Model(config)  # other weights: the fine-tuned ones, in wav2vec2.ckpt
    transformers.Wav2Vec2FeatureExtractor(do_normalize=True, return_attention_mask=True).save_pretrained(
        folder / "wav2vec2_hub")
    torch.save({f"model.{k}": v for k, v in wav2vec2.state_dict().items()}, folder / "wav2vec2.ckpt")
    enc = VanillaNN(input_shape=[None, None, CTC_HIDDEN], activation=torch.nn.LeakyReLU, dnn_blocks=1,
                    dnn_neurons=CTC_HIDDEN)
    ctc_lin = Linear(input_size=CTC_HIDDEN, n_neurons=len(CTC_CHARACTERS))
    torch.save(torch.nn.ModuleList([enc, ctc_lin]).state_dict(), folder / "asr.ckpt")
    tokenizer = CTCTextEncoder()
    tokenizer.update_from_iterable(CTC_CHARACTERS[1:])
    tokenizer.insert_blank(index=0)
    tokenizer.save(folder / "tokenizer.ckpt")
    return folder


# Whisper folders (transformers' classes), tiny and random
ASR_LETTERS = "abcdefghijklmnopqrstuvwxyz' "
WHISPER_SPECIAL = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>",
                   "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]


def whisper_folder(folder: Path, seed: int = 0, dtype: torch.dtype = torch.float32) -> Path:
    """A Whisper folder (model, generation config, feature extractor, tokenizer) with random
    weights, saved by transformers' own classes: a 1-layer d_model 32 model over a vocabulary of
    letters (byte-level symbols, Ġ the space), Whisper's special tokens and its 1501 timestamp
    tokens, English as its one language, at most 12 tokens a window (the prompt included); every
    token but letters and <|endoftext|> suppressed, so that random weights still write letters."""
    from transformers import (GenerationConfig, WhisperConfig, WhisperFeatureExtractor,
                              WhisperForConditionalGeneration, WhisperProcessor, WhisperTokenizer)

    tokenizer = WhisperTokenizer(vocab={c: i for i, c in enumerate("Ġ" + ASR_LETTERS[:-1])}, merges=[],
                                 extra_special_tokens=WHISPER_SPECIAL[1:], pad_token=WHISPER_SPECIAL[0])  # as OpenAI's
    tokenizer.add_tokens([f"<|{i * 0.02:.2f}|>" for i in range(1501)])
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in WHISPER_SPECIAL}
    end, others = ids["<|endoftext|>"], list(range(ids["<|startoftranscript|>"], len(tokenizer)))
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(WhisperConfig(
        vocab_size=len(tokenizer), d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_target_positions=16,
        pad_token_id=end, bos_token_id=end, eos_token_id=end, decoder_start_token_id=ids["<|startoftranscript|>"]))
    model.generation_config = GenerationConfig(  # what generate(language=, task=) reads, as in openai/whisper-*
        decoder_start_token_id=ids["<|startoftranscript|>"], bos_token_id=end, eos_token_id=end, pad_token_id=end,
        max_length=12, begin_suppress_tokens=[end], suppress_tokens=others,
        is_multilingual=True, lang_to_id={"<|en|>": ids["<|en|>"]}, no_timestamps_token_id=ids["<|notimestamps|>"],
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]})
    model.to(dtype).save_pretrained(folder)
    WhisperProcessor(WhisperFeatureExtractor(), tokenizer).save_pretrained(folder)
    return folder

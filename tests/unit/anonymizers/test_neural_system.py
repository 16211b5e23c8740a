"""The training recipes on the built-in corpus (tiny configs) and the xvector / ohnn / ohnn_rand
anonymisers built from their outputs, as the anonymize stage builds them."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from anonymizers.ohnn import OHNN
from anonymizers.vc.checkpoints import build
from anonymizers.vc.model import load_voice_converter, save_voice_converter
from anonymizers.xvector import XVector
from pipeline.app.train_vc.ohnn import train_ohnn
from pipeline.app.train_vc.vc import train_vc
from pipeline.asv.model import SpeakerEncoder
from pipeline.core.cache import Cache
from pipeline.core.config import compose, instantiate, without
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import OutputCheck
from pipeline.data.audio import read_audio
from pipeline.data.manifest import file_digest, read_manifest, write_manifest
from pipeline.runtime.checkpoint import load_checkpoint, save_checkpoint
from pipeline.runtime.curves import installed
from pipeline.stages import anonymize
from tests.helpers import encoder_folder, recipe_script, training_config

ENCODER = {"channels": [16, 16, 48], "kernel_sizes": [5, 3, 1], "dilations": [1, 2, 1], "attention_channels": 8,
           "res2net_scale": 4, "se_channels": 8, "embedding_dim": 12}


pytestmark = pytest.mark.usefixtures("single_thread")
# A voice converter trained for seconds outputs no speech: these tests are about pseudo-speakers
# and cache keys, so the output check's speech screen is off (what `output_check.speech=false` does).
UNTRAINED = OutputCheck(speech=False, max_non_speech=0.2)


def recipe(name: str, data_root: Path, *overrides: str):
    return training_config(name, [f"paths.data={data_root}", "out=unused", *overrides])


@pytest.fixture(scope="module")
def trained(single_thread, tmp_path_factory):
    """A tiny voice converter and OHNN trained by the recipes (untrained speaker encoder given),
    on one thread as in the tests, so that a resumed run can match bit for bit."""
    root = tmp_path_factory.mktemp("neural")
    torch.manual_seed(0)
    encoder = encoder_folder(root / "encoder", SpeakerEncoder(**ENCODER))
    vc_cfg = recipe("tiny", root / "data", f"speaker_encoder.model_dir={encoder}", "training.steps=2")
    torch.manual_seed(0)
    vc_model = train_vc(vc_cfg, root / "vc", device="cpu")
    ohnn_cfg = recipe("ohnn_tiny", root / "data", f"vc_model={vc_model}", "training.epochs=2")
    ohnn_model = train_ohnn(ohnn_cfg, root / "ohnn", device="cpu")
    prepared = next((root / "vc" / "stages" / "prepare").glob("*/manifests"))
    return {"root": root, "encoder": encoder, "vc_cfg": vc_cfg, "vc_model": vc_model, "ohnn_model": ohnn_model,
            "trials": read_manifest(prepared / "test_trials_f.jsonl") + read_manifest(prepared / "test_trials_m.jsonl"),
            "manifest": prepared / "test_trials_f.jsonl"}


def system(name: str, trained, *overrides: str, seed: int = 5, device: str = "cpu"):
    cfg = compose([f"anonymizer={name}", f"anonymizer.vc_model={trained['vc_model']}", *overrides])
    return instantiate(without(cfg.anonymizer, "name"), seed=seed, device=device)


SMALL_POOL = ("anonymizer.strategy.n_farthest=2", "anonymizer.strategy.n_average=2")


def run(anonymizer, utts):
    anonymizer.prepare(utts)
    return anonymizer([read_audio(u.path) for u in utts], [u.id for u in utts], [u.speaker for u in utts], 16000)


def test_recipe_writes_a_loadable_model_folder(trained):
    folder = trained["vc_model"]
    model, encoder, spec = load_voice_converter(folder, "cpu")
    assert spec["steps"] == 2 and set(spec["validation"]) >= {"mel_l1", "f0_gross_error", "speaker_cosine"}
    assert model.speaker_dim == encoder.embedding_dim == 12
    pool = load_checkpoint(folder / "pool.pt")
    assert len(pool["speaker_ids"]) == 6 and pool["embeddings"].shape == (6, 12)
    log = [json.loads(line) for line in (folder.parent / "training_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log[:-1]] == [1, 2] and "validation" in log[-1]


def test_recipe_resumes_to_the_same_weights(trained):
    root, cfg = trained["root"], trained["vc_cfg"]
    OmegaConf.update(cfg, "training.steps", 1)
    torch.manual_seed(0)
    train_vc(cfg, root / "resumed", device="cpu")
    OmegaConf.update(cfg, "training.steps", 2)
    torch.manual_seed(123)  # the checkpoint's RNG state, not this one, drives the second step
    resumed = train_vc(cfg, root / "resumed", device="cpu")
    straight = load_checkpoint(trained["vc_model"] / "model.pt")
    for name, value in load_checkpoint(resumed / "model.pt").items():
        torch.testing.assert_close(value, straight[name], msg=name)
    OmegaConf.update(cfg, "training.batch_size", 3)
    with pytest.raises(VpevalError, match=r"checkpoint\.pt: written by a run with other settings "
                                          r"\(training\.batch_size: 2 -> 3\)"):
        train_vc(cfg, root / "resumed", device="cpu")
    OmegaConf.update(cfg, "training.batch_size", 2)


def test_missing_weights_stop_with_the_key_and_the_recipe(trained):
    cfg = compose(["anonymizer=xvector"])
    with pytest.raises(VpevalError, match=r"anonymizer\.vc_model is not set: .*vpeval train-vc vc"):
        instantiate(without(cfg.anonymizer, "name"), seed=0, device="cpu")
    with pytest.raises(VpevalError, match=r"anonymizer\.ohnn_model is not set: .*vpeval train-vc ohnn"):
        system("ohnn", trained)
    with pytest.raises(VpevalError, match=r"anonymizer\.vc_model=/nonexistent: no model\.json and model\.pt there"):
        system("xvector", {"vc_model": "/nonexistent"})


def test_a_pool_too_small_for_n_stops_before_any_audio_work(trained):
    anonymizer = system("xvector", trained)  # VPC sizes: N = 200 farthest
    with pytest.raises(VpevalError, match="farthest: the target pool has 3 [fm] speakers, fewer than the 200 needed"):
        anonymizer.prepare(trained["trials"])
    with pytest.raises(VpevalError, match="call prepare"):
        anonymizer([np.zeros(1600, np.float32)], ["u"], ["s"], 16000)
    with pytest.raises(VpevalError, match="f0_neighbours=9: the pool has 6 speakers"):
        system("ohnn", trained, f"anonymizer.ohnn_model={trained['ohnn_model']}", "anonymizer.f0_neighbours=9")


@pytest.mark.parametrize("name, overrides", [
    ("xvector", SMALL_POOL), ("xvector_speaker", SMALL_POOL), ("ohnn_rand", ()), ("ohnn", ("anonymizer.f0_neighbours=2",))])
def test_configs_build_systems_that_anonymise_batches_like_single_utterances(trained, name, overrides):
    extra = (f"anonymizer.ohnn_model={trained['ohnn_model']}",) if name == "ohnn" else ()
    anonymizer = system(name, trained, *overrides, *extra)
    assert isinstance(anonymizer, OHNN if name == "ohnn" else XVector)
    utts = trained["trials"][:3]
    outputs = run(anonymizer, utts)
    assert [len(o) for o in outputs] == [len(read_audio(u.path)) for u in utts]
    assert all(torch.isfinite(o).all() and o.abs().max() <= 1 for o in outputs)
    alone = anonymizer([read_audio(utts[1].path)], [utts[1].id], [utts[1].speaker], 16000)
    torch.testing.assert_close(outputs[1], alone[0], atol=1e-5, rtol=0)
    again = system(name, trained, *overrides, *extra)
    torch.testing.assert_close(run(again, utts)[0], outputs[0])  # same seed, same output


def pseudo(anonymizer, utts):
    """The pseudo-speaker embedding of each utterance, as `anonymize` computes it."""
    captured = []
    choose = anonymizer.pseudo_speakers
    anonymizer.pseudo_speakers = lambda sources, drawn: captured.append(choose(sources, drawn)) or captured[-1]
    run(anonymizer, utts)
    return captured[0][0]


def test_target_strategies_and_levels_are_wired(trained):
    utts = [u for u in trained["trials"] if u.gender == "f"]
    speakers = np.array([u.speaker for u in utts])
    constant = pseudo(system("xvector", trained, "anonymizer.strategy._target_=anonymizers.targets.Constant",
                             "~anonymizer.strategy.n_farthest", "~anonymizer.strategy.n_average"), utts)
    assert np.allclose(constant, constant[0])
    speaker_level = pseudo(system("xvector_speaker", trained, *SMALL_POOL, "anonymizer.strategy.n_average=1"), utts)
    for spk in set(speakers):
        assert np.allclose(speaker_level[speakers == spk], speaker_level[speakers == spk][0])
    utterance_level = pseudo(system("ohnn_rand", trained), utts)
    assert len({tuple(np.round(row, 5)) for row in utterance_level}) > len(set(speakers))
    permuted = pseudo(system("xvector", trained, "anonymizer.strategy._target_=anonymizers.targets.Permutation",
                             "~anonymizer.strategy.n_farthest", "~anonymizer.strategy.n_average",
                             "anonymizer.level=speaker"), utts)
    rows = {spk: tuple(permuted[speakers == spk][0]) for spk in set(speakers)}
    assert len(set(rows.values())) == len(rows)  # PERM: distinct pool speakers


def test_perm_gives_a_speaker_one_pool_speaker_in_every_list_and_never_another_speakers(trained, tmp_path):
    """Regression: PERM's permutation was drawn over the speakers of the list being anonymised,
    so a speaker's pool speaker followed its rank in each list: with enrolment speakers {a, c}
    and trial speakers {a, b, c}, b's trials got the pool speaker c had in enrolment (a false
    accept built into the data). Now every list is mapped over the corpus's speakers."""
    female = {}
    for utt in trained["trials"]:
        if utt.gender == "f":
            female.setdefault(utt.speaker, []).append(utt)
    a, b, c = sorted(female)[:3]  # the pool has 3 female speakers: PERM uses all of them
    lists = {"dev_enrolls": (a, c), "dev_trials_f": (a, b, c)}
    corpus = {speaker: "f" for speaker in (a, b, c)}
    cfg = compose(["anonymizer=xvector_speaker", f"anonymizer.vc_model={trained['vc_model']}",
                   "anonymizer.strategy._target_=anonymizers.targets.Permutation",
                   "~anonymizer.strategy.n_farthest", "~anonymizer.strategy.n_average"])
    cache, targets = Cache(tmp_path / "cache"), {}  # (list, speaker) -> pool speakers its utterances got
    for name, speakers in lists.items():
        manifest = write_manifest(tmp_path / f"{name}.jsonl", [u for s in speakers for u in female[s][:2]])
        out = anonymize.run(cfg.anonymizer, manifest, cache, list_name=name, seed=1, device="cpu", speakers=corpus,
                             output_check=UNTRAINED)
        for utt in read_manifest(out / "manifest.jsonl"):
            targets.setdefault((name, utt.speaker), set()).add(tuple(utt.pseudo_speaker["target_speakers"]))
    assert set(targets) == {(name, s) for name, speakers in lists.items() for s in speakers}
    assert all(len(found) == 1 for found in targets.values())  # one pool speaker per speaker within a list
    for (list1, speaker1), found1 in targets.items():
        for (list2, speaker2), found2 in targets.items():
            # another speaker's pool speaker in no list; PERM's own: the same in every list
            assert (found1 == found2) == (speaker1 == speaker2), (list1, speaker1, list2, speaker2)


def test_ohnn_maps_every_utterance_deterministically(trained):
    anonymizer = system("ohnn", trained, f"anonymizer.ohnn_model={trained['ohnn_model']}", "anonymizer.f0_neighbours=2")
    utts = trained["trials"][:4]
    mapped = pseudo(anonymizer, utts)
    sources = pseudo(system("xvector", trained, *SMALL_POOL), utts)  # to get the pool shape only
    assert mapped.shape == sources.shape
    matrix = anonymizer.ohnn.matrix().detach().numpy()
    encoder = anonymizer.encoder
    waves = [torch.from_numpy(read_audio(u.path))[None] for u in utts]
    with torch.no_grad():
        embeddings = np.stack([torch.nn.functional.normalize(encoder(w, None), dim=-1)[0].numpy() for w in waves])
    np.testing.assert_allclose(mapped, embeddings @ matrix.T, atol=1e-4)


def test_the_anonymize_stage_prepares_the_system_and_keys_its_cache_on_the_weights(trained, tmp_path):
    cfg = compose(["anonymizer=xvector", f"anonymizer.vc_model={trained['vc_model']}", *SMALL_POOL])
    cache = Cache(tmp_path / "cache")
    first = anonymize.run(cfg.anonymizer, trained["manifest"], cache, list_name="train", seed=1, device="cpu",
                          output_check=UNTRAINED)
    written = read_manifest(first / "manifest.jsonl")
    assert len(written) == len(read_manifest(trained["manifest"]))
    pool = set(system("xvector", trained, *SMALL_POOL).pool.speaker_ids)
    assert all(u.pseudo_speaker["key"] == u.id and set(u.pseudo_speaker["target_speakers"]) <= pool for u in written)
    assert anonymize.run(cfg.anonymizer, trained["manifest"], cache, list_name="train", seed=1, device="cpu",
                          output_check=UNTRAINED) == first
    retrained = tmp_path / "retrained"
    model, _, spec = load_voice_converter(trained["vc_model"], "cpu")
    with torch.no_grad():
        model.decoder.speaker.bias.add_(0.1)
    save_voice_converter(retrained, model, spec["model"], trained["vc_model"] / "speaker_encoder")
    (retrained / "pool.pt").write_bytes((trained["vc_model"] / "pool.pt").read_bytes())
    OmegaConf.update(cfg, "anonymizer.vc_model", str(retrained))
    assert anonymize.run(cfg.anonymizer, trained["manifest"], cache, list_name="train", seed=1, device="cpu",
                          output_check=UNTRAINED) != first


def test_the_parameters_fingerprint_is_what_the_built_system_loads(trained, tmp_path):
    """The anonymize stage keys its folder on the parameter dataclass's fingerprint, read without
    building the system: the digests the built system holds (weights, speaker encoder, pool key),
    for the stored pool, for a pool extracted from a manifest (its key covers the F0 tracker) and
    for OHNN's map."""
    manifest_pool = (*SMALL_POOL, f"anonymizer.pool.source={trained['manifest']}",
                     f"anonymizer.pool.cache_dir={tmp_path}")
    for overrides in (SMALL_POOL, manifest_pool):
        built = system("xvector", trained, *overrides)
        assert built.settings.fingerprint(None) == {
            "vc_model": file_digest(trained["vc_model"] / "model.pt"), "speaker_encoder": built.encoder_digest,
            "pool": built.pool.key}
    ohnn = system("ohnn", trained, f"anonymizer.ohnn_model={trained['ohnn_model']}", "anonymizer.f0_neighbours=2")
    assert ohnn.settings.fingerprint(None) == {
        "vc_model": file_digest(trained["vc_model"] / "model.pt"), "speaker_encoder": ohnn.encoder_digest,
        "pool": ohnn.pool.key, "ohnn_model": file_digest(trained["ohnn_model"] / "model.pt")}


def test_pool_from_a_manifest_is_extracted_once_and_cached(trained, tmp_path):
    overrides = (*SMALL_POOL, f"anonymizer.pool.source={trained['manifest']}",
                 f"anonymizer.pool.cache_dir={tmp_path}")
    anonymizer = system("xvector", trained, *overrides)
    assert sorted(anonymizer.pool.speaker_ids) == sorted({u.speaker for u in read_manifest(trained["manifest"])})
    cached = list(tmp_path.glob("pool-*.pt"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    assert system("xvector", trained, *overrides).pool.key == anonymizer.pool.key
    assert cached[0].stat().st_mtime_ns == stamp


def test_a_voice_converter_with_ssl_content_round_trips_through_its_folder(trained, tmp_path):
    ssl = {"_target_": "torchaudio.models.wav2vec2_model", "extractor_mode": "group_norm",
           "extractor_conv_layer_config": [[8, 10, 5]] + [[8, 3, 2]] * 4 + [[8, 2, 2]] * 2,
           "extractor_conv_bias": False, "encoder_embed_dim": 16, "encoder_projection_dropout": 0.0,
           "encoder_pos_conv_kernel": 8, "encoder_pos_conv_groups": 4, "encoder_num_layers": 1,
           "encoder_num_heads": 2, "encoder_attention_dropout": 0.0, "encoder_ff_interm_features": 16,
           "encoder_ff_interm_dropout": 0.0, "encoder_dropout": 0.0, "encoder_layer_norm_first": False,
           "encoder_layer_drop": 0.0, "aux_num_out": None}
    weights = save_checkpoint(tmp_path / "ssl.pt", build(ssl, tmp_path).state_dict())
    spec = {"_target_": "anonymizers.vc.model.VoiceConverter", "speaker_dim": 12,
            "content": {"_target_": "anonymizers.vc.content.SSLContentEncoder", "ssl_model": ssl,
                        "weights": str(weights), "layer": 1, "dim": 8, "codes": 8},
            "decoder": {"channels": 8, "speaker_channels": 4, "layers": 1},
            "generator": {"upsample_initial_channel": 16, "resblock_kernel_sizes": [3], "resblock_dilations": [[1]]}}
    model = build(spec, tmp_path)
    save_voice_converter(tmp_path / "ssl_vc", model, spec, trained["encoder"])
    weights.unlink()  # the SSL weights travel in model.pt: the folder loads without the original file
    assert json.loads((tmp_path / "ssl_vc" / "model.json").read_text())["model"]["content"]["weights"] is None
    loaded, _, _ = load_voice_converter(tmp_path / "ssl_vc", "cpu")
    for name, value in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], value)


def test_adversarial_training_runs_and_resumes_its_discriminators(trained):
    root, cfg = trained["root"], trained["vc_cfg"].copy()
    OmegaConf.update(cfg, "training.adversarial.enabled", True)
    OmegaConf.update(cfg, "training.steps", 1)
    train_vc(cfg, root / "adversarial", device="cpu")
    OmegaConf.update(cfg, "training.steps", 2)
    train_vc(cfg, root / "adversarial", device="cpu")
    checkpoint = load_checkpoint(root / "adversarial" / "checkpoint.pt")
    assert checkpoint["step"] == 2 and checkpoint["discriminators"]
    assert all(r["discriminator"] > 0 and r["feature_matching"] > 0 for r in checkpoint["history"])


def test_tiny_recipe_trains_its_own_speaker_encoder(tmp_path):
    """Regression: `vpeval train-vc vc --config-name tiny` (the documented smoke run) stopped at
    the speaker encoder's split once split.select_fraction defaulted to 0.5 (2 validation
    speakers); this test was marked slow (it takes seconds), so no default run saw it."""
    model = train_vc(recipe("tiny", tmp_path / "data"), tmp_path / "vc", device="cpu")
    trained_encoder = next((tmp_path / "vc" / "stages" / "train").glob("*/model.pt"))
    assert (model / "speaker_encoder" / "model.pt").read_bytes() == trained_encoder.read_bytes()
    if installed("tensorboard"):  # the encoder's training curves beside the converter's
        assert {p.name for p in (tmp_path / "vc" / "curves").iterdir() if p.is_dir()} == \
            {"vc", f"attacker_{trained_encoder.parent.name}"}


@pytest.mark.gpu
def test_recipe_and_systems_on_cuda_with_bf16(trained, tmp_path):
    cfg = trained["vc_cfg"].copy()
    OmegaConf.update(cfg, "training.precision", "bf16")
    OmegaConf.update(cfg, "training.adversarial.enabled", True)
    model = train_vc(cfg, tmp_path / "cuda", device="cuda")
    gpu = {**trained, "vc_model": model}
    for name, overrides in [("xvector", SMALL_POOL), ("ohnn", (f"anonymizer.ohnn_model={trained['ohnn_model']}",
                                                              "anonymizer.f0_neighbours=2"))]:
        anonymizer = system(name, gpu, *overrides, "anonymizer.precision=bf16", device="cuda")
        assert anonymizer.model.generator.conv_post.bias.is_cuda
        outputs = run(anonymizer, trained["trials"][:3])
        assert all(torch.isfinite(o).all() and not o.is_cuda for o in outputs)


def test_content_accuracy_labels_chance_and_copy_synthesis(trained):
    module = recipe_script("train_vc", "content_accuracy")
    utts = trained["trials"][:2]
    classes = {label: i for i, label in enumerate(sorted({s[2] for u in utts for s in module.alignment(u)}))}
    frames, chance = module.majority_rate(utts, classes)
    assert frames > 100 and 0 < chance < 1
    resynthesise = module.copy_synthesis(trained["vc_model"], torch.device("cpu"))
    wave = read_audio(utts[0].path)
    output = resynthesise(wave)
    assert output.shape == wave.shape and np.isfinite(output).all()
    np.testing.assert_array_equal(module.copy_synthesis(trained["vc_model"], torch.device("cpu"))(wave), output)


def test_recipes_write_their_training_curves(trained):
    """The voice converter's steps and validation, the OHNN's epochs: TensorBoard shows the training log's values."""
    pytest.importorskip("tensorboard")
    from tests.unit.runtime.test_curves import tensorboard_scalars

    root = trained["root"]
    log = [json.loads(line) for line in (root / "vc" / "training_log.jsonl").read_text().splitlines()]
    scalars = tensorboard_scalars(root / "vc" / "curves" / "vc")
    for key in ("loss", "stft", "mel", "vq", "lr"):  # the log rounds to 5 decimals
        assert scalars[f"train/{key}"] == [(r["step"], pytest.approx(r[key], abs=1e-5)) for r in log[:-1]], key
    assert scalars["validation/mel_l1"] == [(2, pytest.approx(log[-1]["validation"]["mel_l1"], abs=1e-4))]
    history = [json.loads(line) for line in (root / "ohnn" / "training_log.jsonl").read_text().splitlines()]
    scalars = tensorboard_scalars(root / "ohnn" / "curves" / "ohnn")
    for part in ("train", "validation"):
        for key in history[0][part]:
            assert scalars[f"{part}/{key}"] == [(r["epoch"], pytest.approx(r[part][key], abs=1e-5)) for r in history]

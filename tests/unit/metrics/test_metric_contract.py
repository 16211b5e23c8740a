"""The metric contract and its one list: every metric fills exactly its columns, the list
reproduces the metric functions, missing inputs and undefined values are notes, and the
evaluate stage's key follows each metric's version and code."""
import dataclasses
import shutil

import numpy as np
import pytest

from pipeline.core.cache import Cache
from pipeline.core.code_version import ROOT, code_digest
from pipeline.metrics import cllr, eer, eer_threshold_sweep, linkability, min_cllr, min_dcf, zebra
from pipeline.metrics.contract import (
    EMBEDDINGS,
    SCORES,
    SPEAKERS,
    Column,
    Condition,
    Embeddings,
    Metric,
    Undefined,
    run_metrics,
)
from pipeline.metrics.registry import METRICS, metric_versions, score_metrics, table_columns
from pipeline.metrics.summary import SUMMARY_KEYS, summary
from pipeline.stages import evaluate


def _scores(seed=3, n_tar=60, n_non=240):
    rng = np.random.default_rng(seed)
    return rng.normal(1.5, 1.0, n_tar), rng.normal(-1.0, 1.0, n_non)


def _speaker_condition(seed=3):
    tar, non = _scores(seed)
    speakers = np.asarray([f"s{i % 6}" for i in range(len(tar) + len(non))])
    rng = np.random.default_rng(seed)
    embeddings = Embeddings(rng.normal(size=(12, 4)), np.repeat([f"s{i}" for i in range(6)], 2),
                            rng.normal(size=(18, 4)), np.repeat([f"s{i}" for i in range(6)], 3))
    return Condition(tar, non, speakers[:len(tar)], speakers[len(tar):], embeddings=embeddings)


def test_names_and_keys_are_unique_and_every_metric_fills_exactly_its_columns():
    names = [m.name for m in METRICS]
    keys = [k for m in METRICS for k in m.keys]
    assert len(set(names)) == len(names) and len(set(keys)) == len(keys) and "notes" not in keys
    condition = _speaker_condition()
    for metric in METRICS:
        assert set(metric.compute(condition)) == set(metric.keys), metric.name


def test_the_list_reproduces_the_metric_functions():
    tar, non = _scores()
    s = summary(tar, non)
    assert tuple(s) == SUMMARY_KEYS
    sweep = eer_threshold_sweep(tar, non)
    z = zebra(tar, non)
    assert s["n_target"] == 60 and s["n_nontarget"] == 240
    assert s["eer"] == eer(tar, non) and s["eer_threshold"] == sweep.eer and s["eer_threshold_at"] == sweep.threshold
    assert s["cllr"] == cllr(tar, non) and s["min_cllr"] == min_cllr(tar, non)
    assert s["linkability"] == linkability(tar, non) and s["linkability_bins"] == 6
    assert (s["d_ece"], s["l_w"], s["zebra_tag"]) == (z.d_ece, z.l_w, z.tag)
    assert s["min_dcf"] == min_dcf(tar, non) and s["min_dcf_params"] == {"p_target": 0.01, "c_miss": 1.0, "c_fa": 1.0}
    assert s["notes"] == {}


def test_an_undefined_value_is_none_with_its_reason():
    s = summary([1.0, 2.0, 3.0], [0.0, 1.5])  # 3 mated scores: no linkability histogram
    assert s["linkability"] is None and s["linkability_bins"] == 0
    assert "at least 10 mated" in s["notes"]["linkability"]


def test_a_metric_lacking_its_inputs_gives_none_and_says_what_it_needs():
    needing = Metric("needs_embeddings", EMBEDDINGS, (Column("mean_norm", "norm", digits=2),),
                     lambda c: {"mean_norm": float(np.linalg.norm(c.embeddings.trial, axis=1).mean())})
    halves = Metric("halves", SCORES, (Column("half", "half"), Column("never", "never")),
                    lambda c: {"half": 0.5, "never": Undefined("no reason to be")})
    tar, non = _scores()
    bare = run_metrics(Condition(tar, non), (needing, halves))
    assert bare["mean_norm"] is None and "embeddings" in bare["notes"]["needs_embeddings"]
    assert bare["half"] == 0.5 and bare["never"] is None and bare["notes"]["never"] == "no reason to be"
    full = run_metrics(_speaker_condition(), (needing,))
    assert full["mean_norm"] > 0 and full["notes"] == {}


def test_a_metric_returning_other_keys_than_its_columns_is_refused():
    wrong = Metric("wrong", SCORES, (Column("a"),), lambda c: {"b": 1})
    with pytest.raises(ValueError, match="columns"):
        run_metrics(Condition(*_scores()), (wrong,))


def test_speaker_metrics_need_speakers():
    assert not Condition(*_scores()).has(SPEAKERS) and _speaker_condition().has(SPEAKERS)


def test_columns_print_with_their_scale_and_digits():
    assert Column("eer", "EER %", scale=100, digits=2).format(0.12345) == "12.35"
    assert Column("tag", "tag").format("A") == "A" and Column("x", "x", digits=3).format(None) == "-"
    assert Column("worst", "worst").format(["a", "b"]) == "a, b"


def test_tables_and_the_cli_iterate_the_list():
    headers = [c.key for c in table_columns()]
    assert headers[:3] == ["n_target", "n_nontarget", "eer"]
    assert all(m.needs != EMBEDDINGS for m in score_metrics())
    assert "eer_threshold_at" not in headers and "min_dcf_params" not in headers  # results files only


def test_changing_a_metric_version_changes_the_evaluate_key():
    before = Cache.key("evaluate", evaluate.params(), {"scores": "x"}, code="pipeline.stages.evaluate")
    bumped = tuple(dataclasses.replace(m, version=m.version + 1) if m.name == "zebra" else m for m in METRICS)
    after = Cache.key("evaluate", evaluate.params(bumped), {"scores": "x"}, code="pipeline.stages.evaluate")
    assert metric_versions(bumped)["zebra"] == metric_versions()["zebra"] + 1
    assert before != after and before["params"] != after["params"]


def test_every_listed_metric_module_is_in_the_evaluate_stage_code_digest(tmp_path):
    """A code change in any module of the list changes the evaluate stage's digest."""
    shutil.copytree(ROOT / "pipeline", tmp_path / "pipeline", ignore=shutil.ignore_patterns("__pycache__"))
    modules = sorted({m.compute.__module__ for m in METRICS})
    assert "pipeline.metrics.verification" in modules
    digest = code_digest(["pipeline.stages.evaluate"], root=tmp_path)
    for module in modules:
        path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
        path.write_text(path.read_text() + "\nPROBE = 1\n")
        changed = _digest_without_cache(tmp_path)
        assert changed != digest, module
        digest = changed


def _digest_without_cache(root):
    from pipeline.core import code_version

    for cached in (code_version._digest, code_version._module_digest, code_version._tree, code_version._imports):
        cached.cache_clear()
    return code_digest(["pipeline.stages.evaluate"], root=root)


def _write_condition(folder, n_speakers=4, per_speaker=3, seed=0):
    """Extract-stage folders and manifests of a condition whose embeddings cluster by speaker,
    and its cosine score file (`enroll test score target|nontarget`)."""
    from pipeline.core.fileio import write_lines, write_npy
    from pipeline.data.manifest import Utterance, write_manifest

    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_speakers, 8)) * 3
    sources = {}
    for side in ("enroll", "trial"):
        utts = [Utterance(f"{side}{s}_{k}", f"spk{s}", "f", f"/x/{side}{s}_{k}.wav", 1.0)
                for s in range(n_speakers) for k in range(per_speaker)]
        vectors = np.stack([centres[int(u.speaker[3:])] + rng.normal(size=8) for u in utts]).astype(np.float32)
        (folder / f"{side}_emb").mkdir(parents=True)
        write_npy(folder / f"{side}_emb" / "embeddings.npy", vectors)
        write_lines(folder / f"{side}_emb" / "ids.txt", [u.id for u in utts])
        write_manifest(folder / f"{side}.jsonl", utts)
        sources[side] = (utts, vectors)
    (enrolls, enroll_vectors), (trials, trial_vectors) = sources["enroll"], sources["trial"]
    models = {f"spk{s}": enroll_vectors[s * per_speaker:(s + 1) * per_speaker].mean(0) for s in range(n_speakers)}
    lines = []
    for speaker, model in models.items():
        for utt, vector in zip(trials, trial_vectors):
            score = float(model @ vector / np.linalg.norm(model) / np.linalg.norm(vector))
            lines.append(f"{speaker} {utt.id} {score:.6f} {'target' if utt.speaker == speaker else 'nontarget'}")
    write_lines(folder / "scores.txt", lines)
    return evaluate.EmbeddingSources(folder / "enroll_emb", folder / "enroll.jsonl", folder / "trial_emb",
                                     folder / "trial.jsonl")


def test_the_evaluate_stage_gives_metrics_the_speakers_and_embeddings_of_the_condition(tmp_path, monkeypatch):
    sources = _write_condition(tmp_path)

    def separation(condition):
        e = condition.embeddings
        same = e.enroll_speakers[:, None] == e.trial_speakers[None, :]
        distances = np.linalg.norm(e.enroll[:, None, :] - e.trial[None, :, :], axis=2)
        return {"separation": float(distances[~same].mean() - distances[same].mean())}

    def speakers(condition):
        return {"speakers": sorted(set(condition.target_speakers)),
                "test_speakers": None if condition.target_test_speakers is None
                else sorted(set(condition.target_test_speakers))}

    probes = (Metric("separation", EMBEDDINGS, (Column("separation", "separation", digits=2),), separation),
              Metric("speakers", SPEAKERS, (Column("speakers"), Column("test_speakers")), speakers))
    monkeypatch.setattr(evaluate, "evaluate", lambda condition, metrics: run_metrics(condition, metrics + probes))
    found = evaluate.run(tmp_path / "scores.txt", Cache(tmp_path / "cache"), trial_utts=sources.trial_utts,
                         embeddings=sources)
    assert found["separation"] > 3  # speaker clusters 3 sigma apart: a clear gap between same and other speakers
    assert found["speakers"] == found["test_speakers"] == ["spk0", "spk1", "spk2", "spk3"]
    assert found["eer"] == summary(*_split(tmp_path / "scores.txt"))["eer"]
    assert not {"separation", "speakers"} & set(found["notes"])
    bare = evaluate.run(tmp_path / "scores.txt", Cache(tmp_path / "cache"))
    assert bare["separation"] is None and bare["speakers"] == ["spk0", "spk1", "spk2", "spk3"]
    assert bare["test_speakers"] is None  # no manifest, and these ids do not name their speakers
    assert "embeddings" in bare["notes"]["separation"]


def _split(path):
    from pipeline.metrics import read_scores

    table = read_scores(path)
    return table.target_scores, table.nontarget_scores


def test_metric_settings_reach_the_metrics_and_the_key(tmp_path, monkeypatch):
    sources = _write_condition(tmp_path)
    seen = Metric("seen", SCORES, (Column("grid"),), lambda c: {"grid": c.settings.get("grid")})
    monkeypatch.setattr(evaluate, "evaluate", lambda condition, metrics: run_metrics(condition, metrics + (seen,)))
    cache = Cache(tmp_path / "cache")
    found = evaluate.run(tmp_path / "scores.txt", cache, trial_utts=sources.trial_utts, settings={"grid": [2, 4]})
    assert found["grid"] == [2, 4] and found["min_dcf_params"]["p_target"] == 0.01
    other = evaluate.run(tmp_path / "scores.txt", cache, trial_utts=sources.trial_utts, settings={"grid": [8]})
    assert other["grid"] == [8]
    assert evaluate.params(settings={"grid": [2]}) != evaluate.params()

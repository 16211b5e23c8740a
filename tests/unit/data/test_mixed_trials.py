"""Mixed-gender trial lists (VPC 2026's `<split>_trials_mixed`): the rule, its seed, VPC's dirs, prepare."""
import shutil

import pytest

from pipeline.core.cache import Cache, summary_of
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import Data, check_of
from pipeline.data.corpus import PreparationProblems
from pipeline.data.manifest import Utterance, read_manifest, read_trials
from pipeline.data.protocol import EVAL_TRIALS, Protocol, cross_trials, mixed_trials, trial_lists
from pipeline.stages import prepare, validate
from pipeline.stages.prepare import manifest_path, trials_path
from tests.helpers import damaged, kaldi_dir, librispeech_tree, vpc_cfg
from tests.unit.data.test_prepare import SPEAKERS, data_cfg


def utts(speaker: str, gender: str, n: int) -> list[Utterance]:
    return [Utterance(f"{speaker}-{i}", speaker, gender, f"/x/{speaker}-{i}.flac", 1.0) for i in range(n)]


def hand_protocol() -> Protocol:
    """Female: f1, f2, f3 enrolled, f4 not; one trial utterance each -> non-target trials per
    utterance 2, 2, 2, 3 (mean 2.25 -> 2). Male: m1, m2 enrolled, m3 not; two trial utterances
    each -> 1, 1, 1, 1, 2, 2 (mean 1.33 -> 1)."""
    enrolls = [u for s in ("f1", "f2", "f3") for u in utts(s, "f", 1)] + [u for s in ("m1", "m2") for u in utts(s, "m", 1)]
    tried = {"f": [Utterance(f"{s}-t", s, "f", "/x", 1.0) for s in ("f1", "f2", "f3", "f4")],
             "m": [Utterance(f"{s}-t{i}", s, "m", "/x", 1.0) for s in ("m1", "m2", "m3") for i in range(2)]}
    trials = {"f": cross_trials(["f1", "f2", "f3"], tried["f"]), "m": cross_trials(["m1", "m2"], tried["m"])}
    return Protocol(enrolls, tried, trials)


def test_rule_on_a_hand_built_case():
    protocol = hand_protocol()
    mixed = mixed_trials(protocol, seed=0)
    same = protocol.trials["f"] + protocol.trials["m"]
    assert mixed[:len(same)] == same                                # the female and male lists first
    cross = mixed[len(same):]
    assert all(not t.target for t in cross)
    per_utt = {}
    for t in cross:
        per_utt.setdefault(t.test, []).append(t.enroll)
    # every female utterance against 2 distinct enrolled males, every male one against 1 female
    assert {u: len(set(s)) for u, s in per_utt.items()} == {**{f"{s}-t": 2 for s in ("f1", "f2", "f3", "f4")},
                                                            **{f"{s}-t{i}": 1 for s in ("m1", "m2", "m3")
                                                               for i in range(2)}}
    assert all(len(s) == len(set(s)) for s in per_utt.values())
    assert {s for u, ss in per_utt.items() if u.startswith("f") for s in ss} <= {"m1", "m2"}
    assert {s for u, ss in per_utt.items() if u.startswith("m") for s in ss} <= {"f1", "f2", "f3"}
    assert len(cross) == 4 * 2 + 6 * 1


def test_count_is_capped_by_the_enrolled_speakers_of_the_other_gender():
    protocol = hand_protocol()
    protocol.enrolls = [u for u in protocol.enrolls if u.speaker != "m2"]   # one male left for 2 draws
    protocol.trials["m"] = [t for t in protocol.trials["m"] if t.enroll != "m2"]
    cross = mixed_trials(protocol, seed=0)[len(protocol.trials["f"]) + len(protocol.trials["m"]):]
    assert [t.enroll for t in cross if t.test.startswith("f")] == ["m1"] * 4


def test_seeded_and_reproducible():
    protocol = hand_protocol()
    draws = {seed: [t.line() for t in mixed_trials(protocol, seed)] for seed in range(6)}
    assert draws[0] == [t.line() for t in mixed_trials(hand_protocol(), 0)]
    assert len({tuple(d) for d in draws.values()}) > 1                 # the seed decides the draw


def test_eval_trials_values():
    assert trial_lists("same_gender") == ("f", "m") and trial_lists("mixed") == ("mixed",)
    with pytest.raises(VpevalError, match="^data.eval_trials=cross: must be same_gender, mixed or both$"):
        trial_lists("cross")
    assert all(check_of(Data, "eval_trials").test(value) for value in EVAL_TRIALS)  # the schema's rule, one home


def test_prepare_builds_the_mixed_list(tmp_path):
    corpus = librispeech_tree(tmp_path / "libri", SPEAKERS)
    cfg = data_cfg(corpus)
    cfg.eval_trials, cfg.mixed_seed = "both", 3
    out = prepare.run(cfg, Cache(tmp_path / "cache"))
    mixed = read_trials(trials_path(out, "test_trials_mixed"))
    same = read_trials(trials_path(out, "test_trials_f")) + read_trials(trials_path(out, "test_trials_m"))
    assert mixed[:len(same)] == same and len(mixed) > len(same)
    genders = {u.id: u.gender for u in read_manifest(manifest_path(out, "test_trials_mixed"))}
    enrolled = {u.speaker: u.gender for u in read_manifest(manifest_path(out, "test_enrolls"))}
    assert all(enrolled[t.enroll] != genders[t.test] for t in mixed[len(same):])
    assert (out / "kaldi" / "libri_test_trials_mixed" / "trials").is_file()
    assert summary_of(out)["test"]["mixed"]["nontarget"] == sum(not t.target for t in mixed)
    assert validate.check(out, ("dev", "test"), workers=1).problems == []
    again = prepare.run(cfg, Cache(tmp_path / "cache2"))
    assert read_trials(trials_path(again, "test_trials_mixed")) == mixed


def vpc_mixed_dir(vpc_folder, tmp_path, extra: list[str]):
    """A copy of the VPC recipe with `libri_dev_trials_mixed` (and test): the f and m dirs merged,
    their trials plus `extra` lines, as VPC 2026's script lays them out."""
    data = damaged(vpc_folder, tmp_path, {})
    for split, enrolled in (("dev", ("21", "23")), ("test", ("31", "33"))):
        lines = []
        rows = []
        for g in ("f", "m"):
            folder = data / f"libri_{split}_trials_{g}"
            lines += folder.joinpath("trials").read_text().splitlines()
            genders = dict(line.split() for line in folder.joinpath("spk2gender").read_text().splitlines())
            for line in folder.joinpath("wav.scp").read_text().splitlines():
                utt, value = line.split(" ", 1)
                rows.append((utt, utt.split("-")[0], genders[utt.split("-")[0]], value))
        extras = [line.format(f=enrolled[0], m=enrolled[1]) for line in extra] if split == "dev" else []
        kaldi_dir(data / f"libri_{split}_trials_mixed", rows, trials=lines + extras)
    return data


def test_vpc_mixed_dirs_are_read(vpc_folder, tmp_path):
    data = vpc_mixed_dir(vpc_folder, tmp_path, ["{m} 21-100-0002 nontarget", "{f} 24-100-0003 nontarget"])
    cfg = vpc_cfg(data, "data.eval_trials=mixed", "data.protocol.mixed_trials='{subset}_trials_mixed'")
    out = prepare.run(cfg, Cache(tmp_path / "cache"))
    given = (data / "libri_dev_trials_mixed" / "trials").read_text().splitlines()
    assert [t.line() for t in read_trials(trials_path(out, "dev_trials_mixed"))] == given
    assert given[-2:] == ["23 21-100-0002 nontarget", "21 24-100-0003 nontarget"]
    assert validate.check(out, ("dev", "test"), workers=1).problems == []


def test_vpc_mixed_dir_with_a_mislabelled_target_is_named(vpc_folder, tmp_path):
    """VPC's script can label a speaker's own utterance non-target (it draws enrolled speakers
    of the utterance's own gender): that trial is named, never scored as a non-target."""
    data = vpc_mixed_dir(vpc_folder, tmp_path, ["{f} 21-100-0002 nontarget"])
    cfg = vpc_cfg(data, "data.eval_trials=mixed", "data.protocol.mixed_trials='{subset}_trials_mixed'")
    with pytest.raises(PreparationProblems, match=r"libri_dev_trials_mixed/trials:\d+: label 'nontarget' "
                                                  "contradicts the speakers of 21 and 21-100-0002"):
        prepare.run(cfg, Cache(tmp_path / "cache"))


def test_vpc_dirs_without_a_mixed_dir_draw_one(vpc_folder, tmp_path):
    """The fixture enrols one speaker per gender with 4 trial utterances each: 0.5 non-target
    trials per utterance, which Python's round (VPC's) makes 0 cross-gender trials."""
    out = prepare.run(vpc_cfg(vpc_folder / "data", "data.eval_trials=both"), Cache(tmp_path / "cache"))
    same = read_trials(trials_path(out, "dev_trials_f")) + read_trials(trials_path(out, "dev_trials_m"))
    assert read_trials(trials_path(out, "dev_trials_mixed")) == same
    assert validate.check(out, ("dev",), workers=1).problems == []


def test_a_mixed_dir_alone_gives_the_same_gender_lists_too(vpc_folder, tmp_path):
    """VPC 2026 Track 2 ships `<lang>_<split>_trials_mixed` with no f and m dirs (data=vpc_mls):
    the same-gender lists are the mixed list's same-gender trials."""
    data = vpc_mixed_dir(vpc_folder, tmp_path, ["{m} 21-100-0002 nontarget"])
    given = {g: (data / f"libri_dev_trials_{g}" / "trials").read_text().splitlines() for g in ("f", "m")}
    for split in ("dev", "test"):
        for g in ("f", "m"):
            shutil.rmtree(data / f"libri_{split}_trials_{g}")
    cfg = vpc_cfg(data, "data.eval_trials=both", "data.protocol.trials=null",
                  "data.protocol.mixed_trials='{subset}_trials_mixed'")
    out = prepare.run(cfg, Cache(tmp_path / "cache"))
    for g in ("f", "m"):
        assert [t.line() for t in read_trials(trials_path(out, f"dev_trials_{g}"))] == given[g]
    assert [t.line() for t in read_trials(trials_path(out, "dev_trials_mixed"))][-1] == "23 21-100-0002 nontarget"
    assert validate.check(out, ("dev", "test"), workers=1).problems == []

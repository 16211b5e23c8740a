"""pipeline.core.checks: one Check per key, read by one function."""
from omegaconf import OmegaConf

from pipeline.core.checks import COUNT, SEED, Check, Checked, matching, one_of, range_problems

RANGES = {"seed": SEED, "subsets.*.utterances": COUNT, "mode": Check("fast or slow", one_of("fast", "slow"))}


def test_every_failing_key_is_named_with_what_it_allows():
    node = OmegaConf.create({"seed": -1, "subsets": {"a": {"utterances": 0}, "b": {"utterances": 3}}, "mode": "x"})
    assert range_problems(node, RANGES, "run") == [
        "run.seed=-1: must be an integer >= 0 and <= 2**63-1 (9223372036854775807)",
        "run.subsets.a.utterances=0: must be an integer >= 1",
        "run.mode=x: must be fast or slow"]


def test_absent_unset_and_already_reported_keys_are_skipped():
    node = OmegaConf.create({"seed": "???", "mode": "x"})
    assert range_problems(node, RANGES) == ["mode=x: must be fast or slow"]
    assert range_problems(node, RANGES, reported=["mode=x: must be a string"]) == []


def test_a_star_matches_every_child():
    node = OmegaConf.create({"subsets": {"a": {"utterances": 1}, "b": {}}})
    assert list(matching(node, "subsets.*.utterances")) == ["subsets.a.utterances"]


def test_a_checked_class_checks_its_own_keys_and_a_subclass_adds_its_relations():
    class Base(Checked):
        settings_checks = {"count": COUNT}

    class Pair(Base):
        settings_checks = {**Base.settings_checks, "low": COUNT, "high": COUNT}

        @classmethod
        def check_settings(cls, settings, key):
            found = super().check_settings(settings, key)
            if not found and settings.low > settings.high:
                found.append(f"{key}.low={settings.low}: must be at most {key}.high={settings.high}")
            return found

    assert Base.check_settings(OmegaConf.create({"count": 0, "low": 0}), "x") == ["x.count=0: must be an integer >= 1"]
    assert Pair.check_settings(OmegaConf.create({"count": 1, "low": 3, "high": 2}), "x") == [
        "x.low=3: must be at most x.high=2"]

"""Target selection: CONST / PERM / RAND (maouche2020 §5.1), farthest-N then average-N*
(VPC 2020), same-gender pools, seeding and batch independence."""
import numpy as np
import pytest

from anonymizers.targets import (
    Constant,
    FarthestAverage,
    Permutation,
    Random,
    Source,
    TargetPool,
    cosine_distance,
)
from pipeline.core.errors import VpevalError


def make_pool(per_gender=12, dim=8, seed=0):
    rng = np.random.default_rng(seed)
    ids = [f"t{i:02d}" for i in range(2 * per_gender)]
    genders = ["f", "m"] * per_gender
    return TargetPool(rng.standard_normal((2 * per_gender, dim)), ids, genders)


def utterance_sources(speakers=("a", "b", "c", "d"), per_speaker=3, dim=8, seed=1):
    """Utterance-level sources: speakers alternate f, m; keys are utterance ids."""
    rng = np.random.default_rng(seed)
    return [Source(f"{s}-{u}", s, "fm"[i % 2], rng.standard_normal(dim))
            for i, s in enumerate(speakers) for u in range(per_speaker)]


def gender_of(pool, target):
    return {pool.speaker_ids[i]: g for i, g in enumerate(pool.genders)}[target.speakers[0]]


def test_constant_maps_everyone_to_one_target_per_gender():
    pool, sources = make_pool(), utterance_sources()
    targets = Constant(same_gender=True).select(pool, sources, seed=0)
    by_gender = {}
    for source, target in zip(sources, targets):
        by_gender.setdefault(source.gender, set()).add(target.speakers)
        assert gender_of(pool, target) == source.gender
    assert all(len(chosen) == 1 for chosen in by_gender.values()) and len(by_gender) == 2
    anyone = Constant(same_gender=False).select(pool, sources, seed=0)
    assert len({t.speakers for t in anyone}) == 1


def test_random_is_per_key_and_respects_gender():
    pool, sources = make_pool(), utterance_sources(per_speaker=6)
    targets = Random(same_gender=True).select(pool, sources, seed=0)
    assert len({t.speakers for t in targets}) > 6
    assert all(gender_of(pool, t) == s.gender for s, t in zip(sources, targets))
    speaker_keyed = [Source(s.speaker, s.speaker, s.gender) for s in sources]
    per_speaker = Random(same_gender=True).select(pool, speaker_keyed, seed=0)
    for source, target in zip(speaker_keyed, per_speaker):
        assert target.speakers == per_speaker[[s.speaker for s in speaker_keyed].index(source.speaker)].speakers


def test_permutation_gives_distinct_targets_per_speaker():
    pool, sources = make_pool(), utterance_sources(speakers=tuple("abcdefgh"))
    speakers = {s.speaker: s.gender for s in sources}
    targets = Permutation(speakers, same_gender=True).select(pool, sources, seed=0)
    mapping = {}
    for source, target in zip(sources, targets):
        assert mapping.setdefault(source.speaker, target.speakers) == target.speakers
        assert gender_of(pool, target) == source.gender
    assert len(set(mapping.values())) == len(speakers)


def test_permutation_over_the_corpus_agrees_across_lists():
    """Given the corpus's speakers once, lists with other speaker sets (enrolment {a, c},
    trials {a, b, c}) map each speaker to one pool speaker, the same in both, and no speaker
    to another's (the anonymize stage's wiring: test_neural_system.py)."""
    pool, strategy = make_pool(), Permutation({"a": "f", "b": "m", "c": "f"})
    found = {}
    for name, speakers in {"enrolls": "ac", "trials": "abc"}.items():
        sources = [Source(f"{name}/{s}", s, "fm"[s == "b"]) for s in speakers for _ in range(2)]
        for source, target in zip(sources, strategy.select(pool, sources, seed=3)):
            found.setdefault((name, source.speaker), set()).add(target.speakers)
    assert all(len(targets) == 1 for targets in found.values())
    for (_, speaker1), targets1 in found.items():
        for (_, speaker2), targets2 in found.items():
            assert (targets1 == targets2) == (speaker1 == speaker2)


def test_permutation_pool_too_small():
    speakers = {f"s{i}": "f" for i in range(13)}
    with pytest.raises(VpevalError, match="perm: the target pool has 12 f speakers, fewer than the 13 needed"):
        Permutation(speakers).select(make_pool(), [Source("s0", "s0", "f")], seed=0)


def test_permutation_unknown_speaker():
    with pytest.raises(VpevalError, match="'z' is not among the source speakers"):
        Permutation({"a": "f"}).select(make_pool(), [Source("z", "z", "f")], seed=0)


def test_farthest_average_uses_the_n_farthest_and_averages_n_star():
    pool, sources = make_pool(per_gender=30), utterance_sources()
    strategy = FarthestAverage(n_farthest=10, n_average=4, same_gender=True)
    for source, target in zip(sources, strategy.select(pool, sources, seed=0)):
        rows = [i for i, g in enumerate(pool.genders) if g == source.gender]
        distances = cosine_distance(source.embedding, pool.embeddings[rows])
        farthest = {pool.speaker_ids[rows[i]] for i in np.argsort(-distances)[:10]}
        assert len(set(target.speakers)) == 4 and set(target.speakers) <= farthest
        chosen = [pool.speaker_ids.index(s) for s in target.speakers]
        np.testing.assert_allclose(target.embedding, pool.embeddings[chosen].mean(0))


def test_farthest_average_vpc_sizes_and_pool_too_small():
    big = make_pool(per_gender=250, dim=4)
    target = FarthestAverage().select(big, [Source("u", "s", "m", np.ones(4))], seed=0)[0]
    assert len(target.speakers) == 100
    with pytest.raises(VpevalError, match="farthest: the target pool has 12 m speakers, fewer than the 200 needed"):
        FarthestAverage().select(make_pool(), [Source("u", "s", "m", np.ones(8))], seed=0)
    with pytest.raises(VpevalError, match="n_average <= n_farthest"):
        FarthestAverage(n_farthest=10, n_average=20)


@pytest.mark.parametrize("strategy", [
    Constant(), Random(), FarthestAverage(n_farthest=8, n_average=3),
    Permutation({s: "fm"[i % 2] for i, s in enumerate("abcd")}),
])
def test_seeded_and_independent_of_batching(strategy):
    pool, sources = make_pool(), utterance_sources()
    together = strategy.select(pool, sources, seed=5)
    alone = [strategy.select(pool, [s], seed=5)[0] for s in reversed(sources)][::-1]
    assert [t.speakers for t in together] == [t.speakers for t in alone]
    again = strategy.select(pool, sources, seed=5)
    assert all(np.array_equal(a.embedding, b.embedding) for a, b in zip(together, again))


def test_seed_changes_the_draw():
    pool, sources = make_pool(), utterance_sources(per_speaker=6)
    first = [t.speakers for t in Random().select(pool, sources, seed=1)]
    second = [t.speakers for t in Random().select(pool, sources, seed=2)]
    assert first != second


def test_pool_from_utterances_averages_per_speaker():
    embeddings = np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]])
    pool = TargetPool.from_utterances(embeddings, ["b", "b", "a"], {"a": "f", "b": "m"})
    assert pool.speaker_ids == ("a", "b") and pool.genders == ("f", "m")
    np.testing.assert_allclose(pool.embeddings, [[0.0, 2.0], [2.0, 0.0]])


@pytest.mark.parametrize("ids, genders, message", [
    (["a", "a"], ["f", "m"], "not unique"),
    (["a", "b"], ["f", "x"], "genders must be"),
    (["a"], ["f", "m"], "one embedding row"),
])
def test_bad_pool_is_an_error(ids, genders, message):
    with pytest.raises(VpevalError, match=message):
        TargetPool(np.zeros((2, 3)), ids, genders)

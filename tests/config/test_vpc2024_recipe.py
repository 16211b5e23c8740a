"""recipes/vpc2024/vpc_ways.py: VPC's training-chunk rule and the paired bootstrap of two ways."""

import numpy as np

from pipeline.data.manifest import Trial
from tests.helpers import recipe_script



def test_chunks_are_fixed_from_the_start_and_short_utterances_have_none():
    ways, rate = recipe_script("vpc2024", "vpc_ways"), 16000
    wav = np.concatenate([np.full(3 * rate, 1e-4), np.full(3 * rate, -0.1), np.full(rate, 0.5)])  # 7 s
    assert np.allclose(ways.chunk_amplitudes(wav, rate, 3.0), [1e-4, 0.1])  # the last second is no chunk
    assert ways.chunk_amplitudes(wav[:int(2.9 * rate)], rate, 3.0) == []
    assert len(ways.chunk_amplitudes(wav, rate, 2.0)) == 3


def test_two_ways_on_the_same_trials_are_scored_on_the_same_resamples():
    ways, rng = recipe_script("vpc2024", "vpc_ways"), np.random.default_rng(0)
    trials = [Trial(f"s{s}", f"s{(s + u % 4) % 6}-1-{u}", u % 4 == 0) for s in range(6) for u in range(12)]
    target = np.array([t.target for t in trials])
    scores = rng.normal(size=len(trials)) + 1.5 * target
    eer, reps = ways.replicates(scores, trials, set_index=3)
    same_eer, same = ways.replicates(scores.copy(), trials, set_index=3)
    assert eer == same_eer and np.array_equal(reps, same)
    _, better = ways.replicates(scores + 1.0 * target, trials, set_index=3)  # every target trial scores higher
    assert np.all(better <= reps + 1e-12) and np.any(better < reps)

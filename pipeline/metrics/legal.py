"""Singling out and identification rate as data protection law defines them (vauquier2025; the
legal-eval reference, brijmohan/voice-anonymization-legal-eval). Neither is D<->sys: vpeval's
`linkability` is Gomez-Barrero's, the legal-eval "linkability" is `identification_rate` here.

Entries are conversations: the L2-normalised mean of L utterance embeddings of one speaker
(`conversation`); similarity is the cosine.

- Singling out (predicate singling out, Cohen et al. 2020). For an enrolled speaker e and a
  population of N test speakers that includes e, each speaker gives M + 1 conversations of
  disjoint utterances. In fold f (f = 0..M) conversation f of every speaker is its test entry
  and the other M·N calibrate the predicate p(x) = 1{cos(x, x_e) > t}: t is the midpoint of
  the M-th and (M+1)-th highest calibration similarities, so p fires on 1/N of the
  calibration set (`predicate_threshold`). Isolation: p fires on exactly one of the N test
  entries, whichever speaker's. The rate is the mean over enrolled speakers, runs (a drawn
  population and utterances) and folds. Trivial baseline: N (1/N)(1 - 1/N)^(N-1) -> e^-1.
  A speaker with only 2 <= K < M + 1 conversations (K = its utterances // L) takes part as the
  paper's footnote 4 says: K - 1 calibrate and 1 is tested (fold f tests its conversation
  f mod K), and when it is the enrolled speaker, t is the midpoint of the (K-1)-th and K-th
  highest calibration similarities (`short_speakers="calibrate"`, the default);
  `short_speakers="drop"` leaves it out (vpeval's rule before issue 35).
- Identification rate. A test conversation is identified when its cosine with its speaker's
  enrolment embedding (the mean of all its enrolment utterances) beats every other
  candidate's strictly (a tie fails, as in the reference). Among N' candidates, the true
  speaker and N' - 1 of the K - 1 other enrolled speakers drawn at random, the probability is
  hypergeometric given the b others that score at least as high: C(K-1-b, N'-1) / C(K-1, N'-1),
  computed exactly (`identification_probability`), no candidate is sampled. Chance: 1/N'.

Intervals are Student-t intervals over speakers, each speaker's mean outcome one unit (the
enrolled speakers for singling out, the test speakers for identification); their coverage is
measured by `benchmarks/legal_interval_coverage.py`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import comb
from scipy.stats import hypergeom
from scipy.stats import t as student_t

from pipeline.core.errors import VpevalError
from pipeline.core.schemas import Reidentification, check_of, require


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (a zero row stays zero)."""
    x = np.asarray(x, dtype=np.float64)
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norm > 0, norm, 1.0)


def conversation(utterances: np.ndarray) -> np.ndarray:
    """Embedding of conversations (..., L, D) -> (..., D): the L2-normalised mean of the L
    utterance embeddings."""
    return unit_rows(np.mean(np.asarray(utterances, dtype=np.float64), axis=-2))


def predicate_threshold(calibration_scores: np.ndarray, fires_on: int) -> float:
    """Threshold firing on `fires_on` calibration entries: the midpoint of the `fires_on`-th
    and next highest similarity (the reference's 9th and 10th for M = 9).

    >>> predicate_threshold(np.array([0.1, 0.9, 0.5, 0.7]), 2)
    0.6
    """
    ranked = np.sort(np.asarray(calibration_scores, dtype=np.float64))[::-1]
    if not 1 <= fires_on < len(ranked):
        raise ValueError(f"a threshold firing on {fires_on} entries needs more than {fires_on} calibration "
                         f"scores, got {len(ranked)}")
    return float((ranked[fires_on - 1] + ranked[fires_on]) / 2)


def isolation_rate(test: np.ndarray, enrolled: np.ndarray, calibration: np.ndarray, fires_on: int) -> float:
    """One fold: the share of enrolled embeddings whose calibrated predicate fires on exactly
    one test embedding (rows of each array are embeddings; cosine similarity)."""
    test, enrolled, calibration = unit_rows(test), unit_rows(enrolled), unit_rows(calibration)
    thresholds = np.array([predicate_threshold(row, fires_on) for row in enrolled @ calibration.T])
    fired = (enrolled @ test.T) > thresholds[:, None]
    return float(np.mean(fired.sum(axis=1) == 1))


def trivial_singling_out(population: int) -> float:
    """Isolation probability of a random predicate firing with probability 1/N on each of N
    entries: N (1/N)(1 - 1/N)^(N-1), which decreases to e^-1.

    >>> round(trivial_singling_out(2), 3), round(trivial_singling_out(10**6), 6)
    (0.5, 0.36788)
    """
    return float((1 - 1 / population) ** (population - 1))


def calibrated_null_singling_out(population: int, calibration_conversations: int = 9) -> float:
    """Isolation probability of the calibrated predicate when conversations carry no speaker
    information (every entry exchangeable): the number of the N test entries above the
    threshold is the number placed before the (M+1)-th highest of the M·N calibration
    entries in a random order, so P(exactly one) = (M+1) C(MN+N-M-2, N-1) / C(N(M+1), N)
    (below `trivial_singling_out`: 0.3672 against 0.3874 at N = 10, M = 9).

    >>> round(calibrated_null_singling_out(10, 9), 4)
    0.3672
    """
    n, m = population, calibration_conversations
    return float((m + 1) * comb(m * n + n - m - 2, n - 1, exact=True) / comb(n * (m + 1), n, exact=True))


def identification_probability(true_scores: np.ndarray, other_scores: np.ndarray, candidates: int) -> np.ndarray:
    """Per test entry, the probability that its speaker's score beats (strictly) every other
    candidate's when N' - 1 = `candidates` - 1 others are drawn without replacement from the
    K - 1 columns of `other_scores` (shape (entries, K - 1)): hypergeometric, exact."""
    other_scores = np.asarray(other_scores, dtype=np.float64)
    others = other_scores.shape[1]
    if not 1 <= candidates <= others + 1:
        raise ValueError(f"{candidates} candidates out of {others + 1} enrolled speakers")
    at_least = (other_scores >= np.asarray(true_scores, dtype=np.float64)[:, None]).sum(axis=1)
    return hypergeom.pmf(0, others, at_least, candidates - 1)


@dataclass(frozen=True)
class Estimate:
    """A rate, its interval over `units` speakers (`speaker_interval`; None with fewer than 2),
    the rate of a trivial attacker, each speaker's own rate, and (singling out) how many test
    speakers took part with fewer than M + 1 conversations, calibrated on K - 1 < M."""

    value: float
    low: float | None
    high: float | None
    units: int
    chance: float
    per_speaker: dict
    calibrated_on_fewer: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def speaker_interval(per_speaker: dict, confidence: float) -> tuple:
    """Student-t interval of the mean of the speakers' rates, mean ± t(n-1) s / sqrt(n), clipped
    to [0, 1]; (None, None) with fewer than 2 speakers. (A percentile bootstrap over speakers
    covered 0.907 and 0.920 at nominal 0.95 in `benchmarks/legal_interval_coverage.py` with 400
    populations, this interval 0.953 and 0.948; with 4000, 0.949 and 0.938: docs/metrics.md.)"""
    rates = np.array(list(per_speaker.values()), dtype=np.float64)
    if len(rates) < 2:
        return None, None
    half = student_t.ppf(0.5 + confidence / 2, len(rates) - 1) * rates.std(ddof=1) / np.sqrt(len(rates))
    return float(max(rates.mean() - half, 0.0)), float(min(rates.mean() + half, 1.0))


@dataclass(frozen=True)
class Grid:
    """What the metrics are computed over (config section `legal`): population sizes N,
    candidate counts N', conversation lengths L, calibration conversations per speaker M,
    random runs, the intervals' confidence, the seed of every draw, and what singling out does
    with a speaker of fewer than M + 1 conversations (calibrate or drop)."""

    populations: tuple[int, ...]
    candidates: tuple[int, ...]
    lengths: tuple[int, ...]
    calibration_conversations: int = 9
    runs: int = 5
    confidence: float = 0.95
    seed: int = 0
    short_speakers: str = "calibrate"


def conversations_of(utterances: int, length: int, calibration_conversations: int, short_speakers: str) -> int:
    """K: the conversations of L utterances a test speaker gives singling out, at most M + 1; 0
    when it cannot take part (fewer than 2, or under `drop` fewer than M + 1).

    >>> [conversations_of(n, 2, 9, "calibrate") for n in (3, 4, 9, 20, 50)], conversations_of(19, 2, 9, "drop")
    ([0, 2, 4, 10, 10], 0)
    """
    require(check_of(Reidentification, "short_speakers"), short_speakers, "reidentification.short_speakers")
    k = min(utterances // length, calibration_conversations + 1)
    least = 2 if short_speakers == "calibrate" else calibration_conversations + 1
    return k if k >= least else 0


def utterances_by_speaker(speakers) -> dict[str, np.ndarray]:
    """{speaker: row indices}, speakers sorted."""
    speakers = np.asarray(speakers, dtype=str)
    return {s: np.flatnonzero(speakers == s) for s in sorted(set(speakers.tolist()))}


def check_grid(grid: Grid, test_counts: dict[str, int], enrolled: set[str], key: str = "reidentification",
               data: str = "") -> None:
    """Refuse, in one line naming every bad key (and the evaluation set `data`), what the data
    allows and the largest grid that fits, a grid the data cannot serve: before any embedding
    is read. `test_counts`: the utterances of each test speaker; `enrolled`: the enrolled
    speakers (the candidates)."""
    problems, fits = grid_problems(grid, test_counts, enrolled, key, data)
    if problems:
        raise VpevalError(grid_error(problems, [fits], key))


def grid_error(problems: list[str], fits: list[dict[str, list[int]]], key: str = "reidentification") -> str:
    """One line: every problem, then the largest grid that fits every evaluation set (`fits`:
    the values of each set that fit it)."""
    largest = {name: [v for v in values if all(v in fit[name] for fit in fits)] for name, values in fits[0].items()}
    shown = " ".join(f"{key}.{name}=[{','.join(map(str, values))}]" for name, values in largest.items())
    return "; ".join(dict.fromkeys(problems)) + f"; the largest grid that fits: {shown}"


def grid_problems(grid: Grid, test_counts: dict[str, int], enrolled: set[str], key: str = "reidentification",
                  data: str = "") -> tuple[list[str], dict[str, list[int]]]:
    """(every problem of `grid` on this data, one line each; the values of `populations`,
    `candidates` and `lengths` that fit it)."""
    where = f" ({data})" if data else ""
    for name in ("calibration_conversations", "short_speakers"):  # the settings' own checks
        check, value = check_of(Reidentification, name), getattr(grid, name)
        if not check.test(value):
            return [f"{key}.{name}={value}{where}: must be {check.allowed}"], {}
    m = grid.calibration_conversations
    problems, lengths, populations = [], [], list(grid.populations)
    most = max(test_counts.values(), default=0)
    for length in grid.lengths:
        if length < 1 or length > most:
            problems.append(f"{key}.lengths{where}: L={length} but the test speakers have at most {most} utterances")
            continue
        eligible = [s for s, n in test_counts.items() if conversations_of(n, length, m, grid.short_speakers)]
        most_enrolled = max((n for s, n in test_counts.items() if s in enrolled), default=0)
        if grid.short_speakers == "drop":
            need, rule, bad = (m + 1) * length, "(M+1)*L", f"{key}.calibration_conversations={m}"
            hint = f": M <= {most_enrolled // length - 1}" if most_enrolled >= 2 * length else ""
        else:
            need, rule, bad = 2 * length, "2*L", f"{key}.lengths"
            hint = f": L <= {most_enrolled // 2}" if most_enrolled >= 2 else ""
        if grid.populations and not set(eligible) & enrolled:
            problems.append(f"{bad}{where}: at L={length} a speaker needs {rule}={need} test utterances for singling "
                            f"out, and no enrolled test speaker has that many (they have at most {most_enrolled}{hint})")
            continue
        if grid.candidates and not any(n >= length for s, n in test_counts.items() if s in enrolled):
            problems.append(f"{key}.lengths{where}: L={length} but no enrolled test speaker has that many utterances")
            continue
        lengths.append(length)
        for n in grid.populations:
            if not 2 <= n <= len(eligible):
                problems.append(f"{key}.populations{where}: N={n} but at L={length} only {len(eligible)} test "
                                f"speakers have {rule}={need} utterances (N must be in 2..{len(eligible)})")
                if n in populations:
                    populations.remove(n)
    candidates = []
    for n in grid.candidates:
        if 2 <= n <= len(enrolled):
            candidates.append(n)
        else:
            problems.append(f"{key}.candidates{where}: N'={n} but {len(enrolled)} speakers are enrolled "
                            f"(N' must be in 2..{len(enrolled)})")
    return problems, {"populations": populations, "candidates": candidates, "lengths": lengths}


def singling_out_rate(test_emb, test_spk, enroll_emb, enroll_spk, population: int, length: int,
                      calibration_conversations: int = 9, runs: int = 5, seed: int = 0,
                      confidence: float = 0.95, short_speakers: str = "calibrate") -> tuple[Estimate, dict]:
    """Singling out rate (see the module) over populations of `population` test speakers and
    conversations of `length` utterances; the estimate (`calibrated_on_fewer`: the eligible test
    speakers with K < M + 1 conversations) and the speakers left out ({"test": test speakers
    with no K (`conversations_of`), "enrolled": enrolled speakers not among the eligible test
    speakers})."""
    test_emb, enroll_emb = np.asarray(test_emb, dtype=np.float64), np.asarray(enroll_emb, dtype=np.float64)
    m = calibration_conversations
    by_test = utterances_by_speaker(test_spk)
    k = {s: conversations_of(len(rows), length, m, short_speakers) for s, rows in by_test.items()}
    eligible = [s for s in by_test if k[s]]
    by_enrolled = utterances_by_speaker(enroll_spk)
    owners = [s for s in by_enrolled if s in set(eligible)]
    left_out = {"test": len(by_test) - len(eligible), "enrolled": len(by_enrolled) - len(owners)}
    if not owners or not 2 <= population <= len(eligible):
        raise ValueError(f"population {population}: {len(eligible)} eligible test speakers, {len(owners)} enrolled")
    rng = np.random.default_rng(seed)
    per_speaker = {}
    folds = np.arange(m + 1)
    for owner in owners:
        probe = conversation(enroll_emb[by_enrolled[owner]])
        others = [s for s in eligible if s != owner]
        outcomes = []
        for _ in range(runs):
            members = [owner] + [others[i] for i in rng.choice(len(others), population - 1, replace=False)]
            counts = np.array([k[s] for s in members])
            # conversations of each member, padded to M + 1 by repeating its first (never used)
            drawn = np.stack([np.resize(rng.choice(by_test[s], k[s] * length, replace=False).reshape(k[s], length),
                                        (m + 1, length)) for s in members])
            scores = conversation(test_emb[drawn]) @ probe
            real = folds[None, :] < counts[:, None]
            for fold in folds:
                tested = fold % counts  # footnote 4: a speaker of K conversations tests each in turn
                calibration = real & (folds[None, :] != tested[:, None])
                threshold = predicate_threshold(scores[calibration], counts[0] - 1)
                outcomes.append(np.count_nonzero(scores[np.arange(population), tested] > threshold) == 1)
        per_speaker[owner] = float(np.mean(outcomes))
    low, high = speaker_interval(per_speaker, confidence)
    value = float(np.mean(list(per_speaker.values())))
    fewer = sum(1 for s in eligible if k[s] < m + 1)
    return Estimate(value, low, high, len(per_speaker), trivial_singling_out(population), per_speaker,
                    fewer), left_out


def identification_rate(test_emb, test_spk, enroll_emb, enroll_spk, candidates: int, length: int,
                        runs: int = 5, seed: int = 0, confidence: float = 0.95) -> tuple[Estimate, dict]:
    """Identification rate (see the module) among `candidates` enrolled speakers, exact over
    the draw of candidates, of `runs` conversations of `length` random utterances per test
    speaker; the estimate and the test speakers left out (not enrolled, or fewer than L
    utterances)."""
    test_emb, enroll_emb = np.asarray(test_emb, dtype=np.float64), np.asarray(enroll_emb, dtype=np.float64)
    by_enrolled = utterances_by_speaker(enroll_spk)
    names = list(by_enrolled)
    models = np.stack([conversation(enroll_emb[rows]) for rows in by_enrolled.values()])
    by_test = utterances_by_speaker(test_spk)
    tested = [s for s, rows in by_test.items() if s in by_enrolled and len(rows) >= length]
    left_out = {"test": len(by_test) - len(tested)}
    if not tested:
        raise ValueError(f"no enrolled test speaker has {length} utterances")
    rng = np.random.default_rng(seed)
    per_speaker = {}
    for speaker in tested:
        drawn = np.stack([rng.choice(by_test[speaker], length, replace=False) for _ in range(runs)])
        scores = conversation(test_emb[drawn]) @ models.T
        true = names.index(speaker)
        per_speaker[speaker] = float(np.mean(identification_probability(
            scores[:, true], np.delete(scores, true, axis=1), candidates)))
    low, high = speaker_interval(per_speaker, confidence)
    value = float(np.mean(list(per_speaker.values())))
    return Estimate(value, low, high, len(per_speaker), 1 / candidates, per_speaker), left_out


def legal_metrics(test_emb, test_spk, enroll_emb, enroll_spk, grid: Grid) -> dict:
    """Both rates over the grid: {"singling_out_rate": {"N=4,L=1": Estimate dict, ...},
    "identification_rate": {"N'=4,L=1": ...}, "left_out": {...}}."""
    found = {"singling_out_rate": {}, "identification_rate": {}, "left_out": {}}
    for length in grid.lengths:
        for n in grid.populations:
            estimate, left = singling_out_rate(test_emb, test_spk, enroll_emb, enroll_spk, n, length,
                                               grid.calibration_conversations, grid.runs, grid.seed,
                                               grid.confidence, grid.short_speakers)
            found["singling_out_rate"][f"N={n},L={length}"] = estimate.as_dict()
            found["left_out"][f"singling_out_rate,L={length}"] = left
        for n in grid.candidates:
            estimate, left = identification_rate(test_emb, test_spk, enroll_emb, enroll_spk, n, length,
                                                 grid.runs, grid.seed, grid.confidence)
            found["identification_rate"][f"N'={n},L={length}"] = estimate.as_dict()
            found["left_out"][f"identification_rate,L={length}"] = left
    return found

"""Utterance plans of the synthetic corpus: a phone inventory (ARPAbet-like labels, male
reference formants, source levels), words of syllables drawn to fill a duration, and the
per-frame synthesis parameters of a plan (`frame_tracks`, for `pipeline.signal.synthesis`)."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from pipeline.signal.synthesis import FRAME_MS, Voice, smooth


@dataclass(frozen=True)
class Phone:
    """One entry of the shared segment inventory.

    `formants` holds male reference targets (F1, F2, F3) in Hz, two for a diphthong;
    `voicing` the voiced source level; `frication` (centre Hz, bandwidth Hz, level) of the
    noise source (the burst, for a stop); `aspiration` the level of noise through the tract.
    """

    label: str
    kind: str  # vowel | nasal | liquid | fricative | stop | aspirate | silence
    spelling: str
    formants: tuple
    voicing: float = 0.0
    frication: tuple = ()
    aspiration: float = 0.0


LABIAL, ALVEOLAR, POSTALVEOLAR, VELAR = (300, 900, 2200), (300, 1700, 2600), (300, 1900, 2500), (300, 1800, 2300)
NEUTRAL = (500, 1500, 2500)
PHONES = (
    # vowels: Hillenbrand et al. (1995) men's averages; diphthongs glide between two targets
    Phone("IY", "vowel", "EE", ((342, 2322, 3000),), 1.0),
    Phone("IH", "vowel", "I", ((427, 2034, 2684),), 1.0),
    Phone("EY", "vowel", "AY", ((476, 2089, 2691), (360, 2250, 2900)), 1.0),
    Phone("EH", "vowel", "E", ((580, 1799, 2605),), 1.0),
    Phone("AE", "vowel", "A", ((588, 1952, 2601),), 1.0),
    Phone("AA", "vowel", "O", ((768, 1333, 2522),), 1.0),
    Phone("AO", "vowel", "AW", ((652, 997, 2538),), 1.0),
    Phone("OW", "vowel", "OA", ((497, 910, 2459), (400, 850, 2350)), 1.0),
    Phone("UH", "vowel", "OU", ((469, 1122, 2434),), 1.0),
    Phone("UW", "vowel", "OO", ((378, 997, 2343),), 1.0),
    Phone("AH", "vowel", "U", ((623, 1200, 2550),), 1.0),
    Phone("ER", "vowel", "ER", ((474, 1379, 1710),), 1.0),
    Phone("AY", "vowel", "IGH", ((768, 1333, 2522), (420, 2000, 2600)), 1.0),
    Phone("AW", "vowel", "OW", ((768, 1333, 2522), (450, 1000, 2400)), 1.0),
    Phone("OY", "vowel", "OY", ((560, 900, 2500), (420, 1900, 2600)), 1.0),
    # sonorant consonants
    Phone("M", "nasal", "M", ((250, 1100, 2200),), 0.35),
    Phone("N", "nasal", "N", ((250, 1600, 2500),), 0.35),
    Phone("L", "liquid", "L", ((360, 1300, 2700),), 0.7),
    Phone("R", "liquid", "R", ((330, 1060, 1380),), 0.7),
    Phone("W", "liquid", "W", ((290, 610, 2150),), 0.7),
    Phone("Y", "liquid", "Y", ((260, 2070, 3020),), 0.7),
    # fricatives: noise shaped by a resonance; voiced ones add the glottal source
    Phone("F", "fricative", "F", (LABIAL,), 0.0, (4000, 6000, 0.25)),
    Phone("TH", "fricative", "TH", (ALVEOLAR,), 0.0, (5000, 5000, 0.15)),
    Phone("S", "fricative", "S", (ALVEOLAR,), 0.0, (5500, 1800, 0.9)),
    Phone("SH", "fricative", "SH", (POSTALVEOLAR,), 0.0, (3000, 1400, 2.0)),
    Phone("V", "fricative", "V", (LABIAL,), 0.35, (4000, 6000, 0.14)),
    Phone("Z", "fricative", "Z", (ALVEOLAR,), 0.35, (5500, 1800, 0.5)),
    Phone("HH", "aspirate", "H", (NEUTRAL,), 0.0, (), 0.3),
    # stops: closure (voice bar when voiced), burst, aspiration when voiceless
    Phone("P", "stop", "P", (LABIAL,), 0.0, (1000, 2000, 0.8), 0.4),
    Phone("T", "stop", "T", (ALVEOLAR,), 0.0, (4000, 2500, 1.0), 0.4),
    Phone("K", "stop", "K", (VELAR,), 0.0, (2000, 1200, 1.0), 0.4),
    Phone("B", "stop", "B", (LABIAL,), 0.1, (1000, 2000, 0.5)),
    Phone("D", "stop", "D", (ALVEOLAR,), 0.1, (4000, 2500, 0.6)),
    Phone("G", "stop", "G", (VELAR,), 0.1, (2000, 1200, 0.6)),
)
SILENCE = Phone("SIL", "silence", "", (NEUTRAL,))
VOWELS = tuple(p for p in PHONES if p.kind == "vowel")
ONSETS = tuple(p for p in PHONES if p.kind != "vowel")
CODAS = tuple(p for p in PHONES if p.kind in ("nasal", "fricative", "stop") or p.label in ("L", "R"))
CLUSTER_SECONDS = tuple(p for p in PHONES if p.label in ("L", "R", "W"))
CLUSTER_FIRSTS = tuple(p for p in PHONES if p.kind == "stop" or p.label in ("F", "S"))
DURATION_MS = MappingProxyType({  # (low, high) of a uniform draw, before the tempo factor
    "vowel": (55, 110), "nasal": (45, 85), "liquid": (40, 80), "fricative": (70, 135),
    "aspirate": (45, 80), "silence": (80, 250),
})
STOP_MS = MappingProxyType({"closure": (40, 80), "burst": (8, 14), "aspiration": (25, 55)})


@dataclass(frozen=True)
class Segment:
    """One phone of an utterance plan, in milliseconds from the start."""

    phone: Phone
    start_ms: int
    end_ms: int
    stressed: bool = False
    parts_ms: tuple = ()  # stops: (closure, burst, aspiration) durations


def plan_utterance(rng: np.random.Generator, voice: Voice, total_ms: int) -> tuple[list[Segment], list[str]]:
    """Draw words (syllables of phones) filling `total_ms`; return the segments and the words."""
    tempo = voice.tempo * np.exp(rng.normal(0.0, 0.07))
    lead, trail = rng.uniform(*DURATION_MS["silence"]), rng.uniform(120.0, 300.0)
    silence_share = min(1.0, 0.4 * total_ms / (lead + trail))  # short utterances: shorter silences
    lead, trail = lead * silence_share, trail * silence_share
    budget = total_ms - lead - trail
    words: list[list[tuple]] = []  # per word: (phone, duration, stressed, stop parts)
    spoken = 0.0
    while spoken < budget:
        word = _draw_word(rng, tempo)
        if rng.random() < 0.12 and words:
            word.insert(0, (SILENCE, rng.uniform(80.0, 250.0), False, ()))
        length = sum(item[1] for item in word)
        if words and spoken + length / 2 > budget:
            break
        words.append(word)
        spoken += length
    scale = budget / spoken
    items = [(SILENCE, lead, False, ())]
    items += [(p, d * scale, s, tuple(x * scale for x in parts)) for word in words for p, d, s, parts in word]
    items.append((SILENCE, trail, False, ()))
    bounds = np.round(np.cumsum([0.0] + [item[1] for item in items])).astype(int)
    bounds[-1] = total_ms
    segments = [
        Segment(p, int(a), int(b), s, _round_parts(parts, int(b - a)))
        for (p, _, s, parts), a, b in zip(items, bounds[:-1], bounds[1:])
    ]
    text = ["".join(p.spelling for p, *_ in word) for word in words]
    return segments, text


def _round_parts(parts: tuple, total: int) -> tuple:
    """Whole milliseconds for the parts of a stop, summing to `total`."""
    if not parts:
        return ()
    edges = np.round(np.cumsum(parts) * total / sum(parts)).astype(int)
    return tuple(int(x) for x in np.diff(np.concatenate([[0], edges])))


def _draw_word(rng: np.random.Generator, tempo: float) -> list[tuple]:
    n_syllables = int(rng.choice([1, 2, 3], p=[0.5, 0.35, 0.15]))
    stressed = int(rng.integers(n_syllables))
    word = []
    for index in range(n_syllables):
        shape = rng.random()
        onset = [] if shape < 0.1 else [ONSETS[rng.integers(len(ONSETS))]]
        if shape > 0.9:
            onset = [CLUSTER_FIRSTS[rng.integers(len(CLUSTER_FIRSTS))], CLUSTER_SECONDS[rng.integers(len(CLUSTER_SECONDS))]]
        coda = [CODAS[rng.integers(len(CODAS))]] if rng.random() < 0.4 else []
        vowel = VOWELS[rng.integers(len(VOWELS))]
        for phone in onset + [vowel] + coda:
            word.append(_timed(rng, phone, tempo, index == stressed))
    return word


def _timed(rng: np.random.Generator, phone: Phone, tempo: float, stressed: bool) -> tuple:
    if phone.kind == "stop":
        parts = [rng.uniform(*STOP_MS["closure"]), rng.uniform(*STOP_MS["burst"])]
        parts.append(rng.uniform(*STOP_MS["aspiration"]) if phone.aspiration else 0.0)
        parts = tuple(x * tempo for x in parts)
        return phone, sum(parts), stressed, parts
    duration = rng.uniform(*DURATION_MS[phone.kind])
    if phone.kind == "vowel":
        duration *= (1.6 if stressed else 1.0) * (1.3 if len(phone.formants) > 1 else 1.0)
    return phone, duration * tempo, stressed, ()


def frame_tracks(segments: list[Segment], voice: Voice, n_frames: int) -> dict[str, np.ndarray]:
    """Per-frame synthesis parameters: source levels, formant targets, frication filter."""
    voicing, aspiration, frication = (np.zeros(n_frames) for _ in range(3))
    formants = np.tile(np.array(NEUTRAL, dtype=float), (n_frames, 1))
    fric_centre, fric_bandwidth = np.full(n_frames, 4000.0), np.full(n_frames, 4000.0)
    stress = np.zeros(n_frames, dtype=bool)
    vowel_index = {p.label: i for i, p in enumerate(VOWELS)}
    for position, seg in enumerate(segments):
        a, b = -(-seg.start_ms // FRAME_MS), -(-seg.end_ms // FRAME_MS)
        if b <= a:
            continue
        phone = seg.phone
        targets = np.array(phone.formants, dtype=float)
        if phone.kind == "vowel":
            targets = targets * np.array(voice.vowel_offsets[vowel_index[phone.label]])
        if phone.kind == "aspirate" and position + 1 < len(segments):
            targets = np.array(segments[position + 1].phone.formants[:1], dtype=float)
        weights = np.linspace(0.0, 1.0, b - a)[:, None]
        formants[a:b] = targets[0] * (1 - weights) + targets[-1] * weights
        level = (1.0 if seg.stressed else 0.75) if phone.kind == "vowel" else 1.0
        if phone.kind == "stop":
            closure, burst, _ = (round(x / FRAME_MS) for x in seg.parts_ms)
            burst = max(burst, 1)
            voicing[a:a + closure] = phone.voicing
            frication[a + closure:a + closure + burst] = phone.frication[2]
            aspiration[a + closure + burst:b] = phone.aspiration
        else:
            voicing[a:b] = phone.voicing * level
            aspiration[a:b] = phone.aspiration
            frication[a:b] = phone.frication[2] if phone.frication else 0.0
        if phone.frication:
            fric_centre[a:b] = phone.frication[0] * np.sqrt(voice.formant_scale[2])
            fric_bandwidth[a:b] = phone.frication[1]
        stress[a:b] = seg.stressed and phone.kind == "vowel"
    return {
        "voicing": smooth(voicing, 3),
        "aspiration": smooth(aspiration, 3),
        "frication": smooth(frication, 2),
        "formants": np.exp(smooth(np.log(formants), 7)),
        "fric_centre": fric_centre,
        "fric_bandwidth": fric_bandwidth,
        "stress": stress,
    }

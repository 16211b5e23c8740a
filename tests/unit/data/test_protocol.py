import pytest

from pipeline.core.errors import VpevalError
from pipeline.data.protocol import make_protocol
from tests.helpers import utterances

SPEAKERS = {"1": "f", "2": "f", "3": "f", "4": "f", "5": "m", "6": "m", "7": "m", "8": "m"}


def test_protocol_structure():
    utts = utterances(SPEAKERS, 6)
    p = make_protocol(utts, seed=0, enroll_fraction=0.75, enroll_utterances=2)
    enrolled = {u.speaker for u in p.enrolls}
    assert len(enrolled) == 6 and len(p.enrolls) == 12
    enroll_ids = {u.id for u in p.enrolls}
    for g in ("f", "m"):
        assert not enroll_ids & {u.id for u in p.trial_utts[g]}
        assert all(u.gender == g for u in p.trial_utts[g])
        assert len(p.trial_utts[g]) == 4 * 6 - 3 * 2
        by_id = {u.id: u for u in p.trial_utts[g]}
        for t in p.trials[g]:
            assert SPEAKERS[t.enroll] == g
            assert t.target == (by_id[t.test].speaker == t.enroll)
        assert len(p.trials[g]) == 3 * len(p.trial_utts[g])
    counts = p.counts()
    assert counts["f"]["target"] == 3 * 4 and counts["enroll_speakers"] == 6


def test_protocol_is_deterministic_and_seeded():
    utts = utterances(SPEAKERS, 6)
    a = make_protocol(utts, seed=1, enroll_fraction=0.5, enroll_utterances=2)
    b = make_protocol(list(reversed(utts)), seed=1, enroll_fraction=0.5, enroll_utterances=2)
    c = make_protocol(utts, seed=2, enroll_fraction=0.5, enroll_utterances=2)
    assert a == b
    assert a.enrolls != c.enrolls


def test_too_few_speakers_is_a_clear_error():
    with pytest.raises(VpevalError, match="at least 2 speakers"):
        make_protocol(utterances({"1": "f", "5": "m", "6": "m"}, 4), seed=0, enroll_fraction=1.0,
                      enroll_utterances=1)

"""Stage 7 — detect: EER on the attacker's validation split against EER on the test trials.

panariello2025 shows that when the attacker is trained on data anonymised like the
evaluation data (matched), EER_val and EER_test lie on one line; an attacker whose
EER_test sits far above its EER_val has not learnt what the test data needs, so the
privacy it reports is overestimated. Per attack this stage sets EER_val, EER_test (mean
of the female and male test trials, as VPC averages them) and their relative gap
(EER_test - EER_val) / EER_val side by side.
"""
from __future__ import annotations


def run(records: list[dict], test_split: str = "test") -> list[dict]:
    """One detection row per attack that has validation and test records."""
    rows = []
    for attack in dict.fromkeys(r["attack"] for r in records):
        own = {r["set"]: r for r in records if r["attack"] == attack}
        tests = [own[s] for s in (f"{test_split}_f", f"{test_split}_m") if s in own]
        if "val" not in own or not tests:
            continue
        eer_val = own["val"]["eer"]
        eer_test = sum(r["eer"] for r in tests) / len(tests)
        rows.append({
            "attack": attack,
            "anonymizer": tests[0]["anonymizer"],
            "attacker_anonymizer": own["val"]["attacker_anonymizer"],
            "eer_val": eer_val,
            "eer_test": eer_test,
            **{f"eer_{r['set']}": r["eer"] for r in tests},
            "relative_gap": (eer_test - eer_val) / eer_val if eer_val > 0 else None,
        })
    return rows

"""The verdicts in words: the first section of a report, written from its detection rows.

Which pairs overestimate privacy, by how much and why (each one's reason names the residual
and margin, or the better attacker), then the other verdicts with the pairs they hold
(separated by `;`).

>>> from pipeline.metrics.results import JudgedPair
>>> rows = [JudgedPair("AA", "s2", "s4", eer_val=0.09, eer_test=0.44, verdict="overestimated",
...                    reason="EER_val 30.00 points below the matched pairs' prediction")]
>>> print(summary_text(rows).splitlines()[0])
**1 of 1 pairs overestimate privacy** (1 overestimated).
"""
from __future__ import annotations

from pipeline.core.vocabulary import ORIGINAL
from pipeline.metrics.detection import NOT_FLAGGED, OVERESTIMATED, TRUSTWORTHY, UNDETERMINED
from pipeline.metrics.results import JudgedPair
from pipeline.report.tables import percent

MAX_LISTED = 8  # undetermined pairs named per reason; the detection table has them all

MEANING = {
    TRUSTWORTHY: "EER_val is surely within detect.tolerance of the matched pairs' prediction",
    NOT_FLAGGED: "EER_val is not far enough below the prediction for a flag, nor surely within detect.tolerance; "
                 "each one's margin is in the detection table",
}


def pair_label(row: JudgedPair, seeds: bool = False, groups: bool = False, job: bool = False) -> str:
    """`AA s2 (attacker trained on s4)`: the attack, the evaluated system and, when it differs,
    the attacker's; with the seed and group when the rows hold several, with the sweep's job
    that measured it when `job`."""
    if row.anonymizer == ORIGINAL and row.attacker_anonymizer == ORIGINAL:
        label, where = row.attack, ["original speech"]
    else:
        label = f"{row.attack} {row.anonymizer}"
        where = [f"attacker trained on {row.attacker_anonymizer}"] * (row.attacker_anonymizer != row.anonymizer)
    where += [f"seed {row.seed}"] * seeds + [str(row.group)] * groups
    if job and row.job is not None:
        where.append(f"job {row.job}")
    return f"{label} ({', '.join(where)})" if where else label


def summary_text(detection: list[JudgedPair]) -> str:
    """A headline (how many pairs overestimate privacy), a line per overestimated pair with its
    EERs and reason, then the pairs of every other verdict (undetermined ones grouped by reason)."""
    if not detection:
        return "No pair was judged: the run has no detection rows."
    seeds = len({row.seed for row in detection}) > 1
    groups = len({row.group for row in detection}) > 1
    by_verdict: dict[str, list[JudgedPair]] = {}
    for row in detection:
        by_verdict.setdefault(row.verdict or UNDETERMINED, []).append(row)
    counts = ", ".join(f"{len(by_verdict[v])} {v}" for v in (OVERESTIMATED, TRUSTWORTHY, NOT_FLAGGED, UNDETERMINED)
                       if v in by_verdict)
    flagged = by_verdict.get(OVERESTIMATED, [])
    headline = (f"**{len(flagged)} of {len(detection)} pairs overestimate privacy** ({counts})." if flagged else
                f"**No pair is flagged as overestimated** ({counts}).")
    parts = [headline]
    if flagged:
        parts.append("\n".join(f"- **{pair_label(r, seeds, groups, job=True)}**: EER_test {percent(r.eer_test)} %, "
                               f"EER_val {percent(r.eer_val)} %: {r.reason}." for r in flagged))
    for verdict in (TRUSTWORTHY, NOT_FLAGGED):
        if verdict in by_verdict:
            names = "; ".join(pair_label(r, seeds, groups) for r in by_verdict[verdict])
            parts.append(f"{verdict.capitalize()} ({len(by_verdict[verdict])}): {names}: {MEANING[verdict]}.")
    reasons: dict[str, list[JudgedPair]] = {}
    for row in by_verdict.get(UNDETERMINED, []):
        reasons.setdefault(reason_kind(str(row.reason)), []).append(row)
    if reasons:
        parts.append("\n".join(undetermined_line(kind, rows, seeds, groups) for kind, rows in reasons.items()))
    return "\n\n".join(parts)


def reason_kind(reason: str) -> str:
    """What an undetermined verdict's reason says, without its figures: the text before its
    first ':' when that text has no digit ('insufficient power: at EER_test 15.29 % ...' ->
    'insufficient power'), else the whole reason.

    >>> reason_kind("insufficient power: at EER_test 15.29 % a flag needs ...")
    'insufficient power'
    """
    head = reason.split(":", 1)[0]
    return head if head != reason and not any(c.isdigit() for c in head) else reason


def undetermined_line(kind: str, rows: list[JudgedPair], seeds: bool, groups: bool) -> str:
    """One line for the undetermined pairs of one kind of reason: the whole reason when they
    share it, else its kind, at most MAX_LISTED pairs named and each one's figures left to
    the detection table."""
    names = [pair_label(r, seeds, groups) for r in rows]
    shown = "; ".join(names[:MAX_LISTED]) + (f"; and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else "")
    if len({str(r.reason) for r in rows}) == 1:
        return f"- Undetermined ({len(rows)}): {shown}: {rows[0].reason}."
    return f"- Undetermined ({len(rows)}), {kind}: {shown}; each one's figures are in the detection table."

"""Utility beside privacy in reports: the utility table, its CSV rows and the privacy-utility figure.

`pipeline.app.utility.measure` gives, per evaluation set and pooled per split, ρF0 and the WER
of the original and anonymised trial utterances, the emotion UAR and the metrics it skipped
with their reasons; the tables print the columns with a header of
`pipeline.metrics.registry.UTILITY_METRICS`, in list order. The privacy-utility figure puts every evaluated system at its
semi-informed EER_test (the matched AA pair, with its speaker-bootstrap interval) against
its pooled WER and its ρF0 on the test split (with their utterance-bootstrap intervals).
"""
from __future__ import annotations

from pathlib import Path
from textwrap import fill

from matplotlib.figure import Figure

from pipeline.core.vocabulary import ANONYMIZED, ORIGINAL
from pipeline.metrics.contract import UTILITY, Column
from pipeline.metrics.pitch_correlation import describe
from pipeline.metrics.registry import UTILITY_METRICS, set_metrics, table_columns
from pipeline.metrics.results import ConditionResult, JudgedPair
from pipeline.report.document import Section
from pipeline.report.figures import save_figure
from pipeline.report.tables import percent

# Utility that says the anonymised speech is gone (the output check's second line, after the speech
# screen of anonymizers.base): ρF0 under LOST_PITCH is no intonation left at all (VPC 2022 asks
# > 0.3 of a usable system; the noise of issue 38 gave 0.000), and a WER
# of anonymised speech of LOST_WER or more is almost no word recognised, counted only where the
# recogniser reads the original speech (its WER has no `wer_note`).
LOST_PITCH = 0.1
LOST_WER = 0.9
SET_COLUMNS = table_columns(set_metrics())  # the utility table's, after the system and the set
EMOTION_COLUMNS = table_columns(metric for metric in UTILITY_METRICS if metric not in set_metrics())


def utility_rows(utility: dict, system: str | None = None) -> list[dict]:
    """One flat row per set and per pooled split (utility.csv)."""
    rows = [{"system": system, "set": name, **values} for name, values in utility.get("sets", {}).items()]
    rows += [{"system": system, "set": f"{split} (pooled)", **values}
             for split, values in utility.get("splits", {}).items()]
    return rows


def speech_lost(records: list[ConditionResult], utility: dict | None) -> list[dict]:
    """{attack, set, reason} of every result on trial speech anonymised by the evaluated system
    (AA, OA, ...) whose set's utility says the speech was lost: its privacy figures measure an
    attacker on something other than speech.

    >>> from pipeline.metrics.results import ConditionResult
    >>> aa = ConditionResult("AA", "s", "s", "anonymized", "anonymized", "test_f", metrics={})
    >>> speech_lost([aa], {"sets": {"test_f": {"pitch_correlation": 0.0}}})[0]["reason"]
    'ρF0 0.000 < 0.1'
    """
    found = []
    for record in records:
        values = (utility or {}).get("sets", {}).get(record.set)
        if record.trials != ANONYMIZED or not values:
            continue
        reasons = []
        if values.get("pitch_correlation") is not None and values["pitch_correlation"] < LOST_PITCH:
            reasons.append(f"ρF0 {values['pitch_correlation']:.3f} < {LOST_PITCH:g}")
        wer = values.get(f"wer_{ANONYMIZED}")
        if wer is not None and wer >= LOST_WER and not values.get("wer_note"):
            reasons.append(f"WER of anonymised speech {percent(wer)} % >= {100 * LOST_WER:g} % "
                           f"(original {percent(values.get(f'wer_{ORIGINAL}'))} %)")
        if reasons:
            found.append({"attack": record.attack, "set": record.set, "reason": "; ".join(reasons)})
    return found


def speech_lost_sections(flags: list[dict]) -> list[Section]:
    """A warning first in the report when some result's utility says the speech was lost."""
    if not flags:
        return []
    text = (f"**The anonymised speech looks lost**: for these results the utility of the evaluated system's output "
            f"says it is no longer speech (ρF0 < {LOST_PITCH:g}: no intonation left; WER >= {100 * LOST_WER:g} % "
            f"where the recogniser reads the original speech). Their privacy figures measure an attacker on "
            f"something other than speech and do not show privacy. The output check's speech screen "
            f"(output_check) passed it, or was turned off (docs/robustness.md, \"Output checks\").")
    return [Section("Warning: output that lost the speech", text,
                    tables=[(["attack", "set", "why"], [[f["attack"], f["set"], f["reason"]] for f in flags])])]


def table_rows(rows: list[dict]) -> list[list]:
    return [[r["system"], r["set"], *(utility_cell(column, r.get(column.key)) for column in SET_COLUMNS)] for r in rows]


def utility_cell(column: Column, value) -> str:
    """`value` in its column's format; an interval as [low, high]; '–' when missing.

    >>> utility_cell(Column("wer_ci", "WER CI %", scale=100, digits=2), [0.25, 0.35])
    '[25.00, 35.00]'
    """
    if value is None or (isinstance(value, list) and not value):
        return "–"
    if isinstance(value, list) and column.digits is not None:
        return f"[{column.format(value[0])}, {column.format(value[1])}]"
    return column.format(value)


def skipped_text(skipped: dict[str, str]) -> str:
    return " ".join(f"{metric} skipped: {reason}." for metric, reason in skipped.items())


def semi_informed_points(detection: list[JudgedPair], summaries: dict[str, dict], test_split: str = "test") -> list[dict]:
    """{system, eer, eer_ci, wer, pitch_correlation} per evaluated system with a matched
    anonymised pair (attacker trained on the evaluated system's output) and utility results."""
    points = []
    for row in detection:
        system = row.anonymizer
        if system == ORIGINAL or row.attacker_anonymizer != system or system not in summaries:
            continue
        pooled = summaries[system].get("splits", {}).get(test_split, {})
        points.append({"system": system, "eer": row.eer_test, "eer_ci": row.eer_test_ci,
                       "wer": pooled.get(f"wer_{ANONYMIZED}"), "wer_ci": pooled.get(f"wer_{ANONYMIZED}_ci"),
                       "pitch_correlation": pooled.get("pitch_correlation"),
                       "pitch_correlation_ci": pooled.get("pitch_correlation_ci")})
    return points


def privacy_utility_figure(points: list[dict], path: Path, skipped: dict[str, str] | None = None) -> Path | None:
    """`privacy_utility_plot` saved to `path`; None when there is no figure."""
    figure = privacy_utility_plot(points, skipped)
    return None if figure is None else save_figure(figure, path)


def privacy_utility_plot(points: list[dict], skipped: dict[str, str] | None = None) -> Figure | None:
    """EER (semi-informed) against WER and against ρF0, one point per system with the bootstrap
    intervals of both (EER: speakers; WER, ρF0: utterances); None when no point has either
    utility value. An empty panel says why (`skipped`: metric -> reason)."""
    panels = [("wer", "WER of anonymised speech (%)", 100), ("pitch_correlation", "ρF0", 1)]
    if not any(p[key] is not None for p in points for key, _, _ in panels):
        return None
    figure = Figure(figsize=(10, 4.2))
    for index, (key, label, scale) in enumerate(panels, start=1):
        axes = figure.add_subplot(1, 2, index)
        if not any(p[key] is not None for p in points):
            reason = next((r for metric, r in (skipped or {}).items() if metric.split(" ")[0] == key), "not measured")
            axes.text(0.5, 0.5, fill(f"no {label.split(' (')[0]}: {reason}", 40, break_on_hyphens=False), ha="center", va="center",
                      transform=axes.transAxes, fontsize=9, color="dimgrey")
        for p in (p for p in points if p[key] is not None):
            low, high = p["eer_ci"] or (p["eer"], p["eer"])
            left, right = p.get(f"{key}_ci") or (p[key], p[key])
            axes.errorbar(scale * p[key], 100 * p["eer"], yerr=[[100 * (p["eer"] - low)], [100 * (high - p["eer"])]],
                          xerr=[[scale * (p[key] - left)], [scale * (right - p[key])]], fmt="o", capsize=3)
            axes.annotate(p["system"], (scale * p[key], 100 * p["eer"]), textcoords="offset points", xytext=(4, 4),
                          fontsize=8)
        axes.set_xlabel(label)
        axes.set_ylabel("EER, semi-informed attacker (%)")
        axes.grid(alpha=0.3)
    figure.suptitle("Privacy against utility (test split; bars: bootstrap intervals)")
    return figure


def utility_section(rows: list[dict], skipped: dict[str, str], emotion: list[list], points: list[dict],
                    figures: Path, pitch_methods: list[dict] = (), wer_rules: list[str] = ()) -> Section:
    """The utility table, the emotion UAR, what was skipped and the privacy-utility figure;
    `pitch_methods`: the {"tracker", "rule"} of each ρF0 in the table ({}: YIN frame by frame, voiced,
    as results written before the settings); `wer_rules`: the text rule of each WER
    (`utility.wer_text`; results written before name none)."""
    methods = "; ".join(dict.fromkeys(describe(**method) for method in pitch_methods)) or describe()
    rules = ", ".join(dict.fromkeys(wer_rules))
    text = ("Utility of the evaluated system on the same trial utterances as the privacy table: ρF0 (VPC 2022, "
            f"Pearson correlation of original and anonymised F0: {methods}; mean over utterances) "
            "and the recogniser's WER on original and anonymised speech"
            f"{f' (text rule utility.wer_text={rules})' if rules else ''}; pooled rows count every utterance of "
            "the split.")
    if skipped:
        text += " " + skipped_text(skipped)
    weak = [r for r in rows if r.get("wer_note")]
    if weak:
        where = ", ".join(f"{r['system'] or ''} {r['set']}".strip() for r in weak)
        text += f" WER not meaningful for {where}: {weak[0]['wer_note']}."
    tables = [(["system", "set", *(column.header for column in SET_COLUMNS)], table_rows(rows))] if rows else []
    if emotion:
        tables.append((["system", *(column.header for column in EMOTION_COLUMNS)], emotion))
    figure = privacy_utility_figure(points, figures / "privacy_utility.png", skipped)
    return Section(UTILITY, text, tables=tables, figures=[figure] if figure else [])


def emotion_rows(utility: dict, system: str | None) -> list[list]:
    found = utility.get("emotion") or {}
    if not found:
        return []
    return [[system, *(utility_cell(column, found.get(column.key)) for column in EMOTION_COLUMNS)]]

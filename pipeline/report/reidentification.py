"""Re-identification beyond the EER in reports: singling out and identification rates over
the grid (with their intervals and chance levels), rank disclosure, and a figure of the rates
against N and N' per conversation length L, from the records' grid cells
(`pipeline.metrics.results.RateCell`, `pipeline.metrics.reidentification`)."""
from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from pipeline.metrics.bootstrap import few_speakers_note
from pipeline.metrics.reidentification import IDENTIFICATION, SINGLING_OUT
from pipeline.metrics.results import ConditionResult
from pipeline.report.document import Section
from pipeline.report.figures import save_figure
from pipeline.report.tables import fixed, percent

METRICS = ((SINGLING_OUT, "N", "singling out"), (IDENTIFICATION, "N'", "identification"))  # rate, size, label


def conditions(records: list[ConditionResult]) -> dict[str, dict]:
    """{"<attack>/<set>": {metric: {(N, L): estimate}, "rank_disclosure": detail}} of the records
    that carry re-identification results (a rate's cells with an estimate)."""
    found = {}
    for r in records:
        rates = {metric: {(c.n, c.length): c.estimate for c in r.rates if c.metric == metric and c.estimate}
                 for metric, _, _ in METRICS}
        disclosure = r.metrics.get("rank_disclosure_detail")
        if any(rates.values()) or disclosure:
            found[f"{r.attack}/{r.set}"] = {**rates, "rank_disclosure": disclosure}
    return found


def rate_rows(found: dict[str, dict]) -> list[list]:
    """One table row per condition, metric and grid cell."""
    rows = []
    for condition, result in found.items():
        for metric, size, label in METRICS:
            for (n, length), e in result[metric].items():
                interval = "–" if e["low"] is None else f"[{percent(e['low'])}, {percent(e['high'])}]"
                note = few_speakers_note(e["units"])
                interval += f" ({note})" if note else ""
                rows.append([condition, label, f"{size}={n}, L={length}", percent(e["value"]), interval,
                             percent(e["chance"]), e["units"]])
    return rows


def disclosure_rows(found: dict[str, dict]) -> list[list]:
    rows = []
    for condition, result in found.items():
        d = result.get("rank_disclosure")
        if d:
            rows.append([condition, d["candidates"], d["items"], fixed(d["histogram"]["average"], 3),
                         fixed(d["histogram"]["worst"], 3), fixed(d["beta_binomial"]["average"], 3),
                         fixed(d["beta_binomial"]["worst"], 3)])
    return rows


def rates_figure(found: dict[str, dict], path: Path) -> Path:
    """Each rate against N (N') per L, one line per condition, chance dashed."""
    lengths = sorted({length for r in found.values() for m, _, _ in METRICS for _, length in r[m]})
    figure = Figure(figsize=(4.5 * max(len(lengths), 1), 7))
    grid = figure.subplots(2, max(len(lengths), 1), squeeze=False)
    for row, (metric, size, label) in enumerate(METRICS):
        for col, length in enumerate(lengths):
            axes = grid[row][col]
            chance = {}
            for condition, result in found.items():
                points = sorted((n, e) for (n, at), e in result[metric].items() if at == length)
                if not points:
                    continue
                axes.errorbar([n for n, _ in points], [e["value"] for _, e in points], marker="o", capsize=3,
                              label=condition,
                              yerr=[[e["value"] - (e["low"] if e["low"] is not None else e["value"]) for _, e in points],
                                    [(e["high"] if e["high"] is not None else e["value"]) - e["value"] for _, e in points]])
                chance.update({n: e["chance"] for n, e in points})
            if chance:
                axes.plot(sorted(chance), [chance[n] for n in sorted(chance)], "k--", label="chance")
                axes.set_xscale("log")
                axes.set_xticks(sorted(chance), [str(n) for n in sorted(chance)])
                axes.minorticks_off()
            axes.set(ylim=(0, 1), xlabel=f"{size} ({'test speakers' if size == 'N' else 'candidates'})",
                     ylabel=f"{label} rate", title=f"{label}, L = {length}")
            axes.grid(alpha=0.3)
    grid[0][0].legend(fontsize=7)
    figure.tight_layout()
    return save_figure(figure, path)


def reidentification_sections(records: list[ConditionResult], figures: Path) -> list[Section]:
    """The re-identification section of the records (none when they carry no such results)."""
    found = conditions(records)
    if not found:
        return []
    tables = []
    rates = rate_rows(found)
    if rates:
        tables.append((["condition", "metric", "grid cell", "rate %", "CI %", "chance %", "speakers"], rates))
    disclosure = disclosure_rows(found)
    if disclosure:
        tables.append((["condition", "K enrolled", "items", "avg bits (histogram)", "worst bits (histogram)",
                        "avg bits (beta-binomial)", "worst bits (beta-binomial)"], disclosure))
    left_out = sorted({f"{c} {metric} N={n} L={length}: " + ", ".join(f"{k} {v}" for k, v in e["left_out"].items())
                       for c, r in found.items() for metric, _, _ in METRICS for (n, length), e in r[metric].items()
                       if any(e["left_out"].values())})
    return [Section(
        "Re-identification: singling out, identification rate, rank disclosure",
        "Singling out and identification rate as vauquier2025 (legal-eval) define them, from the attacker's "
        "cosine similarities of conversations (the normalised mean of L utterance embeddings): not the EER and "
        "not D↔sys. Singling out: the share of calibrated predicates (firing on 1/N of M·N calibration "
        "conversations; a speaker with only K < M+1 conversations calibrates on K−1, vauquier2025's footnote 4) "
        "that isolate exactly one of N test conversations (chance N(1/N)(1−1/N)^(N−1) → 1/e). "
        "Identification rate: the true enrolled speaker beats N'−1 random others (exact hypergeometric; chance "
        "1/N'). Intervals: Student t over speakers (coverage measured: docs/metrics.md). Rank disclosure: bits disclosed by the rank of the "
        "true speaker's similarity among all K enrolled speakers (0: none; log2 K: always first)."
        + (" Speakers left out: " + "; ".join(left_out) + "." if left_out else ""),
        tables=tables, figures=[rates_figure(found, figures / "reidentification.png")] if rates else [])]

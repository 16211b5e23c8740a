"""The detectors' false-alarm rate and detection rates on a finished sweep, with intervals.

Reads a sweep's aggregate (`<sweep dir>/aggregate/results.json`, written by `vpeval -m
+experiment=detection_power`), judges its anonymised AA rows again under each detector
variant with `pipeline.metrics.detection.assess` (no audio: the rows keep their EERs and
bootstrap replicates) and counts, per variant:

- false alarms on the trusted matched pairs, each judged leave-one-out against the others
  of its seed, counted only over the pairs that could have been flagged (a flag needed an
  EER_val >= 0, or another attacker was compared on the same trials): a pair that no
  EER_val could flag is no evidence for the rate;
- detections of the hidden mismatch, the speaker-level attacker on speaker-level data
  (`--hidden`, panariello2025 Table 3), one per seed;
- detections of full mismatches whose EER_test exceeds their column's matched EER_test (same
  seed) by more than `--gap` (5 points): a privacy estimate overestimated by that much.

    python recipes/detection_power/power.py <sweep dir> [--out DIR]

Prints a table (rates in % with 95 % Wilson intervals, and the hidden mismatch per seed),
writes it with the counts to `<out>/power.md` and `power.json`, and the rates as
`<out>/power.png`. Fewer than 2 seeds is one line naming the key (the study needs repeats)
and exit status 2, the report still written with every rate undetermined.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from pipeline.app.aggregate import OUT, trusted_spec
from pipeline.core.errors import VpevalError, input_error
from pipeline.core.fileio import write_json, write_text
from pipeline.core.vocabulary import ORIGINAL
from pipeline.metrics.detection import Settings, assess, is_matched, read_trusted, wilson_interval
from pipeline.metrics.results import SweepSummary
from pipeline.report.figures import save_figure
from pipeline.report.tables import markdown_table

VARIANTS = {  # label -> (settings, which flag counts)
    "line": (Settings(method="line", column=False), "flag"),
    "gap": (Settings(method="gap", column=False), "flag"),
    "gap_re": (Settings(method="gap_re", column=False), "flag"),
    "column (α/2)": (Settings(method="gap", column=True), "column"),
    "gap + column (default)": (Settings(method="gap", column=True), "flag"),
}
CLASSES = ("false alarms on matched pairs", "hidden mismatch", "full mismatches")


def load(sweep: Path) -> tuple[list[dict], list[str], str]:
    """(AA detection rows of every seed, trusted systems, corpora) of a sweep's aggregate."""
    results = sweep / OUT / "results.json"
    if not results.is_file():
        raise input_error(results, "no aggregate here: give the folder of a finished `vpeval -m "
                                   "+experiment=detection_power` sweep")
    found = SweepSummary.from_json(results)
    trusted = next((j.config.detect.trusted for j in found.jobs if j.config.detect.trusted), None)
    rows = [pair.row() for pair in found.detection if pair.anonymizer != ORIGINAL]
    return rows, trusted_spec(trusted) or [], ", ".join(sorted({str(j.config.data) for j in found.jobs}))


def classes(rows: list[dict], trusted: list[str], hidden: str, gap: float) -> dict[str, list[int]]:
    """Indices of the rows of each class (see the module docstring)."""
    matched = {(r["seed"], r["anonymizer"]): r["eer_test"] for r in rows if is_matched(r)}
    found = {name: [] for name in CLASSES}
    for i, r in enumerate(rows):
        if is_matched(r) and r["anonymizer"] in trusted:
            found[CLASSES[0]].append(i)
        elif is_matched(r) and r["anonymizer"] == hidden:
            found[CLASSES[1]].append(i)
        elif not is_matched(r) and r["eer_test"] > matched.get((r["seed"], r["anonymizer"]), 1.0) + gap:
            found[CLASSES[2]].append(i)
    return found


def flaggable(row: dict, kind: str) -> bool:
    """Whether a judged row could have been flagged by the test(s) that `kind` counts."""
    by_column = row.get("column") is not None
    by_val_test = row.get("flag_below") is not None and row["flag_below"] >= 0
    return by_column if kind == "column" else by_val_test or by_column


def measure(rows: list[dict], trusted: list[str], members: dict[str, list[int]]) -> dict[str, dict]:
    """Per variant and class: flagged, total (false alarms: over the flaggable rows only), the
    rate's interval, and the flag of each row counted."""
    measured = {}
    for label, (settings, kind) in VARIANTS.items():
        judged, _ = assess(rows, trusted=read_trusted(trusted), settings=settings)
        order = {(r["seed"], r["attack"], r["anonymizer"], r["attacker_anonymizer"]): r for r in judged}
        judged = [order[(r["seed"], r["attack"], r["anonymizer"], r["attacker_anonymizer"])] for r in rows]
        flags = [bool(r["flag"]) if kind == "flag" else bool(r.get("column") and r["column"]["flag"]) for r in judged]
        measured[label] = {}
        for name, indices in members.items():
            if name == CLASSES[0]:
                indices = [i for i in indices if flaggable(judged[i], kind)]
            flagged = sum(flags[i] for i in indices)
            measured[label][name] = {"flagged": flagged, "n": len(indices),
                                     "interval": wilson_interval(flagged, len(indices)) if indices else None,
                                     "rows": {f"seed {rows[i]['seed']}: ({rows[i]['anonymizer']}, "
                                              f"{rows[i]['attacker_anonymizer']})": flags[i] for i in indices}}
    return measured


def rate(entry: dict) -> str:
    if not entry["n"]:
        return "– (no such row)"
    low, high = entry["interval"]
    return f"{100 * entry['flagged'] / entry['n']:.0f} [{100 * low:.0f}, {100 * high:.0f}] ({entry['flagged']}/{entry['n']})"


def render(measured: dict, hidden: str) -> str:
    table = markdown_table(["variant", *(f"{c} %" for c in CLASSES)],
                           [[label, *(rate(entry[c]) for c in CLASSES)] for label, entry in measured.items()])
    per_seed = sorted(next(iter(measured.values()))[CLASSES[1]]["rows"])
    seeds = markdown_table(["variant", *per_seed],
                           [[label, *("flagged" if entry[CLASSES[1]]["rows"][k] else "no" for k in per_seed)]
                            for label, entry in measured.items()])
    return f"{table}\n\nHidden mismatch ({hidden} attacker on {hidden} data), per seed:\n\n{seeds}\n"


def figure(measured: dict, corpus: str, path: Path) -> Path:
    """Grouped bars: each class's rate per variant, with its Wilson interval; `corpus` names the sweep's data."""
    fig = Figure(figsize=(9, 4))
    axes = fig.add_subplot()
    width = 0.8 / len(CLASSES)
    for k, name in enumerate(CLASSES):
        xs = np.arange(len(measured)) + k * width
        entries = [m[name] for m in measured.values()]
        rates = [100 * e["flagged"] / e["n"] if e["n"] else 0 for e in entries]
        low = [r - 100 * e["interval"][0] if e["n"] else 0 for r, e in zip(rates, entries)]
        high = [100 * e["interval"][1] - r if e["n"] else 0 for r, e in zip(rates, entries)]
        axes.bar(xs, rates, width, yerr=[low, high], capsize=3, label=name)
    axes.axhline(5, color="grey", linestyle=":", linewidth=1)
    axes.set_xticks(np.arange(len(measured)) + width, list(measured), fontsize="small")
    axes.set_ylabel("flagged [%] (95 % Wilson interval)")
    axes.set_ylim(0, 105)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))  # beside: the bars reach 100
    axes.set_title(f"Detectors on the 5 x 5 sweep, {corpus} (dotted: 5 %)")
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", type=Path, help="folder of the detection_power sweep")
    parser.add_argument("--out", type=Path, help="report folder (default: <sweep>/aggregate)")
    parser.add_argument("--hidden", default="mcadams_speaker", help="the hidden-mismatch system (mcadams_speaker)")
    parser.add_argument("--gap", type=float, default=0.05, help="full mismatches counted: EER_test above the "
                                                                "column's matched one by more than this (0.05)")
    args = parser.parse_args(argv)
    out = args.out or args.sweep / OUT
    try:
        rows, trusted, corpus = load(args.sweep)
        seeds = sorted({r["seed"] for r in rows}, key=str)
        if len(seeds) < 2:
            write_text(out / "power.md", f"undetermined: the sweep ran {len(seeds)} seed(s); the power study needs "
                                         "at least 2 (hydra.sweeper.params.seed, e.g. -m seed=1,2,3)\n")
            raise VpevalError(f"hydra.sweeper.params.seed: the sweep ran {len(seeds)} seed(s) ({seeds}); the power "
                              f"study needs at least 2 (-m seed=1,2,3); {out / 'power.md'} says undetermined")
        measured = measure(rows, trusted, classes(rows, trusted, args.hidden, args.gap))
    except VpevalError as error:
        print(f"power: error: {error}", file=sys.stderr)
        return 2
    text = render(measured, args.hidden)
    write_text(out / "power.md", text)
    write_json(out / "power.json", {"seeds": seeds, "trusted": trusted, "hidden": args.hidden, "gap": args.gap,
                                    "measured": measured})
    figure(measured, corpus, out / "power.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Results in the layout of the VoicePrivacy 2026 toolkit's `result_for_rank<suffix>` file.

VPC 2026 (`02_run_track1.sh`, `02_run_track2.sh`) concatenates the summary of its pre
evaluation (`---- SER results ----`, `---- ASV_eval results ----` with the pretrained
attacker, `---- ASR results ----`) and, after a blank line, one `---- ASV_eval^anon
results ----` summary per semi-informed attacker (one for Track 1, one per language for
Track 2), each opened by a `---- Time: dd-mm-yy_HH:MM ----` line. Every table is a pandas
`DataFrame.to_string()`: rows sorted by dataset and split, the index of the row in VPC's
unfiltered frame, EER/WER in percent rounded to 3 decimals, floats printed with the column's
common number of decimals. The ASV tables keep the mixed-gender trials with anonymised
enrolment and trials only.

vpeval's rows: ASV_eval is the attack with anonymised enrolment and trials scored by the
attacker trained on original data (VPC 2026's pretrained `asv_ssl`: AA-lazy with
`attacker.pretrained`), ASV_eval^anon the one scored by the attacker trained on anonymised
data (AA); WER is a split's pooled trial-utterance WER (`utility.measure`'s `splits`), SER
the UAR (and the recall of each class, VPC's `ACC_<label>`) of `emotion.data`.

>>> frame_text(["dataset", "EER"], [["libri", 7.22], ["libri", 11.423]], index=[2, 5]).splitlines()
['  dataset     EER', '2   libri   7.220', '5   libri  11.423']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Mapping, Sequence

from pipeline.core.fileio import write_lines
from pipeline.core.vocabulary import ANONYMIZED, CONDITIONS, ORIGINAL, VPC_LABELS
from pipeline.metrics.results import ConditionResult, RunSummary

ASV_EVAL = (ANONYMIZED, ANONYMIZED, ORIGINAL)  # enroll, trials, attacker: the pretrained attacker
ASV_EVAL_ANON = (ANONYMIZED, ANONYMIZED, ANONYMIZED)  # the semi-informed attacker
ASV_COLUMNS = ["dataset", "split", "gender", "enrollment", "trial", "EER"]
ASR_COLUMNS = ["dataset", "split", "asr", "WER"]
SCENARIOS_PER_LIST = 3  # VPC scores oo, oa, aa for every trial list: aa is row 3k + 2
TIME_FORMAT = "%d-%m-%y_%H:%M"
SPLITS = ("dev", "test")


@dataclass(frozen=True)
class RunResults:
    """What one vpeval run measured on one dataset (`libri`, or an MLS language `en`...)."""

    dataset: str
    eval_splits: Sequence[str]
    records: Sequence[ConditionResult]  # attack, set, metric eer_threshold
    attacks: Mapping[str, Mapping]  # attack specs: enroll, trials, attacker
    utility: Mapping = field(default_factory=dict)  # utility.measure's result
    trial_list: str = "mixed"  # the trial lists' gender tag: sets are named <split>_<trial_list>


def format_column(values: list) -> list[str]:
    """pandas' cell text: floats with the common number of decimals (at most 6, at least 1)."""
    if not values or not all(isinstance(v, float) for v in values):
        return [str(v) for v in values]
    texts = [f"{v:.6f}" for v in values]
    while all(t.endswith("0") and not t.endswith(".0") for t in texts):
        texts = [t[:-1] for t in texts]
    return texts


def frame_text(columns: Sequence[str], rows: Sequence[Sequence], index: Sequence[int],
               second_header: Sequence[str] | None = None) -> str:
    """`pandas.DataFrame(rows, index, columns).to_string()`: the index left-justified, every cell
    right-justified after a leading space, columns one space apart; `second_header` is the
    second level of a two-level header (VPC's SER table after `agg({'UAR': ['mean']})`)."""
    cells = [[" " + text for text in format_column([row[i] for row in rows])] for i in range(len(columns))]
    headers = [list(columns)] + ([list(second_header)] if second_header else [])
    widths = [max(len(cell) for cell in [*column, *(h[i] for h in headers)]) for i, column in enumerate(cells)]
    index_texts = [str(i) for i in index]
    index_width = max(len(text) for text in index_texts)
    lines = [" ".join([" " * index_width, *(h[i].rjust(w) for i, w in enumerate(widths))]) for h in headers]
    lines += [" ".join([index_texts[r].ljust(index_width), *(cells[i][r].rjust(w) for i, w in enumerate(widths))])
              for r in range(len(rows))]
    return "\n".join(lines)


def percent(value: float) -> float:
    """VPC's `round(x * 100, 3)`."""
    return round(float(value) * 100, 3)


def attack_named(attacks: Mapping[str, Mapping], kind: tuple[str, str, str]) -> str | None:
    """The attack whose (enroll, trials, attacker) is `kind`, None when the run has none."""
    found = [name for name, spec in attacks.items() if (spec["enroll"], spec["trials"], spec["attacker"]) == kind]
    return found[0] if found else None


def asv_table(runs: Sequence[RunResults], kind: tuple[str, str, str]) -> str | None:
    """The ASV rows of `kind` of every run, numbered as in VPC's frame of all datasets' lists; a
    list that several runs scored alike (a sweep's jobs that differ only in their emotion data)
    is listed once."""
    lists = []  # (dataset, split, trial list, EER % or None), in VPC's frame order
    for run in runs:
        attack = attack_named(run.attacks, kind)
        eers = {r.set: r.metrics["eer_threshold"] for r in run.records if r.attack == attack}
        for split in run.eval_splits:
            name = f"{split}_{run.trial_list}"
            lists.append((run.dataset, split, run.trial_list,
                          percent(eers[name]) if attack is not None and name in eers else None))
    rows, index = [], []
    for position, (dataset, split, trial_list, eer) in enumerate(dict.fromkeys(lists)):
        if eer is not None:
            rows.append([dataset, split, trial_list, VPC_LABELS[ANONYMIZED], VPC_LABELS[ANONYMIZED], eer])
            index.append(position * SCENARIOS_PER_LIST + SCENARIOS_PER_LIST - 1)
    return sorted_table(ASV_COLUMNS, rows, index) if rows else None


def asr_table(runs: Sequence[RunResults]) -> str | None:
    """Original and anonymised WER of every run's splits, numbered as VPC's frame lists them
    (every original set first, then every anonymised one); a split several runs measured alike
    is listed once."""
    measured = {(run.dataset, split, *(run.utility.get("splits", {}).get(split, {}).get(f"wer_{kind}")
                                       for kind in CONDITIONS)): None for run in runs for split in run.eval_splits}
    sets = [(dataset, split, dict(zip((f"wer_{kind}" for kind in CONDITIONS), wers)))
            for dataset, split, *wers in measured]
    rows, index = [], []
    for offset, kind in enumerate(CONDITIONS):
        for position, (dataset, split, values) in enumerate(sets):
            if values.get(f"wer_{kind}") is not None:
                rows.append([dataset, split, VPC_LABELS[kind], percent(values[f"wer_{kind}"])])
                index.append(offset * len(sets) + position)
    return sorted_table(ASR_COLUMNS, rows, index) if rows else None


def emotion_dataset(data: str) -> tuple[str, str]:
    """(dataset, split) of an emotion data dir as VPC names them: IEMOCAP_dev -> IEMOCAP, dev;
    emodata_track2_test -> emodata, test."""
    parts = Path(data).name.split("_") if "_" in Path(data).name else [Path(data).name, "_"]
    return parts[0], parts[-1] if len(parts) >= 3 and parts[-1] in SPLITS else parts[1]


def ser_table(runs: Sequence[RunResults]) -> str | None:
    """UAR and per-class recall (VPC's ACC_<label>) of the emotion data, anonymised then original."""
    measured = [run.utility["emotion"] for run in runs
                if run.utility.get("emotion", {}).get(f"uar_{ORIGINAL}") is not None]
    if not measured:
        return None
    labels = sorted({label for found in measured for label in found.get(f"class_recall_{ORIGINAL}", {})})
    rows = []
    for found in measured:
        dataset, split = emotion_dataset(found["data"])
        for kind in (ANONYMIZED, ORIGINAL):
            recalls = found.get(f"class_recall_{kind}", {})
            row = [dataset, split, VPC_LABELS[kind], percent(found[f"uar_{kind}"]),
                   *(percent(recalls[c]) for c in labels)]
            if row not in rows:  # several runs on the same emotion data, measured alike
                rows.append(row)
    columns = ["dataset", "split", "ser", "UAR", *(f"ACC_{c}" for c in labels)]
    rows.sort(key=lambda row: (row[0], row[1], row[2]))  # VPC's groupby order
    return sorted_table(columns, rows, list(range(len(rows))), ["", "", "", *["mean"] * (len(labels) + 1)])


def sorted_table(columns, rows, index, second_header=None) -> str:
    """The table with its rows sorted by dataset and split, keeping ties in order (pandas'
    `sort_values(by=['dataset', 'split'])`)."""
    order = sorted(range(len(rows)), key=lambda r: (rows[r][0], rows[r][1]))
    return frame_text(columns, [rows[r] for r in order], [index[r] for r in order], second_header)


def summary(time: datetime, sections: Sequence[tuple[str, str | None]]) -> list[str]:
    """One of VPC's `results_orig.txt` / `results_anon.txt` summaries, as lines."""
    lines = [f"---- Time: {time.strftime(TIME_FORMAT)} ----"]
    for title, table in sections:
        if table is not None:
            lines += ["", f"---- {title} results ----", *table.splitlines()]
    return lines


def result_for_rank(runs: Sequence[RunResults], time: datetime) -> list[str]:
    """The lines of VPC 2026's `result_for_rank` of these runs (one per dataset or language)."""
    lines = summary(time, [("SER", ser_table(runs)), ("ASV_eval", asv_table(runs, ASV_EVAL)),
                           ("ASR", asr_table(runs))])
    for table in dict.fromkeys(asv_table([run], ASV_EVAL_ANON) for run in runs):  # runs alike: once
        if table is not None:
            lines += ["", *summary(time, [("ASV_eval^anon", table)])]
    return lines


LANGUAGE_ORDER = ("en", "de", "fr", "es")  # VPC 2026 Track 2 numbers its rows in this order


def run_of_results(results: RunSummary, trial_list: str = "mixed") -> RunResults:
    """The RunResults of one run's results (a sweep job's): its data tag, the splits scored
    on `<split>_<trial_list>` lists, and each attack's (enroll, trials, attacker) from its records."""
    suffix = f"_{trial_list}"
    records = [r for r in results.records if r.set.endswith(suffix)]
    splits = [s[: -len(suffix)] for s in dict.fromkeys(r.set for r in records)]
    attacks = {r.attack: {"enroll": r.enroll, "trials": r.trials,
                          "attacker": ORIGINAL if r.attacker_anonymizer == ORIGINAL else ANONYMIZED}
               for r in records}
    return RunResults(results.config.data_tag, splits, records, attacks, results.utility or {}, trial_list)


def write_combined_results(folder: Path, jobs: Sequence[RunSummary]) -> list[Path]:
    """`<folder>/result_for_rank_<system>` over the jobs (their results) of a sweep, one
    file per evaluated system, its runs in VPC 2026's language order (Track 2: one job per
    language); returns the files written (none when no job scored mixed-gender lists)."""
    by_system: dict[str, list[RunResults]] = {}
    for results in jobs:
        run = run_of_results(results)
        if run.eval_splits:
            by_system.setdefault(results.config.anonymizer, []).append(run)
    rank = {tag: i for i, tag in enumerate(LANGUAGE_ORDER)}
    written = [write_vpc2026_results(folder, sorted(runs, key=lambda run: rank.get(run.dataset, len(rank))),
                                     system=system) for system, runs in by_system.items()]
    return [path for path in written if path is not None]


def write_vpc2026_results(folder: Path, runs: Sequence[RunResults], *, system: str,
                          time: datetime | None = None) -> Path | None:
    """Write `<folder>/result_for_rank_<system>`; returns the file, or None (nothing written)
    when no run has an EER of a `<split>_<trial_list>` set (no mixed-gender trials)."""
    if not any(asv_table(runs, kind) for kind in (ASV_EVAL, ASV_EVAL_ANON)):
        return None
    path = Path(folder) / f"result_for_rank_{system}"
    write_lines(path, result_for_rank(runs, time or datetime.now()))
    return path

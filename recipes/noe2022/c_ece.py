"""noe2022's calibration extension C_ECE of the stochastic systems of a noe2022 sweep.

Pairs the jobs that differ only in `anonymization_seed` (same system, attacker, data, seed:
the same attacker scores two anonymisations of the same sets) and, for every evaluation set
and condition on anonymised speech scored by the attacker trained on original data (OA,
AA-lazy), trains a calibration on the first run's scores and applies it to the second
(`pipeline.metrics.calibration_extension`: linear and isotonic C_ECE with the Cllr of the
calibrated run, and each run's D_ECE). Prints a table and writes
`<sweep>/aggregate/c_ece.json`. AA is left out: its attacker is retrained on training data
anonymised with the same anonymization seed, so its two runs are two attackers, not one
attacker facing two anonymisations.

    python recipes/noe2022/c_ece.py data/runs/noe2022-multirun/<date>
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from pipeline.app.aggregate import OUT, find_jobs
from pipeline.core.errors import VpevalError
from pipeline.core.fileio import write_json
from pipeline.metrics import calibration_extension, read_scores
from pipeline.metrics.results import RunConfig

def runs_by_system(sweep: Path) -> dict[RunConfig, dict]:
    """{job config without the anonymization seed: {anonymization seed: score files}}."""
    found: dict[RunConfig, dict] = {}
    for _, results in find_jobs(sweep)[0]:
        key = replace(results.config, anonymization_seed=None)
        found.setdefault(key, {})[results.config.anonymization_seed] = results.score_files
    return found


def c_ece_rows(sweep: Path) -> list[dict]:
    rows = []
    for key, runs in runs_by_system(sweep).items():
        if len(runs) < 2:
            continue
        (seed0, files0), (seed1, files1) = sorted(runs.items())[:2]
        for label in sorted(set(files0) & set(files1)):
            attack, evaluation_set = label.split("/")
            if attack in ("OO", "AA") or evaluation_set.startswith("val"):  # AA: another attacker per seed
                continue
            run0, run1 = read_scores(files0[label]), read_scores(files1[label])
            extension = calibration_extension(run0.target_scores, run0.nontarget_scores, run1.target_scores,
                                              run1.nontarget_scores)
            rows.append({"anonymizer": key.anonymizer, "attacker_anonymizer": key.attacker_anonymizer, "data": key.data,
                         "attacker": key.attacker, "backend": key.backend, "seed": key.seed, "attack": attack,
                         "set": evaluation_set,
                         "anonymization_seeds": [seed0, seed1], **extension.as_dict()})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", type=Path)
    args = parser.parse_args(argv)
    try:
        rows = c_ece_rows(args.sweep)
    except VpevalError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not rows:
        print(f"error: {args.sweep}: no system run with two anonymization seeds (sweep anonymization_seed=1,2)",
              file=sys.stderr)
        return 2
    print("| system | attack | set | D_ECE run 0 | D_ECE run 1 | C_ECE linear | C_ECE isotonic |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [r["d_ece_run0"], r["d_ece_run1"], r["c_ece_linear"], r["c_ece_isotonic"]]
        print(f"| {r['anonymizer']} | {r['attack']} | {r['set']} | "
              + " | ".join("–" if v is None else f"{v:.3f}" for v in cells) + " |")
    write_json(args.sweep / OUT / "c_ece.json", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

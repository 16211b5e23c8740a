"""EERs written in the VPC 2024 toolkit's results<suffix>.csv layout."""
from __future__ import annotations

from pipeline.metrics.results import ConditionResult
from pipeline.report.vpc_results import write_vpc_results
from tests.helpers import condition

ATTACKS = {
    "OO": {"enroll": "original", "trials": "original", "attacker": "original"},
    "AA": {"enroll": "anonymized", "trials": "anonymized", "attacker": "anonymized"},
    "OA": {"enroll": "original", "trials": "anonymized", "attacker": "original"},
    "AA-lazy": {"enroll": "anonymized", "trials": "anonymized", "attacker": "original"},
}


def records(eers: dict[str, list[float]]) -> list[ConditionResult]:
    sets = ["dev_f", "dev_m", "test_f", "test_m"]
    return [condition({"attack": attack, "set": name, "eer_threshold": eer, "eer": 0.5})
            for attack, values in eers.items() for name, eer in zip(sets, values)] + [
        condition({"attack": attack, "set": "val_f", "eer_threshold": 0.3, "eer": 0.3}) for attack in eers]


def test_rows_columns_and_rounding_as_vpc_writes_them(tmp_path):
    eers = {"OO": [0.10511, 0.0093125, 0.08761, 0.05], "OA": [0.5, 0.49, 0.47, 0.4812345],
            "AA-lazy": [0.3, 0.31, 0.32, 0.33], "AA": [0.1291, 0.020449, 0.07483, 0.015574]}
    written = write_vpc_results(tmp_path, records(eers), ATTACKS, dataset="libri", system="mcadams",
                                attacker_system="mcadams", eval_splits=["dev", "test"], genders=["f", "m"])
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "asv_orig/results_mcadams.csv", "asv_anon_mcadams/results_mcadams.csv"]
    # what VPC's pd.DataFrame(results).to_csv writes: index column, scenarios oo, oa, aa per trial list
    assert written[0].read_text() == """\
,dataset,split,gender,enrollment,trial,EER
0,libri,dev,f,original,original,10.511
1,libri,dev,f,original,anon,50.0
2,libri,dev,f,anon,anon,30.0
3,libri,dev,m,original,original,0.931
4,libri,dev,m,original,anon,49.0
5,libri,dev,m,anon,anon,31.0
6,libri,test,f,original,original,8.761
7,libri,test,f,original,anon,47.0
8,libri,test,f,anon,anon,32.0
9,libri,test,m,original,original,5.0
10,libri,test,m,original,anon,48.123
11,libri,test,m,anon,anon,33.0
"""
    assert written[1].read_text() == """\
,dataset,split,gender,enrollment,trial,EER
0,libri,dev,f,anon,anon,12.91
1,libri,dev,m,anon,anon,2.045
2,libri,test,f,anon,anon,7.483
3,libri,test,m,anon,anon,1.557
"""


def test_vctk_common_lists_and_a_semi_informed_run_only(tmp_path):
    attacks = {name: ATTACKS[name] for name in ("OO", "AA")}
    recs = [condition({"attack": a, "set": f"{s}_{g}", "eer_threshold": 0.25})
            for a in attacks for s in ("dev", "dev_common") for g in "fm"]
    written = write_vpc_results(tmp_path, recs, attacks, dataset="vctk", system="b1", attacker_system="b2",
                                eval_splits=["dev", "dev_common"], genders=["f", "m"])
    assert [p.parent.name for p in written] == ["asv_orig", "asv_anon_b2"]
    assert written[1].read_text().splitlines()[3] == "2,vctk,dev,f_common,anon,anon,25.0"

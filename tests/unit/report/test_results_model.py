"""The typed results model (`pipeline.metrics.results`, issue 39 item 1): results.json written
and read through the dataclasses, the re-identification grid stored as cells, a format version,
one line for an older or hand-edited file, and the published JSON Schema kept in step."""
import json

import pytest

from pipeline.core.errors import VpevalError
from pipeline.metrics.contract import Column, Metric
from pipeline.metrics.results import FORMAT_VERSION, ConditionResult, JudgedPair, RunSummary, json_schema
from scripts.results_schema import SCHEMA, schema_text
from tests.helpers import run_summary, schema_problems

GRID = Metric("identification_rate", "embeddings", (*(Column(f"identification_rate_N{n}_L1{end}") for n in (2, 4)
                                                      for end in ("", "_low", "_high")),
                                                    Column("identification_rate_detail")),
              lambda condition: {}, cells=((2, 1), (4, 1)))
FLAT = {"eer": 0.2, "identification_rate_N2_L1": 0.6, "identification_rate_N2_L1_low": 0.4,
        "identification_rate_N2_L1_high": 0.8, "identification_rate_N4_L1": None, "identification_rate_N4_L1_low": None,
        "identification_rate_N4_L1_high": None,
        "identification_rate_detail": {"enrolled_not_tried": 1, "identification_rate_N2_L1": {"chance": 0.5}},
        "notes": {"identification_rate_N4_L1": "too few speakers"}, "eer_ci_low": 0.1, "eer_ci_high": 0.3,
        "eer_ci_level": 0.95, "eer_speakers": 6}
LABELS = {"attack": "AA", "anonymizer": "s1", "attacker_anonymizer": "s1", "enroll": "anonymized",
          "trials": "anonymized", "set": "test_f"}


def summary() -> RunSummary:
    found = run_summary(detection=[JudgedPair("AA", "s1", "s1", eer_val=0.1, eer_test=0.2, eer_by_set={"val_f": 0.1},
                                              verdict="undetermined", reason="r")], utility={"sets": {}})
    found.records = [ConditionResult.measured(FLAT, (GRID,), **LABELS)]
    return found


def test_the_grid_is_stored_as_cells_and_flattened_back_for_results_csv():
    (record,) = summary().records
    assert [(c.n, c.length, c.value, c.estimate) for c in record.rates] == [(2, 1, 0.6, {"chance": 0.5}),
                                                                            (4, 1, None, None)]
    assert record.metrics == {"eer": 0.2, "identification_rate_detail": {"enrolled_not_tried": 1}}
    assert record.eer_ci == [0.1, 0.3] and record.notes == FLAT["notes"]
    row = record.row()
    assert {k: row[k] for k in FLAT} == FLAT and list(row)[:6] == list(LABELS)


def test_results_round_trip_through_json(tmp_path):
    written = summary()
    path = written.to_json(tmp_path / "results.json")
    assert json.loads(path.read_text())["format_version"] == FORMAT_VERSION
    assert RunSummary.from_json(path) == written


def test_results_of_an_older_format_are_refused_with_one_line(tmp_path):
    """Regression (issue 39, bad input): results.json before the format version was read key by key."""
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"config_hash": "h", "records": [{"attack": "AA", "eer": 0.2}], "detection": []}))
    with pytest.raises(VpevalError) as caught:
        RunSummary.from_json(path)
    assert str(caught.value) == (f"{path}: format_version {FORMAT_VERSION} expected, found none (written by an older "
                                 "vpeval); rerun the experiment (its stages are cached) to rewrite it")
    path.write_text(json.dumps({"format_version": FORMAT_VERSION + 1}))
    with pytest.raises(VpevalError, match=f"found {FORMAT_VERSION + 1};"):
        RunSummary.from_json(path)


def refusal(path, edit) -> str:
    """The error of reading `summary()` written to `path` and changed by `edit` (of its JSON)."""
    found = json.loads(summary().to_json(path).read_text())
    edit(found)
    path.write_text(json.dumps(found))
    with pytest.raises(VpevalError) as caught:
        RunSummary.from_json(path)
    return str(caught.value)


def test_a_hand_edited_file_missing_a_field_names_it(tmp_path):
    """Regression (issue 39, bad input): a missing key surfaced as a KeyError deep in the report."""
    path = summary().to_json(tmp_path / "results.json")
    for edit, field in ((lambda d: d["detection"][0].pop("eer_test"), "detection[0].eer_test"),
                        (lambda d: d["config"]["detect"].pop("method"), "config.detect.method"),
                        (lambda d: d.pop("records"), "records")):
        message = refusal(path, edit)
        assert message.startswith(f"{path}: {field} missing") and "\n" not in message


def test_a_renamed_key_a_wrong_type_or_an_unreadable_file_is_one_line(tmp_path):
    """Regression (review of issue 39): a renamed field read as absent (an EER interval silently
    None), strings passed for numbers, null for a list, and a missing file was a traceback."""
    path = tmp_path / "results.json"
    cases = ((lambda d: d["records"][0].update(eer_ci_lo=d["records"][0].pop("eer_ci_low")),
              "records[0].eer_ci_lo: not a field of ConditionResult"),
             (lambda d: d["detection"][0].update(eer_val="0.1"), 'detection[0].eer_val: str "0.1" where a number'),
             (lambda d: d["config"].update(seed="3"), 'config.seed: str "3" where an integer'),
             (lambda d: d.update(records=None), "records: null where a value is expected"),
             (lambda d: d.update(records=5), "records: int 5 where an array is expected"),
             (lambda d: d.update(format_version=True), f"format_version {FORMAT_VERSION} expected, found True"))
    for edit, message in cases:
        found = refusal(path, edit)
        assert found.startswith(f"{path}: {message}") and "\n" not in found
    for bad, message in ((tmp_path / "absent.json", "cannot be read"), (path, "not UTF-8 text")):
        if bad == path:
            path.write_bytes(b"\xff\xfe\x00binary")
        with pytest.raises(VpevalError, match=message):
            RunSummary.from_json(bad)


def test_the_published_schema_is_the_codes():
    """docs/results.schema.json is generated: rerun `python scripts/results_schema.py`."""
    assert SCHEMA.read_text() == schema_text(), "run `python scripts/results_schema.py`"
    metrics = json_schema()["$defs"]["ConditionResult"]["properties"]["metrics"]["properties"]
    assert {"eer", "eer_threshold", "rank_disclosure_detail"} <= metrics.keys()  # from the metric list


def test_a_written_file_fits_the_schema_and_a_broken_one_does_not(tmp_path):
    schema = json.loads(SCHEMA.read_text())
    found = json.loads(summary().to_json(tmp_path / "results.json").read_text())
    assert schema_problems(found, schema) == []
    found["records"][0]["rates"][0]["n"] = "2"
    assert schema_problems(found, schema) == ["$: fits 0 of the oneOf options"]
    assert schema_problems(found, schema["$defs"]["RunSummary"], schema) == [
        "$.records[0].rates[0].n: str is not integer"]

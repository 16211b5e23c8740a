"""Write docs/results.schema.json: the JSON Schema of results.json (a run's and a sweep
aggregate's), generated from the dataclasses of `pipeline.metrics.results`.
tests/unit/report/test_results_model.py fails when the committed schema and the code disagree.
After changing a results dataclass (and raising `FORMAT_VERSION` when old files no longer fit):

    python scripts/results_schema.py            # rewrites docs/results.schema.json
"""
from __future__ import annotations

import json
import sys

from pipeline.core.config_tree import REPO_ROOT
from pipeline.core.fileio import write_text
from pipeline.metrics.results import json_schema

SCHEMA = REPO_ROOT / "docs" / "results.schema.json"


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    write_text(SCHEMA, schema_text())
    print(SCHEMA)
    return 0


if __name__ == "__main__":
    sys.exit(main())

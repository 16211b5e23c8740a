"""The "Bad inputs" table of docs/robustness.md shows the messages the rows before observed
(this file runs last: its number is the highest)."""
import os
import re

from pipeline.core.config import REPO_ROOT
from tests.faults.bad_inputs.catalogue import OBSERVED

CATALOGUE = REPO_ROOT / "docs" / "robustness.md"
SECTION = "## Bad inputs\n"


def render(rows: dict[str, tuple[str, str, str]]) -> str:
    def escape(text: str) -> str:
        return text.replace("|", "\\|")

    intro = ("Every row is a test in `tests/faults/bad_inputs/` (the row id is in the first column); the "
             "message is the one the test observed (temporary folders shown as `<tmp>`). Each stops "
             "with a non-zero exit (`VpevalError`; exit status 2 and this one line on stderr from the CLI); "
             "a failed write leaves no partial file. Regenerate with `python tests/bad_inputs_table.py`.")
    lines = ["## Bad inputs", "", intro, "",
             "| # | input | message produced | where detected |", "|---|---|---|---|"]
    for n, (row, (what, message, where)) in enumerate(rows.items(), start=1):  # the order of the tests
        lines.append(f"| {n} `{row}` | {escape(what)} | `{escape(message)}` | {escape(where)} |")
    return "\n".join(lines) + "\n"


def test_catalogue_table_is_current():
    """The whole table equals the observed one when every row ran; in a partial run (-k) every
    row that ran is still in docs/robustness.md with the message it produced."""
    table = render(OBSERVED)
    readme = CATALOGUE.read_text()
    start, end = readme_section(readme)
    if os.environ.get("VPEVAL_WRITE_TABLE"):
        CATALOGUE.write_text(readme[:start] + table + "\n" + readme[end:])
        return
    documented = readme[start:end].rstrip("\n") + "\n"
    rows = [line for line in documented.splitlines() if line.startswith("| ") and line[2].isdigit()]
    if len(OBSERVED) >= 30:  # every file ran
        assert documented == table, "run `python tests/bad_inputs_table.py`"
    for line in table.splitlines():
        if line.startswith("| ") and line[2].isdigit():
            row = line.split(" ", 2)[2]  # without the row number, which depends on what ran
            assert any(r.split(" ", 2)[2] == row for r in rows), f"not in docs/robustness.md: {row}"


def readme_section(readme: str) -> tuple[int, int]:
    """Where the catalogue section of docs/robustness.md starts and ends (at the next `## ` heading)."""
    start = readme.index(SECTION)
    end = readme.find("\n## ", start + len(SECTION))
    return start, len(readme) if end < 0 else end + 1


def test_messages_name_no_volatile_detail():
    for row, (_, message, _) in OBSERVED.items():
        assert not re.search(r"tmp[0-9]{3,}", message), (row, message)

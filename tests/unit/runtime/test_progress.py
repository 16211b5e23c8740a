"""Progress of long loops in a log (pipeline.runtime.progress)."""
import logging
import time

from pipeline.runtime.progress import progress


def test_a_long_loop_logs_throttled_lines_and_a_short_one_none(caplog):
    """Regression (issue 38): an epoch on a loaded machine printed nothing for 11 minutes when
    stderr was a log file (tqdm is off there)."""
    log = logging.getLogger("test.progress")
    with caplog.at_level(logging.INFO, logger=log.name):
        for _ in progress(range(3), logger=log, seconds=0.2, desc="train: epoch 1/2"):
            pass
        assert not caplog.records
        for _ in progress(range(12), logger=log, seconds=0.2, desc="train: epoch 2/2", unit="batch"):
            time.sleep(0.05)
    lines = [r.getMessage() for r in caplog.records]
    assert 2 <= len(lines) <= 5 and all(line.startswith("train: epoch 2/2:") for line in lines)
    assert "12/12" in lines[-1] and "\r" not in "".join(lines)

"""pipeline.runtime.ordered: the ordered map on a thread pool."""
import threading
import time

import pytest

from pipeline.runtime.ordered import ordered_map


def test_results_keep_the_input_order_whatever_finishes_first():
    def slow_first(item: int) -> int:
        time.sleep(0.02 if item == 0 else 0)
        return item * item

    assert list(ordered_map(slow_first, range(10), workers=4)) == [i * i for i in range(10)]


def test_work_runs_off_the_calling_thread_and_errors_reach_the_caller():
    caller = threading.get_ident()
    assert all(ident != caller for ident in ordered_map(lambda _: threading.get_ident(), range(4), workers=2))

    def fail(item: int) -> int:
        raise ValueError(f"item {item}")

    with pytest.raises(ValueError, match="item 0"):
        list(ordered_map(fail, range(3), workers=2))

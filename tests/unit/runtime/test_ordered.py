"""pipeline.runtime.ordered: the ordered map on a thread pool and the threads per-file work gets."""
import threading
import time

import pytest
import torch

from pipeline.runtime.ordered import MAX_FILE_THREADS, file_threads, ordered_map


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


@pytest.mark.parametrize("torch_threads, expected", [(1, 1), (8, 8), (64, MAX_FILE_THREADS)])
def test_file_threads_follow_torch_up_to_the_cap(monkeypatch, torch_threads, expected):
    monkeypatch.setattr(torch, "get_num_threads", lambda: torch_threads)
    assert file_threads() == expected

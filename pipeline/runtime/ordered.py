"""An ordered map on a thread pool, with bounded look-ahead, and how many threads per-file work gets."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

MAX_FILE_THREADS = 16  # a speech screen of a 35-s utterance peaks at 66 MiB: at most about 1 GiB at once

Item = TypeVar("Item")
Result = TypeVar("Result")


def ordered_map(function: Callable[[Item], Result], items: Iterable[Item], *, workers: int,
                lookahead: int | None = None) -> Iterator[Result]:
    """`map(function, items)` on a thread pool, in order, with at most `lookahead` items in flight."""
    items = iter(items)
    lookahead = lookahead or 4 * max(workers, 1)
    with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        pending = []
        for item in items:
            pending.append(pool.submit(function, item))
            if len(pending) >= lookahead:
                yield pending.pop(0).result()
        for future in pending:
            yield future.result()


def file_threads() -> int:
    """Threads for per-file work that releases the GIL (decoding, FLAC encoding, numpy's FFTs):
    torch's intra-op thread count (the usable CPUs, or OMP_NUM_THREADS), at most MAX_FILE_THREADS."""
    import torch

    return max(1, min(torch.get_num_threads(), MAX_FILE_THREADS))

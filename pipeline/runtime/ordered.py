"""An ordered map on a thread pool, with bounded look-ahead."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

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

"""Progress of long loops that shows wherever the output goes: a tqdm bar on a terminal; in a log
file (Slurm's output, `nohup`, a redirected stderr) a log line at most every `seconds`, so that a
long training epoch on a loaded machine shows it advances, and a short one adds nothing.

>>> import logging
>>> sum(progress(range(3), logger=logging.getLogger("x"), desc="epoch 1/1"))
3
"""
from __future__ import annotations

import logging
import sys

from tqdm import tqdm

SECONDS = 60.0  # in a log: the first line after a minute, then one a minute at most


class LogLines:
    """A file for tqdm whose writes become log lines (the bar's carriage returns dropped)."""

    def __init__(self, logger: logging.Logger):
        self.logger = logger

    def write(self, text: str) -> None:
        text = text.strip("\r\n ")
        if text:
            self.logger.info(text)

    def flush(self) -> None:
        pass


def progress(iterable=None, *, logger: logging.Logger, seconds: float = SECONDS, disable: bool = False,
             **kwargs) -> tqdm:
    """`tqdm(iterable, **kwargs)` on a terminal, else throttled log lines through `logger`."""
    if disable or sys.stderr.isatty():
        return tqdm(iterable, disable=disable, **kwargs)
    return tqdm(iterable, file=LogLines(logger), mininterval=seconds, maxinterval=seconds, delay=seconds, ascii=True,
                **kwargs)

"""A team worker: one rank, launched by torchrun (see `pipeline.runtime.team`).

    python -m torch.distributed.run --nproc-per-node 2 ... -m pipeline.runtime.worker \\
        --control HOST:PORT --device-type cuda --timeout 1800

Joins the process group from torchrun's environment, says so in the leader's task store,
logs as the leader does (rank 0 from INFO, the others from WARNING, to stderr, each line naming the rank),
then runs task 1, 2, ... (the pickled pair `(function, kwargs)`, called as
`function(world, **kwargs)`) until an exit task (None). A failing task puts its one-line error in
the store (first error wins) and ends the process, so torchrun and the leader stop the rest.
"""
from __future__ import annotations

import argparse
import logging
import pickle
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import DistStoreError, TCPStore

from pipeline.core.errors import VpevalError
from pipeline.runtime.distributed import World

TASK_POLL_S = 5.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--control", required=True, help="HOST:PORT of the leader's task store")
    parser.add_argument("--device-type", choices=("cuda", "cpu"), required=True)
    parser.add_argument("--timeout", type=float, required=True, help="seconds for joining and for each collective")
    args = parser.parse_args(argv)
    host, port = args.control.rsplit(":", 1)
    store = TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=args.timeout))
    world = World.from_env(args.device_type, args.timeout)
    logging.basicConfig(level=logging.INFO if world.is_main else logging.WARNING,
                        format=f"[%(asctime)s][%(name)s][%(levelname)s] - rank {world.rank}: %(message)s")
    store.add("joined", 1)
    task_number = 1
    while True:
        payload = wait_for_key(store, f"task/{task_number}")
        try:
            task = pickle.loads(payload)  # the function's module is imported here, its errors reported below
            if task is None:
                break
            function, kwargs = task
            function(world, **kwargs)
        except VpevalError as error:
            store.compare_set("error", "", f"rank {world.rank}: {error}")
            print(f"vpeval worker rank {world.rank}: error: {error}", file=sys.stderr, flush=True)
            sys.exit(2)
        except BaseException as error:
            first_line = (str(error).strip().splitlines() or [""])[0]
            store.compare_set("error", "", f"rank {world.rank}: {type(error).__name__}: {first_line}")
            raise
        store.add(f"finished/{task_number}", 1)
        task_number += 1
        if world.device.type == "cuda":
            torch.cuda.empty_cache()
    dist.destroy_process_group()


def wait_for_key(store: TCPStore, key: str) -> bytes:
    """The value of `key` once posted; raises (DistNetworkError) if the store goes away."""
    while True:
        try:
            store.wait([key], timedelta(seconds=TASK_POLL_S))
            return store.get(key)
        except DistStoreError:  # not posted yet
            continue


if __name__ == "__main__":
    main()

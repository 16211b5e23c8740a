"""The anonymize stage on one process and on a team of N ranks (`distributed.gpus_per_node`),
McAdams on speech-like audio, in the same run; checks that every team writes the same files.

Before 2026-11-30 the stage ran in the leading process only, whatever the team: on an 8-GPU
node it was most of the attack's time (docs/performance.md, "Scale rehearsal"). On CPU the
ranks are gloo processes of one thread each (`device=cpu`), so this measures the sharing, not
a GPU's speed.

    OMP_NUM_THREADS=1 python benchmarks/bench_anonymize_team.py --utterances 400 --seconds 3 --ranks 2
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipeline.core.cache import Cache  # noqa: E402
from pipeline.core.config import compose  # noqa: E402
from pipeline.data.audio import write_audio  # noqa: E402
from pipeline.data.manifest import Utterance, write_manifest  # noqa: E402
from pipeline.runtime.distributed import World  # noqa: E402
from pipeline.runtime.team import Team, TeamSpec, _free_port_pair  # noqa: E402
from pipeline.stages import anonymize  # noqa: E402
from tests.oracles.signals import speech_like  # noqa: E402

RATE = 16000


def contents(folder: Path) -> dict[str, bytes]:
    """Every file of an anonymised folder but the cache's own bookkeeping, by relative path (the
    manifest's paths relative to the folder too)."""
    return {str(path.relative_to(folder)): path.read_bytes().replace(str(folder).encode(), b".")
            for path in sorted(folder.rglob("*")) if path.is_file() and not path.name.startswith("_")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--utterances", type=int, default=400)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2])
    parser.add_argument("--batch-seconds", type=float, default=30.0, help="anonymizer.batch_seconds (the config: 300)")
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {len(os.sched_getaffinity(0))} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}: McAdams on "
          f"{args.utterances} utterances of {args.seconds:g} s, batches of {args.batch_seconds:g} s")
    system = compose([f"anonymizer.batch_seconds={args.batch_seconds}"]).anonymizer
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        utts = [Utterance(f"s{i % 20}-{i}", f"s{i % 20}", "fm"[i % 2],
                          str(write_audio(folder / f"{i}.flac", speech_like(args.seconds, seed=i % 20), RATE)),
                          args.seconds) for i in range(args.utterances)]
        manifest = write_manifest(folder / "list.jsonl", utts)

        def timed(name: str, team: Team | None) -> tuple[float, dict[str, bytes]]:
            start, cpu = time.perf_counter(), time.process_time()
            out = anonymize.run(system, manifest, Cache(folder / name), list_name="train", seed=1, device="cpu",
                                team=team)
            took = time.perf_counter() - start
            print(f"{name}: {took:.1f} s wall, {time.process_time() - cpu:.1f} s CPU in this process")
            return took, contents(out)

        alone, expected = timed("alone", None)
        print(f"one process: {alone:.1f} s, {args.utterances / alone:.1f} utterances/s")
        for ranks in args.ranks:
            with Team(TeamSpec(ranks, 1, 0, "127.0.0.1", _free_port_pair(), "cpu", 600.0)) as team:
                team.run(World.barrier)  # a first task: the workers start (torchrun, imports) outside the timing
                took, written = timed(f"team-{ranks}", team)
            differ = sorted(name for name in expected.keys() | written.keys() if expected.get(name) != written.get(name))
            assert not differ, f"{ranks} ranks wrote other files than one process: {differ[:5]}"
            print(f"{ranks} ranks: {took:.1f} s, {args.utterances / took:.1f} utterances/s, {alone / took:.2f}x; "
                  f"the same {len(written)} files")


if __name__ == "__main__":
    main()

"""One unattended check of the CUDA path: `pytest -m gpu`, the McAdams, attacker (training
eager and compiled, extraction; VPC 2026's ecapa_ssl at its sizes) benchmarks, a profile of the
three attacker steps (`benchmarks/profile_attacker.py`: Chrome traces and top-20 tables under
`<out>/profile`), the semi-informed benchmark and scale rehearsals (`benchmarks/bench_scale.py`:
921 training speakers, every stage timed; `ecapa`, then `ecapa_ssl`), each under a share of one
time budget, then one dated Markdown table (GPU, torch, CUDA, figures, targets) for
docs/performance.md.

    scripts/gpu_check.sh                      # on the CUDA machine: offline wheels, then this
    python scripts/gpu_check.py --dry-run     # the commands and the table layout, nothing run
    python scripts/gpu_check.py --device cpu --budget 900   # the same steps at CPU sizes
    bash scripts/gpu_check.sh --budget 510 --out /tmp/gc --only pytest_gpu attacker_eager attacker_compiled \\
        ecapa_ssl profile scale               # the H200 run of 2026-11-29 (make gpu-check ARGS="..." runs the same)

Each step's output goes to `<out>/<step>.log`, the table to `<out>/gpu_check.md`. A step
that fails or runs out of time is a row saying so (with the log's last line); the others
still run. The exit status is 1 when any step failed or timed out.
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BUDGET = 570.0  # seconds: with start-up and the table, the check ends within 10 minutes


@dataclass(frozen=True)
class Target:
    """A goal for one figure: the best of `pattern`'s first groups compared with `value` (at least / below)."""

    label: str
    pattern: str
    value: float
    at_least: bool = True

    def verdict(self, text: str) -> str:
        """Met or not by the best of the figures `pattern` finds in `text`."""
        figures = [float(found.replace(",", "")) for found in re.findall(self.pattern, text)]
        if not figures:
            return f"{self.label}: no figure"
        figure = max(figures) if self.at_least else min(figures)
        met = figure >= self.value if self.at_least else figure < self.value
        return f"{self.label}: {'met' if met else 'NOT met'}"


@dataclass(frozen=True)
class Step:
    """One command of the check; `keep` picks the output lines that make its result."""

    name: str
    what: str
    argv: list[str]
    keep: str
    seconds: float  # its share of the default budget (scaled with --budget); 0: a share of what is left
    targets: tuple[Target, ...] = field(default_factory=tuple)


def steps_for(device: str, semi_size: str, out: Path = Path("gpu-check")) -> list[Step]:
    """The check's steps on `device` ("cuda": the sizes of the README's GPU table; "cpu": small);
    the profile step writes its traces under `out`/profile."""
    py = [sys.executable]
    gpu = device == "cuda"
    scale_utterances = 12 if gpu else 4
    attacker = [*py, "benchmarks/bench_attacker.py", "--device", device, "--precision", "bf16"]
    attacker += ["--batch-size", "256", "--steps", "60"] if gpu else ["--batch-size", "8", "--steps", "2",
                                                                      "--attacker", "ecapa_tiny"]
    # extraction of the attacker steps: the config's batches (600 s), then 4 times larger (the 2026-11-29
    # profile found the GPU idle half the time in extraction, waiting for the host's per-batch work)
    extraction = ["--extract-utterances", "6000" if gpu else "24", "--extract-precision", "bf16",
                  "--batch-seconds", *(["600", "2400"] if gpu else ["30", "120"])]
    semi_epochs = "attacker.training.epochs=1"
    ssl = [*py, "benchmarks/bench_attacker.py", "--device", device, "--precision", "bf16", "--random-wavlm",
           "--extract-precision", "bf16"]
    ssl += (["--attacker", "ecapa_ssl", "--batch-size", "32", "--steps", "20"] if gpu
            else ["--attacker", "ecapa_ssl_tiny", "--batch-size", "4", "--steps", "2", "--utterance-seconds", "2"])
    profile = [*py, "benchmarks/profile_attacker.py", "--device", device, "--out", str(Path(out).resolve() / "profile")]
    profile += (["--precision", "bf16", "--compile", "--batch-size", "256", "--ssl-batch-size", "32", "--steps", "3"]
                if gpu
                else ["--ecapa", "ecapa_tiny", "--ssl", "ecapa_ssl_tiny", "--batch-size", "4", "--extract-seconds", "2",
                      "--steps", "2"])
    return [
        # -v: the log names each test as it ends (the H200's first run timed out after 63 s in a
        # compiled training test); the compiled tests take most of the step
        Step("pytest_gpu", "`pytest -m gpu`", [*py, "-m", "pytest", "-m", "gpu", "-v", "-p", "no:cacheprovider",
                                         "--durations=5", "--continue-on-collection-errors"],
             r"^(FAILED .*|ERROR .*|=* ?\d+ (passed|failed|skipped|deselected|errors?).*)$", 170),
        Step("mcadams", "McAdams", [*py, "benchmarks/bench_mcadams.py", "--device", device, "--repeats", "1",
                                    "--seconds", "3600" if gpu else "20", "--batch-seconds", "3600" if gpu else "20",
                                    "--reference-seconds", "8"],
             r"^(vpeval|compiled kernel).*?;", 30),
        Step("attacker_eager", "attacker training bf16 eager, extraction bf16 (decoded cache)",
             [*attacker, *extraction],
             r"^(training|extraction): .*?(?=;|\(|$)", 85,
             (Target("extraction >= 3,000 utt/s", r"extraction: ([\d.]+) utterances/s", 3000),)),
        # extraction compiled too (dynamic shapes, since late 2026-11-29): the profile's lever for 3,000 utt/s
        Step("attacker_compiled", "attacker training and extraction bf16, torch.compile + CUDA graphs",
             [*attacker, "--compile", "reduce-overhead", "--extract-compile", "reduce-overhead", *extraction],
             r"^(training|extraction): .*?(?=;|\(|$)", 130,
             (Target("training >= 10,000 crops/s", r"training: ([\d.]+) crops/s", 10000),
              Target("extraction >= 3,000 utt/s", r"extraction: ([\d.]+) utterances/s", 3000))),
        Step("ecapa_ssl", "VPC 2026 ecapa_ssl (random-weight WavLM-Large) training and extraction, bf16 eager",
             [*ssl, "--extract-utterances", "400" if gpu else "6"],
             r"^(training: .*?(?=;|\(|$)|  per crop: .*|extraction: .*?(?=,|$))", 90,
             # issue 36: 2 epochs of train-clean-360 (872,640 3-s crops) in under 25 minutes
             (Target("ecapa_ssl training >= 600 crops/s", r"training: ([\d.]+) crops/s", 600),)),
        # the same training compiled: one graph since the frozen WavLM is traced whole (late 2026-11-29)
        Step("ecapa_ssl_compiled", "VPC 2026 ecapa_ssl training, torch.compile + CUDA graphs",
             # compiling the 24 WavLM layers added about 127 s on the 2-core VM's CPU (docs/performance.md)
             [*ssl, "--compile", "reduce-overhead", "--extract-utterances", "0"],
             r"^training: .*?(?=;|\(|$)", 180,
             (Target("ecapa_ssl training >= 600 crops/s", r"training: ([\d.]+) crops/s", 600),)),
        Step("profile", "torch.profiler: compiled ecapa training step, extraction batch, ecapa_ssl training step "
             "(Chrome traces and top-20 tables in profile/)", profile,
             r"^(== .*|Self (CPU|CUDA) time total: .*)$", 80),
        Step("semi_informed", f"semi-informed attack, {semi_size} size, 1 epoch",
             [*py, "benchmarks/bench_semi_informed.py", "--size", semi_size, "--device", device,
              *(["--attacker", "ecapa", "attacker.training.precision=bf16", "attacker.extraction.precision=bf16",
                 "attacker.training.compile=reduce-overhead"] if gpu else []), semi_epochs],
             r"^(corpus generation.*|\s*\w+: +[\d.]+ s .*|\S+ +\S+: EER .*)$", 0,
             (Target("attack < 20 min", r"semi-informed attack \(every later stage\): ([\d.]+) s", 1200,
                     at_least=False),)),
        Step("scale", f"scale rehearsal: {921 if gpu else 19} training speakers x {scale_utterances} utterances "
             f"of 1 s, `{'ecapa' if gpu else 'ecapa_tiny'}` 1 epoch",
             [*py, "benchmarks/bench_scale.py", "--scale", "1" if gpu else "0.02",
              "--utterances", str(scale_utterances),
              "--eval-utterances", "20" if gpu else "4", "--workdir", str(Path(out).resolve() / "scale"),
              f"device={device}", *(["attacker=ecapa", "attacker.training.precision=bf16",
                                     "attacker.extraction.precision=bf16"] if gpu else [])],
             r"^(== .*|disk use: .*|\S+ +\S+: EER .*)$", 0),
        Step("scale_ssl", f"the scale rehearsal with `{'ecapa_ssl' if gpu else 'ecapa_ssl_tiny'}` (random WavLM, "
             "from scratch)",
             [*py, "benchmarks/bench_scale.py", "--scale", "1" if gpu else "0.02", "--utterances",
              str(scale_utterances), "--eval-utterances", "20" if gpu else "4", "--random-wavlm",
              "--workdir", str(Path(out).resolve() / "scale_ssl"), f"device={device}",
              *(["attacker=ecapa_ssl", "attacker.training.precision=bf16", "attacker.extraction.precision=bf16"]
                if gpu else ["attacker=ecapa_ssl_tiny"])],
             r"^(== .*|disk use: .*|\S+ +\S+: EER .*)$", 0),
    ]


@dataclass
class Outcome:
    step: Step
    status: str  # "ok", "failed (rc N)", "timed out after N s", "dry run"
    result: str
    seconds: float


def run_step(step: Step, timeout: float, out: Path) -> Outcome:
    """Run `step` from the project root with `timeout`; its output goes to `<out>/<name>.log`."""
    log = out / f"{step.name}.log"
    start = time.monotonic()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with open(log, "w") as sink:
        process = subprocess.Popen(step.argv, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
        try:
            rc = process.wait(timeout=max(timeout, 1))
            status = "ok" if rc == 0 else f"failed (rc {rc})"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            status = f"timed out after {timeout:.0f} s"
    text = log.read_text(errors="replace")
    kept = [re.sub(r"\s+", " ", m.group(0)).strip().rstrip(";")
            for m in re.finditer(step.keep, text, flags=re.MULTILINE)]
    lines = [line for line in text.splitlines() if line.strip()]
    if status != "ok" and lines:
        kept.append(f"last line: {lines[-1].strip()[:200]}")
    verdicts = [target.verdict(text) for target in step.targets]
    return Outcome(step, status, "; ".join(kept + verdicts) or "(no figures)", time.monotonic() - start)


def time_for(steps: list[Step], index: int, left: float, budget: float) -> float:
    """Seconds step `index` may run when `left` of `budget` remain: its share (scaled with the
    budget) and what the steps before it left unused, never what the later steps are owed; the
    steps of share 0 split the budget's unshared rest.

    >>> steps = [Step(n, "", [], "", share) for n, share in [("a", 57), ("b", 114), ("c", 0), ("d", 0)]]
    >>> time_for(steps, 0, 570, 570), time_for(steps, 1, 565, 570)  # b: 114 s and the 52 s a left
    (57.0, 166.0)
    >>> time_for(steps, 2, 451, 570), time_for(steps, 3, 225, 570)  # c and d split the rest
    (225.5, 225.0)
    """
    shares = [budget / DEFAULT_BUDGET * step.seconds for step in steps]
    later, unshared_later = sum(shares[index + 1:]), sum(not step.seconds for step in steps[index + 1:])
    if steps[index].seconds:
        return left - later - (max(0.0, budget - sum(shares)) if unshared_later else 0.0)
    return (left - later) / (unshared_later + 1)


def environment() -> str:
    """'GPU name (memory), torch X + CUDA Y, python Z' of this machine."""
    import torch

    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = f"{torch.cuda.device_count()} x {props.name} ({props.total_memory / 2 ** 30:.0f} GiB)"
    else:
        gpu = "no GPU"
    return (f"{gpu}, torch {torch.__version__} + CUDA {torch.version.cuda or '-'}, "
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")


def table(outcomes: list[Outcome], when: datetime.datetime, machine: str) -> str:
    """The dated Markdown table of the check."""
    rows = [f"GPU check of {when:%Y-%m-%d %H:%M} UTC on {machine} (`scripts/gpu_check.sh`)", "",
            "| what | command | status | result |", "|---|---|---|---|"]
    for outcome in outcomes:
        command = " ".join("python" if arg == sys.executable else arg for arg in outcome.step.argv)
        cells = [outcome.step.what, f"`{command}`", f"{outcome.status}, {outcome.seconds:.0f} s", outcome.result]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET,
                        help="seconds for every step together; each step's share scales with it")
    parser.add_argument("--semi-size", help="bench_semi_informed --size (default: train-clean-360; tiny on CPU)")
    parser.add_argument("--only", nargs="+", metavar="STEP", help="run these steps alone")
    parser.add_argument("--out", default=os.environ.get("OUT") or "gpu-check", help="folder for logs and the table")
    parser.add_argument("--dry-run", action="store_true", help="print the commands and the table layout only")
    args = parser.parse_args(argv)
    args.semi_size = args.semi_size or ("train-clean-360" if args.device == "cuda" else "tiny")
    if args.budget <= 0:
        parser.error(f"--budget must be positive, got {args.budget:g}")
    names = [step.name for step in steps_for(args.device, args.semi_size, Path(args.out))]
    unknown = sorted(set(args.only or ()) - set(names))
    if unknown:
        parser.error(f"--only: unknown step(s) {unknown}; the steps are {names}")
    if args.device == "cuda" and not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda but CUDA is not available here; use --device cpu or --dry-run")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    steps = [s for s in steps_for(args.device, args.semi_size, Path(args.out))
             if not args.only or s.name in args.only]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    when = datetime.datetime.now(datetime.timezone.utc)
    deadline = time.monotonic() + args.budget
    outcomes = []
    for index, step in enumerate(steps):
        if args.dry_run:
            outcomes.append(Outcome(step, "dry run", "-", 0.0))
            continue
        timeout = time_for(steps, index, deadline - time.monotonic(), args.budget)
        print(f"[{datetime.datetime.now():%H:%M:%S}] {step.name}: up to {timeout:.0f} s", flush=True)
        outcomes.append(run_step(step, timeout, out))
        print(f"  {outcomes[-1].status}: {outcomes[-1].result}", flush=True)
    report = table(outcomes, when, environment())
    (out / "gpu_check.md").write_text(report + "\n")
    print(report)
    return 0 if all(o.status in ("ok", "dry run") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())

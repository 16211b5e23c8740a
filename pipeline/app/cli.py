"""The `vpeval` command (also `python -m pipeline`).

    vpeval [hydra overrides]          run an experiment (a Hydra app; -m for sweeps)
    vpeval metrics FILE... [--json]   metrics of score files
    vpeval aggregate DIR [--reference CSV]  one report of every job of a sweep folder
    vpeval export data|attacker ...   anonymised data as VPC data dirs, attackers as SpeechBrain folders
    vpeval validate [overrides]       prepare and check the configured corpus, nothing else (validate --help)
    vpeval train-vc vc|ohnn [overrides]  train a voice converter or an OHNN map (train-vc --help)
    vpeval --help | --version         what vpeval takes (pipeline.app.usage) | its version

An experiment prints the path of its report folder as its last line. Errors the user can
fix print one line and exit with status 2; Ctrl-C prints one line and exits with 130, SIGTERM
(Slurm's preemption or time limit) the same line and 143; a rerun resumes from the finished stages. When the
reader of the output closes it early (`vpeval metrics ... | head -1`), the rest is dropped
quietly: a tool (metrics, aggregate, export, --help) exits with 141, the status of a program
stopped by SIGPIPE; an experiment or validate finishes with its own status. A job that raises
writes `failed.json` (the error line) in its run folder; in a multirun the error goes back to
Hydra, which runs the other points, and the aggregate report (pipeline.app.sweep) lists the failed ones.
"""
from __future__ import annotations

import errno
import logging
import os
import select
import signal
import sys
import tempfile
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from pipeline.core.config import register_resolvers
from pipeline.core.config_tree import CONFIG_SOURCE
from pipeline.core.errors import VpevalError, write_error
from pipeline.runtime.cpus import use_usable_cpus

log = logging.getLogger("vpeval")


INTERRUPTED = "vpeval: {how}; rerun the same command to resume from the finished stages"
# 128 + SIGINT, 128 + SIGTERM, 128 + SIGPIPE: what a shell shows for these signals
EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_BROKEN_PIPE = 130, 143, 141


class Terminated(KeyboardInterrupt):
    """SIGTERM (what Slurm sends on preemption or at the time limit, and `kill` by default),
    raised where the main thread is, so that it stops as Ctrl-C does: every `finally` and lock
    release runs, and the finished stages are kept for a rerun to resume from."""


def terminate(signum, frame) -> None:
    raise Terminated()


def fail(error: VpevalError) -> None:
    print(f"vpeval: error: {error}", file=sys.stderr)
    sys.exit(2)


def reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (poll reports an error on its write end)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll on this platform, stdout not a file
        return False


def drop_output() -> None:
    """Send the rest of stdout (and what is still buffered) nowhere, so that no later write or
    the interpreter's exit fails on the closed pipe again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def say(text: str) -> None:
    """Print a Hydra app's result. When the reader is gone (`vpeval validate | head -3`) the rest
    is dropped and the app ends with its own status: its outcome is the status and the run
    folder (Hydra would turn the BrokenPipeError into a traceback)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        if not reader_gone():
            raise
        drop_output()


@hydra.main(config_path=CONFIG_SOURCE, config_name="config", version_base="1.3")
def experiment_app(cfg: DictConfig) -> None:
    from hydra.types import RunMode

    from pipeline.app.experiment import run_experiment
    from pipeline.app.settings import check_settings
    from pipeline.app.sweep import clear_failure, record_failure

    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    clear_failure(run_dir)
    use_usable_cpus(log)
    try:
        check_settings(cfg, build=True)
        report = run_experiment(cfg, run_dir)
    except Exception as error:
        record_failure(run_dir, error, list(hydra_cfg.overrides.task))
        if hydra_cfg.mode == RunMode.MULTIRUN or not isinstance(error, VpevalError):
            raise
        fail(error)
    if report is None:  # a follower node of a multi-node run: node 0 reports
        return
    log.info("report: %s", report / "report.md")
    say(str(report))


SHOWN_PROBLEMS = 20  # `vpeval validate` prints this many problems, then how many more


@hydra.main(config_path=CONFIG_SOURCE, config_name="config", version_base="1.3")
def validate_app(cfg: DictConfig) -> None:
    """Every problem in one run: the settings, then preparation (when the data settings are
    sound), then every list of the prepared corpus; one `vpeval: error:` line each (the first
    SHOWN_PROBLEMS, then how many more and where preparation listed them all), exit 2."""
    from pipeline.app.settings import problems
    from pipeline.core.cache import Cache
    from pipeline.core.schemas import Data, typed
    from pipeline.data.corpus import PreparationProblems
    from pipeline.stages import prepare, validate

    found, listing = problems(cfg), None
    use_usable_cpus(log)
    if not any(p.startswith(("data.", "eval_splits")) for p in found):
        try:
            prepared = prepare.run(typed(cfg.data, Data, "data"), Cache(Path(cfg.paths.cache)))
            result = validate.check(prepared, tuple(cfg.eval_splits))
            say(result.render())
            found += result.problems
        except PreparationProblems as stopped:  # every problem met while preparing, not the first only
            found, listing = found + stopped.problems, stopped.listing
        except VpevalError as error:
            found.append(str(error))
    for problem in found[:SHOWN_PROBLEMS]:
        print(f"vpeval: error: {problem}", file=sys.stderr)
    if len(found) > SHOWN_PROBLEMS:  # e.g. one mistake on every line of a trial list
        where = f", all listed in {listing}" if listing else ""
        print(f"vpeval: error: ... and {len(found) - SHOWN_PROBLEMS} more problems ({len(found)} in all{where})",
              file=sys.stderr)
    if found:
        sys.exit(2)


# The tools: each imports its command's module when it runs, not when vpeval starts (metrics and
# aggregate load scipy and matplotlib, ~2 s that --help, --version and an experiment's checks skip).
def metrics_tool(argv: list[str]) -> int:
    from pipeline.app.metrics_cli import main

    return main(argv)


def aggregate_tool(argv: list[str]) -> int:
    from pipeline.app.aggregate import main

    return main(argv)


def export_tool(argv: list[str]) -> int:
    from pipeline.app.export import main

    return main(argv)


def train_vc_tool(argv: list[str]) -> int:
    from pipeline.app.train_vc.command import main

    return main(argv)


# Subcommands: tools (name -> `main(argv) -> int`) and Hydra apps other than the experiment.
TOOLS = {"metrics": metrics_tool, "aggregate": aggregate_tool, "export": export_tool, "train-vc": train_vc_tool}
HYDRA_APPS = {"validate": validate_app}


def main(argv: list[str] | None = None) -> None:
    """`vpeval ARGS`: one line, not a traceback, on Ctrl-C or SIGTERM; quiet when the reader of
    stdout goes away."""
    signal.signal(signal.SIGTERM, terminate)
    try:
        try:
            dispatch(sys.argv[1:] if argv is None else argv)
        finally:
            sys.stdout.flush()  # a closed pipe fails here rather than in the interpreter's exit
    except KeyboardInterrupt as stop:
        terminated = isinstance(stop, Terminated)
        print(INTERRUPTED.format(how="terminated (SIGTERM)" if terminated else "interrupted"), file=sys.stderr)
        sys.exit(EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)
    except BrokenPipeError:
        if not reader_gone():  # a pipe other than stdout (a worker's, a subprocess's): a real error
            raise
        drop_output()
        sys.exit(EXIT_BROKEN_PIPE)


def dispatch(argv: list[str]) -> None:
    register_resolvers()  # before any Hydra app composes conf/config.yaml (also `--cfg job`, regression)
    if argv[:1] in (["--version"], ["-V"]):
        from pipeline import __version__

        print(f"vpeval {__version__}")
        sys.exit(0)
    if argv[:1] in (["--help"], ["-h"], ["help"]):
        from pipeline.app.usage import usage

        print(usage())
        sys.exit(0)
    command = argv[0] if argv and is_command(argv[0]) else None
    if command in TOOLS:
        sys.exit(TOOLS[command](argv[1:]))
    if command is not None and command not in HYDRA_APPS:
        from pipeline.app.usage import unknown_command

        fail(VpevalError(unknown_command(command, [*HYDRA_APPS, *TOOLS])))
    app = HYDRA_APPS.get(command, experiment_app)
    overrides = argv[1:] if command else argv
    if command == "validate" and any(arg in ("--help", "-h") for arg in overrides):
        from pipeline.app.usage import validate_usage

        print(validate_usage())
        sys.exit(0)
    overrides = quote_non_ascii(overrides)
    check_overrides(overrides, settings=command != "validate")  # validate lists them with the corpus's
    sys.argv = [sys.argv[0], *overrides]
    app()


def is_command(arg: str) -> bool:
    """A bare word (no `=`, no `+`/`~`/`-` prefix) is a subcommand: Hydra takes none."""
    return "=" not in arg and not arg.startswith(("-", "+", "~"))


def quote_non_ascii(overrides: list[str]) -> list[str]:
    """Hydra's grammar takes only ASCII letters in an unquoted value, so a path such as
    `data.root=/corpora/données` needed inner quotes; such a value is quoted for it (one
    holding quotes, commas or brackets, i.e. Hydra syntax, is left as written).

    >>> quote_non_ascii(["data.root=/corpora/données", "seed=1,2", "name=é,è"])
    ["data.root='/corpora/données'", 'seed=1,2', 'name=é,è']
    """
    quoted = []
    for arg in overrides:
        key, sep, value = arg.partition("=")
        plain_value = not any(c in value for c in "'\",[](){}\\")
        quoted.append(f"{key}='{value}'" if sep and not key.startswith("-") and not value.isascii() and plain_value
                      else arg)
    return quoted


def check_syntax(overrides: list[str]) -> None:
    """Each override parses with Hydra's grammar, else one line naming it (Hydra's own
    message spans several lines and exits with status 1)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for arg in overrides:
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as error:
            reason = str(error).strip().splitlines()[0]
            raise VpevalError(f"config override {arg!r} is not valid Hydra syntax ({reason}); quote a value with "
                              "spaces or special characters (key='a b'), see https://hydra.cc/docs/advanced/"
                              "override_grammar/basic/") from None


HYDRA_MODES = {"-m": "--multirun", "--multirun": "--multirun", "-c": "--cfg", "--cfg": "--cfg", "-i": "--info",
               "--info": "--info", "-r": "--run", "--run": "--run", "-sc": "--shell-completion",
               "--shell-completion": "--shell-completion"}


def check_modes(flags: list[str]) -> None:
    """Hydra takes one of --run, --multirun, --cfg, --info (it ends two in a raw ValueError).

    >>> check_modes(["-m", "--cfg"])
    Traceback (most recent call last):
    pipeline.core.errors.VpevalError: -m and --cfg cannot be combined (Hydra runs one of --run, --multirun, --cfg, --info); drop -m to print the config of one point (single values, e.g. seed=1), or --cfg to run the sweep
    """
    modes = list(dict.fromkeys(HYDRA_MODES[f.split("=", 1)[0]] for f in flags if f.split("=", 1)[0] in HYDRA_MODES))
    if len(modes) > 1:
        given = [next(f for f in flags if HYDRA_MODES.get(f.split("=", 1)[0]) == mode) for mode in modes[:2]]
        hint = ("drop -m to print the config of one point (single values, e.g. seed=1), or --cfg to run the sweep"
                if set(modes[:2]) == {"--multirun", "--cfg"} else "drop one")
        raise VpevalError(f"{given[0]} and {given[1]} cannot be combined (Hydra runs one of --run, --multirun, "
                          f"--cfg, --info); {hint}")


def check_overrides(overrides: list[str], settings: bool = True) -> None:
    """Unknown keys, wrongly typed values, settings out of range (pipeline.app.settings, unless
    `settings` is false) and Slurm sweeps that cannot start (pipeline.app.slurm) stop here in one
    line, before Hydra starts (whose own errors span several lines). A sweep (-m) is checked
    value by value: every value of every swept key once, the other keys at their first value.
    Runs with other Hydra flags (--cfg, --config-name, ...) are left to Hydra."""
    flags = [arg for arg in overrides if arg.startswith("-")]
    from pipeline.app.settings import check_settings
    from pipeline.app.slurm import check_slurm_sweep
    from pipeline.app.sweep import sweep_variants
    from pipeline.core.config import compose, null_group_problem

    try:
        check_modes(flags)
        values = [arg for arg in overrides if "=" in arg and not arg.startswith("-")]
        check_syntax(values)
        if any(flag not in ("-m", "--multirun") for flag in flags):  # Hydra composes (--cfg, ...), not vpeval:
            null = null_group_problem(values)  # its compose ends a null group in a raw ValueError
            if null:
                raise VpevalError(null)
            return
        check_slurm_sweep(overrides)
        for variant in sweep_variants([arg for arg in overrides if not arg.startswith("-")]):
            cfg = compose(variant)
            if settings:
                check_settings(cfg)
            make_output_folders(cfg, variant)
    except VpevalError as error:
        fail(error)


def make_output_folders(cfg: DictConfig, overrides: list[str]) -> None:
    """Create `paths.cache` and `paths.runs` and check that the folder Hydra puts the run folder in
    (`paths.runs`, or the folder a `hydra.run.dir` / `hydra.sweep.dir` override names) can be
    written: an unwritable `paths.data` (read-only, even when it already holds a cache; no
    permission; a file in the way) stops here in one line naming the folder, not in Hydra's
    chain of OSErrors."""
    given = {key: value.strip("'\"") for key, _, value in (arg.partition("=") for arg in overrides)
             if key in ("hydra.run.dir", "hydra.sweep.dir")}
    for key in ["cache"] if given else ["cache", "runs"]:
        folder = Path(str(cfg.paths[key]))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            check_writable(folder)
        except OSError as error:
            raise write_error(f"paths.{key}={folder}", error) from None
    for key, value in given.items():
        literal = value.split("${", 1)[0]  # the part before an interpolation (${now:...})
        if not literal:
            continue
        existing = next(p for p in (Path(literal), *Path(literal).parents) if p.exists())
        try:
            if not existing.is_dir():
                raise OSError(errno.ENOTDIR, "Not a directory", str(existing))
            check_writable(existing)
        except OSError as error:
            raise write_error(f"{key}={value}", error) from None


def check_writable(folder: Path) -> None:
    """Raise the OSError that creating a folder in `folder` meets (an existing folder on a
    read-only mount takes mkdir with exist_ok, but not a new one inside it)."""
    os.rmdir(tempfile.mkdtemp(prefix=".vpeval-probe-", dir=folder))

"""`vpeval train-vc vc|ohnn [--config-name NAME] [OVERRIDE...]`: the training recipe of the voice
converter (`vc`) or of the OHNN map (`ohnn`), a Hydra app of the config root conf_train_vc/.

    vpeval train-vc vc --config-name small out=runs/vc_small
    vpeval train-vc ohnn --config-name ohnn_small out=runs/ohnn vc_model=runs/vc_small/vc_model
"""
from __future__ import annotations

import sys

from pipeline.core.config_tree import CONFIG_SEARCHPATH, TRAIN_VC_CONFIG_DIR, did_you_mean

SYSTEMS = ("vc", "ohnn")
# The training configs' corpus, attacker and paths come from the experiment's config groups (conf/).
SEARCHPATH_OVERRIDE = f"hydra.searchpath=['{CONFIG_SEARCHPATH}']"


def configs() -> list[str]:
    return sorted(p.stem for p in TRAIN_VC_CONFIG_DIR.glob("*.yaml"))


def config_name_problem(argv: list[str]) -> str | None:
    """`--config-name NAME` (`-cn NAME`, `--config-name=NAME`) naming no config of
    conf_train_vc/, as one line (Hydra prints a block and exits 1).

    >>> config_name_problem(["--config-name", "smal"])
    "--config-name smal: no such training config (did you mean 'small'?); configs: gpu, ohnn_gpu, ohnn_small, ohnn_tiny, small, tiny"
    """
    for i, arg in enumerate(argv):
        flag, sep, name = arg.partition("=")
        if flag not in ("--config-name", "-cn"):
            continue
        name = name if sep else (argv[i + 1] if i + 1 < len(argv) else "")
        if name.removesuffix(".yaml") not in configs():
            return (f"--config-name {name}: no such training config{did_you_mean(name, configs())}; "
                    f"configs: {', '.join(configs())}")
    return None


def usage() -> str:
    configs_ = ", ".join(configs())
    return "\n".join([
        "usage: vpeval train-vc vc|ohnn [--config-name NAME] [OVERRIDE...]",
        "",
        "Train the voice converter (vc; default config small) or the OHNN map (ohnn; default config",
        "ohnn_small) of the xvector and ohnn anonymisers; prints the model folder (recipes/train_vc/README.md).",
        "",
        "arguments:",
        f"  NAME        a config of conf_train_vc/: {configs_}",
        "  OVERRIDE    KEY=VALUE (Hydra syntax), e.g. out=runs/vc_small data=librispeech data.root=...;",
        "              --cfg job prints the composed config and stops",
        "  -h, --help  this text",
    ])


def main(argv: list[str]) -> int:
    """Run the recipe named by argv[0] as a Hydra app on the rest of argv; 2 on a bad system."""
    if argv[:1] in (["--help"], ["-h"]):
        print(usage())
        return 0
    system = argv[0] if argv else None
    if system not in SYSTEMS:
        print(f"vpeval: error: train-vc takes vc or ohnn first, got {system!r} (vpeval train-vc --help)",
              file=sys.stderr)
        return 2
    problem = config_name_problem(argv[1:])
    if problem:
        print(f"vpeval: error: {problem}", file=sys.stderr)
        return 2
    from pipeline.app.train_vc import ohnn, vc  # here, not at the top: --help and a bad system load no torch

    sys.argv = [sys.argv[0], *argv[1:], SEARCHPATH_OVERRIDE]
    {"vc": vc, "ohnn": ohnn}[system].main()
    return 0

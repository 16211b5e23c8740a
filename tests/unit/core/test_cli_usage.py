"""`vpeval --help`, `--version`, "did you mean" for subcommands, group options and keys."""
import subprocess
import sys

import pytest

from pipeline import __version__
from pipeline.app import cli
from pipeline.app.usage import group_options
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stopped:
        cli.main(list(argv))
    out, err = capsys.readouterr()
    return stopped.value.code, out, err


def test_version_is_vpevals(capsys):
    assert run_cli(capsys, "--version") == (0, f"vpeval {__version__}\n", "")


def test_help_lists_commands_groups_recipes_keys_and_docs(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for command in ("vpeval validate", "vpeval metrics", "vpeval aggregate", "vpeval train-vc", "vpeval --version"):
        assert command in out
    for group, options in group_options().items():
        if group != "experiment":
            line = next(line for line in out.splitlines() if line.split()[:1] == [group])
            assert line.split(None, 1)[1] == ", ".join(options)
    assert "mcadams_a05_07" in group_options()["anonymizer"]  # recipes/<recipe>/anonymizer/ counts too
    line = out.split("recipes (+experiment=RECIPE):\n", 1)[1].splitlines()[0]
    recipes = [recipe.strip() for recipe in line.split(",")]
    assert recipes == group_options()["experiment"] and {"smoke", "vpc2024"} <= set(recipes)  # not by their neighbours
    assert "seed=1986" in out and "device=auto" in out
    assert "docs: README.md" in out


def test_help_lists_the_launcher_group_with_every_launcher(capsys):
    """Regression: `vpeval --help` left out hydra/launcher, the group that sends a sweep to Slurm, and
    the options of the voice-converter training group."""
    _, out, _ = run_cli(capsys, "--help")
    line = next(line for line in out.splitlines() if line.split()[:1] == ["hydra/launcher"])
    assert {"basic", "slurm"} <= set(line.split(None, 1)[1].split(", "))  # Hydra's own and conf/hydra/launcher's
    assert next(line for line in out.splitlines() if line.split()[:1] == ["vc"]).split()[1:3] == ["gpu,", "ohnn_gpu,"]


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_validate_help_says_what_validate_does(capsys, flag):
    """Regression: `vpeval validate --help` showed Hydra's generic application help."""
    code, out, err = run_cli(capsys, "validate", flag)
    assert (code, err) == (0, "")
    assert out.startswith("usage: vpeval validate [OVERRIDE...]")
    for said in ("no other stage", "OK: no problems found.", "exit 2", "OVERRIDE", "data.root"):
        assert said in out
    assert "Powered by Hydra" not in out


def test_misspelt_subcommand_suggests_the_closest(capsys):
    code, out, err = run_cli(capsys, "valdate", "data=synthetic_tiny")
    assert (code, out) == (2, "")
    assert err == ("vpeval: error: unknown command 'valdate' (did you mean 'validate'?); commands: validate, "
                   "metrics, aggregate, export, train-vc; an experiment takes GROUP=OPTION and KEY=VALUE overrides (vpeval --help)\n")


def test_train_vc_help_and_unknown_system(capsys):
    code, out, err = run_cli(capsys, "train-vc", "--help")
    assert (code, err) == (0, "")
    assert out.startswith("usage: vpeval train-vc vc|ohnn") and "gpu, ohnn_gpu, ohnn_small, ohnn_tiny, small, tiny" in out
    assert run_cli(capsys, "train-vc", "xvector") == (2, "", "vpeval: error: train-vc takes vc or ohnn first, got "
                                                     "'xvector' (vpeval train-vc --help)\n")


@pytest.mark.parametrize("tool, usage", [("metrics", "usage: vpeval metrics"), ("aggregate", "usage: vpeval aggregate"),
                                         ("export", "usage: vpeval export"), ("train-vc", "usage: vpeval train-vc")])
def test_every_tool_runs_its_commands_main(capsys, tool, usage):
    """The tools are imported statically (no module named in a string): each reaches its own `--help`."""
    assert set(cli.TOOLS) == {"metrics", "aggregate", "export", "train-vc"}
    code, out, err = run_cli(capsys, tool, "--help")
    assert (code, err) == (0, "")
    assert out.startswith(usage)


def test_starting_vpeval_loads_no_numerical_library():
    """`vpeval --help` / `--version` start fast: the CLI imports a tool's module only when the tool runs
    (metrics and aggregate load scipy and matplotlib, ~2 s)."""
    code = ("import sys; import pipeline.app.cli; "
            "print(sorted(m for m in ('numpy', 'scipy', 'matplotlib', 'torch', 'pipeline.metrics') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_unrelated_word_gets_no_suggestion(capsys):
    _, _, err = run_cli(capsys, "zzz")
    assert "unknown command 'zzz'; commands:" in err


@pytest.mark.parametrize("override, expected", [
    ("anonymizer=mcadam", "anonymizer has no option 'mcadam' (did you mean 'mcadams'?); options: external, mcadams,"),
    ("anonymizer@attacker_anonymizer=mcadams_fixd", "'anonymizer@attacker_anonymizer=mcadams_fixd': anonymizer has "
                                                     "no option 'mcadams_fixd' (did you mean 'mcadams_fixed'?)"),
    ("anonymiser=mcadams", "unknown key 'anonymiser' (did you mean 'anonymizer'?)"),
    ("split.val_fractoin=0.2", "unknown key 'split.val_fractoin' (did you mean 'split.val_fraction'?)"),
])
def test_misspelt_option_or_key_suggests_the_closest(override, expected):
    with pytest.raises(VpevalError) as caught:
        compose([override])
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_job_is_named_vpeval(tmp_path, monkeypatch, capsys):
    """The log file (vpeval.log) and the Slurm job take Hydra's job name, not the module's (`cli`)."""
    monkeypatch.setenv("VPEVAL_DATA", str(tmp_path))
    code, _, _ = run_cli(capsys, "validate", "data=librispeech", f"data.root={tmp_path / 'none'}",
                         f"hydra.run.dir={tmp_path / 'run'}")
    assert code == 2  # no corpus there; the job had started and opened its log
    assert sorted(p.name for p in (tmp_path / "run").glob("*.log")) == ["vpeval.log"]

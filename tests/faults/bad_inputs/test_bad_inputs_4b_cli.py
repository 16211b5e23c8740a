"""Bad inputs: command lines that ended in a raw traceback before issue 38 (Hydra's flags and
output folders, `vpeval train-vc`)."""
import errno
import os

import pytest

from tests.faults.bad_inputs.catalogue import cli_message, record, vpeval


def cli_error(capsys, *args: str) -> str:
    """`vpeval ARGS` in this process, for a check that stops before Hydra starts: exit 2, one line."""
    from pipeline.app import cli

    with pytest.raises(SystemExit) as stopped:
        cli.main(list(args))
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    return err


NULL_GROUP_ROWS = [  # row, extra arguments
    ("cli-null-group", []),
    ("cli-null-group-sweep", ["-m"]),
    ("cli-null-group-cfg", ["--cfg", "job"]),
]


@pytest.mark.parametrize("row, extra", NULL_GROUP_ROWS, ids=[row[0] for row in NULL_GROUP_ROWS])
def test_null_group_option(tmp_path, capsys, row, extra):
    """Regression (issue 38): Hydra's compose ended in a 13-line ValueError traceback."""
    err = cli_error(capsys, *extra, "anonymizer@attacker_anonymizer=null")
    record(row, f"`vpeval {' '.join([*extra, 'anonymizer@attacker_anonymizer=null'])}` (null for a config group)",
           "CLI (exit 2, before Hydra starts)", err, tmp_path, "anonymizer@attacker_anonymizer=null",
           "not null", "mcadams")


def test_multirun_with_cfg(tmp_path, capsys):
    """Regression (issue 38): Hydra's raw `ValueError: Only one of --run, --multirun, --cfg ...`."""
    err = cli_error(capsys, "-m", "seed=1,2", "--cfg", "hydra")
    record("cli-multirun-cfg", "`vpeval -m seed=1,2 --cfg hydra`", "CLI (exit 2, before Hydra starts)", err,
           tmp_path, "-m and --cfg cannot be combined", "drop")


def test_run_dir_is_a_file(tmp_path, capsys):
    """Regression (issue 38): Hydra's mkdir of the run folder ended in a FileExistsError traceback."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    err = cli_error(capsys, "data=synthetic_tiny", f"paths.data={tmp_path / 'data'}", f"hydra.run.dir={blocker}")
    record("cli-run-dir-file", "`vpeval hydra.run.dir=<a file>`", "CLI (exit 2, before Hydra starts)", err,
           tmp_path, "hydra.run.dir=", "a_file", "is a file")


def test_read_only_data_folder_holding_a_cache(tmp_path, capsys, monkeypatch):
    """Regression (issue 38): with `cache/` and `runs/` already there, mkdir(exist_ok) passed on a
    read-only mount and Hydra's creation of the run folder raised the chain of OSErrors."""
    data = tmp_path / "data"
    (data / "cache").mkdir(parents=True)
    (data / "runs").mkdir()
    real_mkdir = os.mkdir

    def read_only(path, *args, **kwargs):  # a read-only mount (root could write into a chmod-ed folder)
        if data in type(data)(path).parents and not os.path.isdir(path):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_mkdir(path, *args, **kwargs)
    monkeypatch.setattr(os, "mkdir", read_only)
    err = cli_error(capsys, "data=synthetic_tiny", f"paths.data={data}")
    assert sorted(p.name for p in data.rglob("*")) == ["cache", "runs"]
    record("cli-read-only-cache", "`vpeval paths.data=<a read-only folder that already holds cache/ and runs/>`",
           "CLI (exit 2, before Hydra starts)", err, tmp_path, "paths.cache=", "Read-only file system")


def test_train_vc_unknown_config_name(tmp_path):
    """Regression (issue 38): Hydra's block about the config search path, exit 1."""
    message = cli_message(vpeval("train-vc", "vc", "--config-name", "smal", tmp=tmp_path))
    record("train-vc-config-name", "`vpeval train-vc vc --config-name smal`", "CLI (exit 2, before Hydra starts)",
           message, tmp_path, "--config-name smal", "did you mean 'small'", "tiny")


def test_train_vc_required_key(tmp_path):
    """Regression (issue 38): `out` left unset ended in omegaconf's MissingMandatoryValue traceback."""
    message = cli_message(vpeval("train-vc", "vc", "--config-name", "tiny", tmp=tmp_path))
    record("train-vc-no-out", "`vpeval train-vc vc --config-name tiny` without `out=`", "train-vc (exit 2)", message,
           tmp_path, "out is required")


def test_train_vc_missing_corpus_writes_nothing(tmp_path):
    """Regression (issue 38): the recipe's synthetic-corpus settings stayed under `data=librispeech`,
    so a synthetic corpus was generated inside the user's (missing) data.root, then the run failed
    on a subset folder the user never named (exit 1); nothing is written now."""
    root, out = tmp_path / "LibriSpeech", tmp_path / "vc_out"
    message = cli_message(vpeval("train-vc", "vc", "--config-name", "tiny", f"out={out}", "data=librispeech",
                                 f"data.root={root}", tmp=tmp_path))
    assert not root.exists() and not out.exists()
    record("train-vc-missing-corpus", "`vpeval train-vc vc data=librispeech data.root=<missing>`",
           "train-vc (exit 2, before anything is written)", message, tmp_path, "LibriSpeech",
           "corpus folder not found")


def test_group_outside_the_defaults_needs_a_plus(tmp_path, capsys):
    """Regression (issue 38): `experiment=smoke` suggested "did you mean 'experiment'?", without the `+`."""
    err = cli_error(capsys, "experiment=smoke")
    assert "did you mean" not in err
    record("cli-experiment-without-plus", "`vpeval experiment=smoke` (a recipe without the `+`)",
           "CLI (exit 2, before Hydra starts)", err, tmp_path, "'+experiment=smoke'")


def test_sigterm_is_one_line(tmp_path):
    """Regression (issue 38): SIGTERM (Slurm's pre-emption or time limit) printed nothing. The
    command here waits in place of a run (tests/unit/core/test_cli_exits.py stops a real one)."""
    import signal
    import subprocess
    import sys

    from pipeline.core.config import REPO_ROOT

    waiting = ("import sys, time; from pipeline.app import cli; "
               "cli.dispatch = lambda argv: (print('ready', file=sys.stderr, flush=True), time.sleep(60)); cli.main([])")
    process = subprocess.Popen([sys.executable, "-c", waiting], cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr.readline().strip() == "ready"
    process.send_signal(signal.SIGTERM)
    err = process.communicate(timeout=60)[1]
    assert process.returncode == 143 and "Traceback" not in err, err
    record("sigterm", "SIGTERM during a run (Slurm's pre-emption or time limit)", "CLI (exit 143, resumable; Ctrl-C: "
           "the same line with `interrupted`, exit 130)", err, tmp_path, "terminated (SIGTERM)", "resume")

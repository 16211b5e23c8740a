"""How `vpeval` ends when it is stopped from outside: Ctrl-C, SIGTERM, a reader that closes the pipe early."""
import os
import signal
import subprocess
import sys

import pytest

from pipeline.app.cli import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_TERMINATED, INTERRUPTED
from pipeline.core.config import REPO_ROOT
from pipeline.core.fileio import write_lines


def start(*args: str, tmp_path, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "VPEVAL_DATA": str(tmp_path / "data")}
    return subprocess.Popen([sys.executable, "-m", "pipeline", *args], cwd=REPO_ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def test_a_reader_that_closes_the_pipe_ends_vpeval_quietly(tmp_path):
    """Regression: `vpeval metrics ... | head -1` ended in a BrokenPipeError traceback."""
    scores = write_lines(tmp_path / "scores.txt", ["e1 u1 2.5 target", "e1 u2 -1.0 nontarget",
                                                   "e2 u2 1.5 target", "e2 u1 -0.5 nontarget"])
    process = start("metrics", str(scores), tmp_path=tmp_path)
    process.stdout.close()  # the reader is gone before vpeval prints its table
    err = process.stderr.read()
    assert (process.wait(timeout=120), err) == (EXIT_BROKEN_PIPE, "")


def test_validate_whose_reader_is_gone_still_says_its_verdict(tmp_path):
    """`vpeval validate | head -1`: the table is dropped, the status still says whether the corpus is sound."""
    process = start("validate", "data=synthetic_tiny", tmp_path=tmp_path)
    process.stdout.close()
    err = process.stderr.read()
    assert process.wait(timeout=300) == 0 and "Traceback" not in err and "Error" not in err, err[-2000:]


@pytest.mark.parametrize("stop, status, how", [(signal.SIGINT, EXIT_INTERRUPTED, "interrupted"),
                                               (signal.SIGTERM, EXIT_TERMINATED, "terminated (SIGTERM)")])
def test_ctrl_c_or_sigterm_prints_one_line_and_exits(tmp_path, stop, status, how):
    """Regression: Ctrl-C printed a 40-line traceback; SIGTERM (Slurm's preemption or time limit)
    printed nothing (issue 38). Stopped once it is at work (its first log line: the run folder
    exists, the corpus is being generated or prepared)."""
    # a shell's background job (CI's, a nohup'ed `make test`) ignores SIGINT, and children inherit it
    process = start("+experiment=smoke", tmp_path=tmp_path,
                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    logged = process.stderr.readline()
    assert logged, "vpeval ended before logging anything"
    process.send_signal(stop)
    out, err = process.communicate(timeout=120)
    lines = [line for line in (logged + err).splitlines() if line.strip()]
    assert process.returncode == status, err[-2000:]
    assert lines[-1] == INTERRUPTED.format(how=how) and "Traceback" not in err and out == ""

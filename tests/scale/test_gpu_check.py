"""scripts/gpu_check.py on CPU: arguments, the dry run's table, how steps are run and read."""
import datetime
import json
import re
import sys

import pytest
import torch

from scripts.gpu_check import DEFAULT_BUDGET, ROOT, Step, Target, main, parse_args, run_step, steps_for, table, time_for


def python_step(code: str, keep: str = r"^training: .*", targets=()) -> Step:
    return Step("probe", "a probe", [sys.executable, "-c", code], keep, 10, tuple(targets))


def test_dry_run_prints_a_dated_table_of_every_step(tmp_path, capsys):
    assert main(["--dry-run", "--out", str(tmp_path)]) == 0
    written = (tmp_path / "gpu_check.md").read_text()
    assert capsys.readouterr().out.endswith(written)
    header = written.splitlines()[0]
    datetime.datetime.strptime(header.split(" of ")[1][:16], "%Y-%m-%d %H:%M")
    assert "torch" in header
    for step in steps_for("cuda", "train-clean-360", tmp_path):
        assert f"`{' '.join('python' if a == sys.executable else a for a in step.argv)}`" in written
    assert "--size train-clean-360" in written and "--compile reduce-overhead" in written


@pytest.mark.parametrize("argv, message", [
    (["--budget", "0"], "--budget must be positive"),
    (["--only", "warp-drive"], r"unknown step\(s\) \['warp-drive'\]; the steps are \['pytest_gpu'"),
])
def test_bad_arguments_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert len(re.findall(message, capsys.readouterr().err)) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_cuda_without_cuda_stops_before_any_step(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path)])
    assert "--device cuda but CUDA is not available here" in capsys.readouterr().err
    assert not (tmp_path / "gpu_check.md").exists()


def test_a_step_runs_its_share_and_what_earlier_steps_left_never_what_later_steps_are_owed():
    """The steps of the 2026-11-29 H200 run (`--only ... scale --budget 510`): each step with a
    share may run that share (scaled) plus what the steps before it saved; the share-0 scale step
    keeps the budget's unshared rest however early the others end."""
    names = ["pytest_gpu", "attacker_eager", "attacker_compiled", "ecapa_ssl", "profile", "scale"]
    steps = [s for s in steps_for("cuda", "train-clean-360") if s.name in names]
    budget, scale = 510.0, 510.0 / DEFAULT_BUDGET
    shares = [scale * s.seconds for s in steps]
    assert time_for(steps, 0, budget, budget) == pytest.approx(shares[0])
    left, reserved = budget, budget - sum(shares)
    for index, share in enumerate(shares[:-1]):
        allowed = time_for(steps, index, left, budget)
        assert allowed == pytest.approx(left - sum(shares[index + 1:]) - reserved)
        left -= share / 2  # every step ends at half its share: the next ones may use what it saved
    assert time_for(steps, len(steps) - 1, left, budget) == pytest.approx(left)
    assert left > reserved


def test_figures_and_targets_are_read_from_the_output(tmp_path):
    step = python_step("print('noise'); print('training: 9123.4 crops/s (25600 crops); 9 GFLOP')",
                       r"^training: .*?(?=;|\(|$)",
                       [Target("training >= 8,000 crops/s", r"training: ([\d.]+) crops/s", 8000),
                        Target("attack < 20 min", r"attack: ([\d.]+) s", 1200, at_least=False)])
    outcome = run_step(step, 30, tmp_path)
    assert outcome.status == "ok"
    assert outcome.result == "training: 9123.4 crops/s; training >= 8,000 crops/s: met; attack < 20 min: no figure"
    assert "noise" in (tmp_path / "probe.log").read_text()
    best = run_step(python_step("print('training: 7000.0 crops/s'); print('training: 8500.5 crops/s')",
                                targets=[Target("training >= 8,000 crops/s", r"training: ([\d.]+) crops/s", 8000)]),
                    30, tmp_path)
    assert best.result.endswith("training >= 8,000 crops/s: met")  # the best of the figures (two batch sizes)


def test_failed_and_timed_out_steps_say_so_with_their_last_line(tmp_path):
    failed = run_step(python_step("import sys; print('training: 12 crops/s'); sys.exit('CUDA error: boom')"),
                      30, tmp_path)
    assert failed.status == "failed (rc 1)"
    assert failed.result == "training: 12 crops/s; last line: CUDA error: boom"
    slow = run_step(python_step("import time; print('started', flush=True); time.sleep(60)"), 1, tmp_path)
    assert slow.status == "timed out after 1 s" and slow.result == "last line: started" and slow.seconds < 30


def test_table_rows_keep_their_columns(tmp_path):
    outcome = run_step(python_step("print('training: 1 | 2')", r"^training: .*"), 30, tmp_path)
    rows = table([outcome], datetime.datetime(2026, 11, 24, 12, 0), "1 x H100").splitlines()
    assert rows[0].startswith("GPU check of 2026-11-24 12:00 UTC on 1 x H100")
    assert rows[-1].replace("\\|", "").count("|") == 5 and "training: 1 \\| 2" in rows[-1]


def test_ecapa_ssl_step_runs_at_cpu_sizes_and_reports_its_figures(tmp_path):
    """The ecapa_ssl step's own logic (random WavLM, training, FLOPs split, extraction) on CPU."""
    step = next(s for s in steps_for("cpu", "tiny") if s.name == "ecapa_ssl")
    assert "ecapa_ssl_tiny" in step.argv and "--random-wavlm" in step.argv
    cuda_step = next(s for s in steps_for("cuda", "train-clean-360") if s.name == "ecapa_ssl")
    assert [cuda_step.argv[cuda_step.argv.index(k) + 1] for k in ("--attacker", "--batch-size")] == ["ecapa_ssl", "32"]
    outcome = run_step(step, 600, tmp_path)
    assert outcome.status == "ok", (tmp_path / "ecapa_ssl.log").read_text()[-2000:]
    figures = dict(re.findall(r"(training|extraction): ([\d.]+) (?:crops|utterances)/s", outcome.result))
    assert float(figures["training"]) > 0 and float(figures["extraction"]) > 0
    wavlm, rest, backward = map(float, re.search(r"per crop: WavLM forward ([\d.]+) GFLOP, the rest of the forward "
                                                 r"([\d.]+) GFLOP, backward ([\d.]+) GFLOP", outcome.result).groups())
    assert wavlm > 0 and rest > 0 and backward > rest  # the backward of the trainable part only
    assert "ecapa_ssl training >= 600 crops/s: " in outcome.result


def test_profile_step_writes_traces_and_top20_tables_at_cpu_sizes(tmp_path):
    """The profile step (issue 36) on CPU: three Chrome traces and three top-20 tables under
    <out>/profile, and its table row names the three steps."""
    step = next(s for s in steps_for("cpu", "tiny", tmp_path) if s.name == "profile")
    cuda_step = next(s for s in steps_for("cuda", "train-clean-360", tmp_path) if s.name == "profile")
    assert "--compile" in cuda_step.argv and "bf16" in cuda_step.argv
    outcome = run_step(step, 600, tmp_path)
    assert outcome.status == "ok", (tmp_path / "profile.log").read_text()[-2000:]
    for name in ("ecapa_train", "extraction", "ecapa_ssl_train"):
        assert f"== {name}" in outcome.result
        assert json.loads((tmp_path / "profile" / f"{name}.json").read_text())["traceEvents"]
        assert "Self CPU" in (tmp_path / "profile" / f"{name}_top20.txt").read_text()


def test_ecapa_ssl_scale_step_runs_every_stage_at_cpu_sizes(tmp_path):
    """The scale_ssl step (bench_scale --random-wavlm: ecapa_ssl from scratch over a random WavLM)
    at CPU sizes: every stage's row, its disk use and the EERs; on CUDA, VPC 2026's ecapa_ssl."""
    step = next(s for s in steps_for("cpu", "tiny", tmp_path) if s.name == "scale_ssl")
    cuda_step = next(s for s in steps_for("cuda", "train-clean-360", tmp_path) if s.name == "scale_ssl")
    assert "attacker=ecapa_ssl" in cuda_step.argv and "--random-wavlm" in cuda_step.argv
    outcome = run_step(step, 600, tmp_path)
    assert outcome.status == "ok", (tmp_path / "scale_ssl.log").read_text()[-2000:]
    for stage in ("generate", "anonymize train", "train (1 epoch)", "extract", "score + metrics"):
        assert f"== {stage}" in outcome.result
    assert "disk use: corpus" in outcome.result and "AA test_m: EER" in outcome.result


@pytest.mark.parametrize("attacker", sorted(p.stem for p in (ROOT / "conf" / "attacker").glob("*.yaml")))
def test_the_attacker_bench_trains_every_attacker_config_from_random_weights(attacker, tmp_path):
    """Regression: the GPU check's ecapa_ssl step failed on the H200 (`attacker.finetune=true:
    needs attacker.init`) because its CPU run used ecapa_ssl_tiny, whose finetune is null."""
    from benchmarks.bench_attacker import attacker_config, training_overrides
    from pipeline.asv.finetune import init_folder

    cfg = attacker_config(attacker, training_overrides(8, "false", "bf16", 0, tmp_path))
    assert init_folder(cfg.init, cfg.finetune) is None


@pytest.mark.slow  # a minute of Inductor compilation; the compiled forward's own tests are in test_asv_ecapa_ssl.py
def test_compiled_ecapa_ssl_step_runs_at_cpu_sizes(tmp_path):
    """The compiled ecapa_ssl step (the whole training forward, frozen WavLM included, as one graph)."""
    step = next(s for s in steps_for("cpu", "tiny") if s.name == "ecapa_ssl_compiled")
    assert step.argv[step.argv.index("--compile") + 1] == "reduce-overhead"
    outcome = run_step(step, 600, tmp_path)
    assert outcome.status == "ok", (tmp_path / "ecapa_ssl_compiled.log").read_text()[-2000:]
    assert float(re.search(r"training: ([\d.]+) crops/s", outcome.result).group(1)) > 0
    assert "compile reduce-overhead" in (tmp_path / "ecapa_ssl_compiled.log").read_text()

"""The compiled training step: one graph with no breaks, the compile setting and its failures."""
import json
import math

import pytest
import torch
import torch._inductor.config as inductor_config

from pipeline.asv import train as train_module
from pipeline.asv.model import AAMSoftmaxHead, SpeakerEncoder
from pipeline.asv.train import _TrainingStep, train_attacker
from pipeline.core.config import compose
from pipeline.core.devices import compile_mode
from pipeline.core.errors import VpevalError
from tests.helpers import typed_attacker

TINY = dict(channels=[16, 16, 48], kernel_sizes=[5, 3, 1], dilations=[1, 2, 1], attention_channels=8,
            se_channels=8, embedding_dim=12, res2net_scale=4)
KEY = "attacker.training.compile"

pytestmark = pytest.mark.usefixtures("single_thread")


def test_training_step_is_one_graph_without_breaks():
    step = _TrainingStep(SpeakerEncoder(**TINY), AAMSoftmaxHead(12, 5), amp_dtype=None)
    explanation = torch._dynamo.explain(step)(torch.randn(4, 8000) * 0.1, torch.tensor([0, 1, 2, 3]))
    assert explanation.graph_break_count == 0, [reason.reason for reason in explanation.break_reasons]
    assert explanation.graph_count == 1
    ops = {str(node.target) for graph in explanation.graphs for node in graph.graph.nodes}
    assert not any("fft" in op or "complex" in op for op in ops)


def test_no_graph_break_where_dynamo_cannot_trace_the_autocast_check(monkeypatch):
    """Regression (the GPU check on an H200, torch 2.11): Dynamo broke the compiled step's graph
    at the fbank's autocast-availability check, recompiled the rest at every step up to its
    limit and then ran it eagerly. Here the check is made untraceable, as it was there."""
    monkeypatch.setattr(torch.amp, "is_autocast_available", torch._dynamo.disable(torch.amp.is_autocast_available))
    torch._dynamo.reset()
    step = _TrainingStep(SpeakerEncoder(**TINY), AAMSoftmaxHead(12, 5), amp_dtype=torch.bfloat16)
    explanation = torch._dynamo.explain(step)(torch.randn(4, 8000) * 0.1, torch.tensor([0, 1, 2, 3]))
    assert explanation.graph_break_count == 0, [reason.reason for reason in explanation.break_reasons]


@pytest.mark.parametrize("value, mode", [(False, None), (None, None), (True, "default"),
                                         ("reduce-overhead", "reduce-overhead")])
def test_compile_values(value, mode):
    assert compile_mode(value, torch.device("cpu"), config_key=KEY) == mode


def test_unknown_compile_mode_names_the_setting():
    with pytest.raises(VpevalError, match=rf"^{KEY} must be false, true or one of .*got 'fast'$"):
        compile_mode("fast", torch.device("cpu"), config_key=KEY)


def test_missing_cpu_compiler_is_one_line_naming_the_setting():
    message = rf"^{KEY}=True: torch.compile cannot build code here \(no C\+\+ compiler.*set {KEY}=false$"
    with inductor_config.patch({"cpp.cxx": ("no-such-c++-compiler",)}), pytest.raises(VpevalError, match=message) as error:
        compile_mode(True, torch.device("cpu"), config_key=KEY)
    assert "\n" not in str(error.value)


def test_missing_triton_is_one_line_naming_the_setting(monkeypatch):
    monkeypatch.setattr("torch.utils._triton.has_triton", lambda: False)
    with pytest.raises(VpevalError, match=rf"^{KEY}=reduce-overhead: .*triton is not installed"):
        compile_mode("reduce-overhead", torch.device("cuda"), config_key=KEY)


def test_bad_compile_setting_stops_training_before_the_audio_cache(corpus, tmp_path):
    cfg = typed_attacker(overrides=(f"{KEY}=fast",))
    with pytest.raises(VpevalError, match=KEY):
        train_attacker(cfg, corpus[0], tmp_path, device="cpu", seed=1, validate=lambda encoder: 0.5)
    assert not (tmp_path / "audio_cache").exists()


def test_compile_failure_in_the_first_step_is_one_line(corpus, tmp_path, monkeypatch):
    def failing_backend(graph, example_inputs):
        raise RuntimeError("no kernels today")

    real_compile = torch.compile
    monkeypatch.setattr(train_module.torch, "compile",
                        lambda module, mode: real_compile(module, backend=failing_backend))
    cfg = typed_attacker(overrides=(f"{KEY}=true", "attacker.training.batch_size=8", "attacker.training.epochs=1"))
    with pytest.raises(VpevalError, match=rf"^{KEY}=default: torch.compile failed \(.*no kernels today.*\); "
                                          rf"set {KEY}=false$"):
        train_attacker(cfg, corpus[0], tmp_path, device="cpu", seed=1, validate=lambda encoder: 0.5)


@pytest.mark.parametrize("name", ["ecapa", "ecapa_small", "ecapa_tiny"])
def test_compile_mode_override_passes_the_config_checks(name):
    """Regression: a boolean default made the override type check refuse 'reduce-overhead'."""
    cfg = compose([f"attacker={name}", f"{KEY}=reduce-overhead"])
    assert compile_mode(cfg.attacker.training.compile, torch.device("cpu"), config_key=KEY) == "reduce-overhead"
    assert compile_mode(compose([f"attacker={name}"]).attacker.training.compile, torch.device("cpu"),
                        config_key=KEY) is None


@pytest.mark.gpu
def test_training_with_cuda_graphs_learns(corpus, tmp_path):
    cfg = typed_attacker(overrides=(f"{KEY}=reduce-overhead", "attacker.training.precision=bf16",
                                     "attacker.training.batch_size=8", "attacker.training.epochs=3"))
    out = train_attacker(cfg, corpus[0], tmp_path, device="cuda", seed=1, validate=lambda encoder: 0.5)
    log = [json.loads(line) for line in (out / "training_log.jsonl").read_text().splitlines()]
    assert all(math.isfinite(record["loss"]) for record in log) and log[-1]["loss"] < log[0]["loss"]

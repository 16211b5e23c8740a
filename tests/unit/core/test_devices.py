"""Device placement: a module's device is used, a mismatched request is a one-line error.

A module on the `meta` device stands in for a GPU on CPU-only machines: the bug class is a
caller asking for one device while the module lives on another (the H100 run of 2026-11-24
failed that way in `embed_utterances`)."""
import pytest
import torch

from anonymizers.vc.pool import speaker_statistics
from pipeline.app.experiment import run_experiment
from pipeline.asv.embed import embed_utterances
from pipeline.asv.model import SpeakerEncoder
from pipeline.core.config import compose
from pipeline.core.devices import module_device, out_of_memory, resolve_device
from pipeline.core.errors import VpevalError
from pipeline.signal.f0 import YinPitch
from tests.helpers import utterances

TINY = dict(channels=[16, 16, 48], kernel_sizes=[5, 3, 1], dilations=[1, 2, 1], attention_channels=8,
            se_channels=8, embedding_dim=12, res2net_scale=4)


def test_module_device_is_where_the_parameters_are():
    assert module_device(torch.nn.Linear(2, 2)) == torch.device("cpu")
    assert module_device(torch.nn.Linear(2, 2, device="meta")) == torch.device("meta")
    assert module_device(torch.nn.ReLU(), "meta") == torch.device("meta")  # nothing to place: as asked


def test_mismatched_request_names_both_devices():
    with pytest.raises(VpevalError, match=r"^the thing is on meta but device 'cpu' was asked for") as error:
        module_device(torch.nn.Linear(2, 2, device="meta"), "cpu", what="the thing")
    assert "\n" not in str(error.value)


def test_split_module_is_an_error():
    split = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2, device="meta"))
    with pytest.raises(VpevalError, match="on several devices"):
        module_device(split)


def test_embedding_with_another_device_than_the_encoders_is_refused_before_any_audio():
    encoder = SpeakerEncoder(**TINY).to("meta")
    utts = utterances({"a": "f", "b": "m"}, 2)  # paths do not exist: nothing may be read
    with pytest.raises(VpevalError, match="speaker encoder is on meta but device 'cpu'"):
        embed_utterances(encoder, utts, device="cpu", progress=False)


def test_speaker_statistics_with_another_device_than_the_encoders_is_refused():
    encoder = SpeakerEncoder(**TINY).to("meta")
    with pytest.raises(VpevalError, match="speaker encoder is on meta but device 'cpu'"):
        speaker_statistics(utterances({"a": "f"}, 1), encoder, YinPitch(), device="cpu")


def test_cuda_without_cuda_names_the_setting(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(VpevalError, match=r"^device='cuda' requested but CUDA is not available"):
        resolve_device("cuda")


@pytest.mark.parametrize("override, message", [
    ("device=cuda", r"^device='cuda' requested but CUDA is not available; use device=auto or device=cpu$"),
    ("attacker.training.compile=fast", r"^attacker.training.compile must be false, true or one of"),
])
def test_device_and_compile_settings_fail_before_any_data_work(override, message, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = compose(["data=synthetic_tiny", f"paths.data={tmp_path}", override])
    with pytest.raises(VpevalError, match=message):
        run_experiment(cfg, tmp_path / "runs" / "x")
    assert not (tmp_path / "corpora").exists() and not list((tmp_path / "cache").glob("prepare*"))


def test_out_of_memory_on_cuda_names_what_the_batch_needed_and_the_device_has(monkeypatch):
    """Issue 36: allocated now + what the failed allocation asked for, against the card's total."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (300 * 2 ** 20, 80 * 10 ** 9))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 78 * 10 ** 9)
    error = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity ...")
    message = str(out_of_memory(error, torch.device("cuda", 0), "a training step of 256 crops of 3 s",
                                "attacker.training.batch_size=256", "lower it"))
    assert message == ("attacker.training.batch_size=256: a training step of 256 crops of 3 s needs more than "
                       "80.1 GB of GPU memory; cuda:0 has 80.0 GB (314.6 MB free after the failure); lower it")

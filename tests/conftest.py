"""Shared pytest setup.

- CUDA-only tests (`@pytest.mark.gpu`) skip cleanly on machines without a GPU.
- SpeechBrain registers lazy placeholder modules for optional integrations (k2, spaCy, ...)
  in `sys.modules`; hypothesis inspects every loaded module's `__file__`, which makes such a
  placeholder try to import its missing package and fail. They are imported once here and
  removed, so test order never matters.
- `single_thread`: tiny models run fastest on one torch thread, and multi-threaded kernels
  thrash on shared cores; modules use it with `pytestmark = pytest.mark.usefixtures("single_thread")`.
- Lines logged once per process (`pipeline.metrics.detection.log_once`) are logged again in
  every test, so a test that looks for one never depends on which test ran before.
- `corpus`: the toy speakers of the ASV tests, written once per session (read-only).
- `vpc_folder`: a VoicePrivacy recipe folder (Kaldi data dirs), built once per session (read-only;
  tests that damage it work on a copy, `tests.helpers.damaged`).
- `tests/fixtures` holds data and the scripts that made it, no tests: `--doctest-modules` would
  import its Python files, among them the `custom_interface.py` of every SER fold checkpoint
  (one module name, several files: pytest's "import file mismatch").
"""
import sys

import numpy as np
import pytest
import torch

from pipeline.data.audio import write_audio
from pipeline.data.manifest import Utterance
from tests.helpers import TOY_RATE, toy_voice, vpc_recipe

TOY_SPEAKERS, TOY_TRAIN_PER_SPEAKER, TOY_VAL_PER_SPEAKER = 6, 6, 3
collect_ignore = ["fixtures"]


def pytest_configure(config):
    import speechbrain.lobes.models.ECAPA_TDNN  # noqa: F401  (registers the placeholders)
    from speechbrain.utils.importutils import LazyModule

    for name, module in list(sys.modules.items()):
        if isinstance(module, LazyModule):
            del sys.modules[name]


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def fresh_log_once():
    from pipeline.metrics.detection import LOGGED

    LOGGED.clear()


@pytest.fixture(scope="module")
def single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> tuple[list[Utterance], list[Utterance]]:
    """(train, validation) utterances of the toy speakers (`tests.helpers.toy_voice`), 1.0-1.6 s each,
    written as 16-bit FLAC. Shared by every module: nothing may write into its folder."""
    folder = tmp_path_factory.mktemp("toy_corpus")
    durations = np.random.default_rng(0).uniform(1.0, 1.6, size=(TOY_SPEAKERS,
                                                                 TOY_TRAIN_PER_SPEAKER + TOY_VAL_PER_SPEAKER))
    train, val = [], []
    for speaker in range(TOY_SPEAKERS):
        for index, seconds in enumerate(durations[speaker]):
            utt_id = f"s{speaker}-{index:02d}"
            path = write_audio(folder / f"{utt_id}.flac", toy_voice(speaker, index, seconds), TOY_RATE)
            utt = Utterance(utt_id, f"s{speaker}", "fm"[speaker % 2], str(path), round(float(seconds), 3))
            (train if index < TOY_TRAIN_PER_SPEAKER else val).append(utt)
    return train, val


@pytest.fixture(scope="session")
def vpc_folder(tmp_path_factory):
    """A VoicePrivacy recipe folder (`tests.helpers.vpc_recipe`: audio under corpora/, Kaldi dirs
    under data/). Shared by every module: nothing may write into it."""
    folder = tmp_path_factory.mktemp("vpc")
    vpc_recipe(folder)
    return folder

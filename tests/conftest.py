"""Shared pytest setup.

- CUDA-only tests (`@pytest.mark.gpu`) skip cleanly on machines without a GPU.
- SpeechBrain registers lazy placeholder modules for optional integrations (k2, spaCy, ...)
  in `sys.modules`; hypothesis inspects every loaded module's `__file__`, which makes such a
  placeholder try to import its missing package and fail. They are imported once here and
  removed, so test order never matters.
- `single_thread`: tiny models run fastest on one torch thread, and multi-threaded kernels
  thrash on shared cores; modules use it with `pytestmark = pytest.mark.usefixtures("single_thread")`.
"""
import sys

import pytest
import torch


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


@pytest.fixture(scope="module")
def single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

"""Regression: SpeechBrain's lazy placeholders made hypothesis tests fail after any ASV test
imported SpeechBrain ('Please install k2'); conftest removes them."""
import sys

from hypothesis import given
from hypothesis import strategies as st


def test_no_speechbrain_placeholders_in_sys_modules():
    import speechbrain.lobes.models.ECAPA_TDNN  # noqa: F401
    from speechbrain.utils.importutils import LazyModule

    assert not [name for name, module in sys.modules.items() if isinstance(module, LazyModule)]


@given(st.integers())
def test_hypothesis_runs_after_speechbrain_import(value):
    assert value == value

"""Every `conf/anonymizer/*.yaml` instantiates the way the anonymize stage does it:
`name` removed, then `hydra.utils.instantiate(cfg, seed=..., device=...)`."""
import sys

import numpy as np
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.utils import instantiate
from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue

from anonymizers.base import Anonymizer
from anonymizers.external import External
from anonymizers.mcadams import McAdams
from anonymizers.precomputed import Precomputed
from pipeline.core.config import REPO_ROOT, compose

CONFIG_DIR = REPO_ROOT / "conf" / "anonymizer"
UNIT_TESTS = REPO_ROOT / "tests" / "unit" / "anonymizers"


def build(name, **values):
    cfg = compose(config_name=f"anonymizer/{name}").anonymizer  # with its defaults (a variant inherits its base)
    OmegaConf.set_struct(cfg, False)
    assert cfg.name == name
    for key, value in values.items():
        cfg[key] = value
    plain = {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k != "name"}
    return instantiate(plain, seed=11, device="cpu")


@pytest.mark.parametrize("name", sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
def test_every_config_files_system_has_its_unit_tests(name):
    """Each config's system is tested on its own: a test of tests/unit/anonymizers/ imports its
    module (the neural ones: test_neural_system.py); the configs are built here and in test_config.py."""
    module = compose(config_name=f"anonymizer/{name}").anonymizer._target_.rsplit(".", 1)[0]
    tests = [path.read_text() for path in UNIT_TESTS.glob("test_*.py")]
    assert any(f"from {module} import" in text or f"import {module}" in text for text in tests), \
        f"conf/anonymizer/{name}.yaml: no test in tests/unit/anonymizers/ imports {module}"


@pytest.mark.parametrize("name, level, alpha_range", [
    ("mcadams", "utterance", (0.5, 0.9)),
    ("mcadams_fixed", "utterance", (0.8, 0.8)),
    ("mcadams_speaker", "speaker", (0.5, 0.9)),
])
def test_mcadams_configs(name, level, alpha_range):
    anonymizer = build(name)
    assert isinstance(anonymizer, McAdams) and isinstance(anonymizer, Anonymizer)
    assert (anonymizer.level, anonymizer.alpha_range, anonymizer.seed) == (level, alpha_range, 11)
    assert (anonymizer.lpc, anonymizer.deterministic) == ("levinson", False)
    assert build(name, lpc="burg", deterministic=True).lpc == "burg"
    (output,) = anonymizer([np.zeros(400, np.float32)], ["u"], ["s"], 16000)
    assert output.shape == (400,)


def test_external_config_with_a_command_line_override(tmp_path):
    override = 'anonymizer.command=[python,my_system.py,"{input_dir}","{list_file}","{output_dir}"]'
    command = OverridesParser.create().parse_overrides([override])[0].value()
    anonymizer = build("external", command=command, workdir=str(tmp_path))
    assert isinstance(anonymizer, External)
    assert anonymizer.command == ["python", "my_system.py", "{input_dir}", "{list_file}", "{output_dir}"]
    assert anonymizer.timeout_seconds == 3600 and anonymizer.length_tolerance == 0.1


def test_precomputed_config(tmp_path):
    anonymizer = build("precomputed", folder=str(tmp_path))
    assert isinstance(anonymizer, Precomputed) and anonymizer.folder == tmp_path


@pytest.mark.parametrize("name", ["external", "precomputed"])
def test_mandatory_keys_must_be_set(name):
    with pytest.raises(MissingMandatoryValue, match="Missing mandatory value"):
        build(name)


def test_external_config_runs_a_real_command(tmp_path):
    script = tmp_path / "copy.py"
    script.write_text("import shutil, sys\nfor line in open(sys.argv[1]):\n"
                      "    utt, _, path = line.split()\n    shutil.copy(path, f'{sys.argv[2]}/{utt}.wav')\n")
    anonymizer = build("external", command=[sys.executable, str(script), "{list_file}", "{output_dir}"])
    (output,) = anonymizer([np.full(1600, 0.25, np.float32)], ["u1"], ["s1"], 16000)
    np.testing.assert_allclose(output.numpy(), 0.25, atol=1e-4)

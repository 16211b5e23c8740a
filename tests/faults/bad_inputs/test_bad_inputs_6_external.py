"""Bad inputs: the external anonymiser command."""
from __future__ import annotations

import sys
from pathlib import Path

from anonymizers.external import External
from tests.faults.bad_inputs.catalogue import RATE, cli_message, raised, record, vpeval
from tests.helpers import tone

SYSTEM = """
import sys, time
import soundfile as sf
list_file, output_dir, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "fail":
    print("loading model"); print("RuntimeError: CUDA out of memory", file=sys.stderr); sys.exit(3)
if mode == "hang":
    time.sleep(600)
for line in open(list_file):
    utt, speaker, path = line.split()
    audio, rate = sf.read(path, dtype="float32")
    audio = 0 * audio if mode == "zeros" else audio
    sf.write(f"{output_dir}/{utt}.wav", audio[: len(audio) // 4] if mode == "short" else audio, rate)
"""


def run_external(tmp: Path, mode: str, timeout: float = 120.0, command: list[str] | None = None) -> str:
    script = tmp / "my_system.py"
    script.write_text(SYSTEM)
    command = command or [sys.executable, str(script), "{list_file}", "{output_dir}", mode]

    def go():
        system = External(command=command, timeout_seconds=timeout, device="cpu", workdir=str(tmp))
        return system([tone(1.0, 120), tone(1.0, 150)], ["spk1-a", "spk2-a"], ["spk1", "spk2"], RATE)
    message = raised(go)
    assert not any(tmp.glob("vpeval-external-*")), "the scratch folder was left behind"
    return message.replace(sys.executable, "python")


def test_external_command_fails(tmp_path):
    record("external-fails", "external anonymiser exiting with status 3", "anonymize (external)",
           run_external(tmp_path, "fail"), tmp_path, "exit status 3", "CUDA out of memory")


def test_external_command_hangs(tmp_path):
    record("external-hangs", "external anonymiser that never finishes", "anonymize (external, timeout)",
           run_external(tmp_path, "hang", timeout=2.0), tmp_path, "timed out after 2 s", "anonymizer.timeout_seconds")


def test_external_command_wrong_lengths(tmp_path):
    record("external-lengths", "external anonymiser writing a quarter of each utterance", "anonymize (external)",
           run_external(tmp_path, "short"), tmp_path, "spk1-a", "length off")


def test_external_command_writes_silence(tmp_path):
    """Regression (issue 27): all-zero output scored as perfect privacy (EER 50 %, DeID 100 %)."""
    record("external-silent", "external anonymiser writing all-zero audio", "anonymize (every system's output)",
           run_external(tmp_path, "zeros"), tmp_path, "silent or constant", "2 utterance(s)", "spk1-a", "spk2-a")


def test_external_program_missing(tmp_path):
    record("external-missing", "external anonymiser program that does not exist", "anonymize (external)",
           run_external(tmp_path, "ok", command=["no-such-anonymiser", "{input_dir}"]), tmp_path,
           "'no-such-anonymiser' not found")


def test_external_command_as_shell_string(tmp_path):
    message = raised(External, command="python my_system.py {input_dir} | tee log", device="cpu")
    record("external-shell", "external command given as a shell string", "anonymizer config",
           message, tmp_path, "anonymizer.command", "argv list")


def test_external_command_that_cannot_start_fails_before_any_training(tmp_path):
    """Regression (issue 27): an external anonymiser that cannot start (`python` without
    soundfile) was found only after the original-data attacker had trained (115 s)."""
    from pipeline.app.experiment import Experiment
    from pipeline.core.config import compose

    command = f"[{sys.executable},-c,'import no_such_package_for_vpeval']"
    cfg = compose([f"paths.data={tmp_path / 'data'}", "data=synthetic_tiny", "attacker=ecapa_tiny", "device=cpu",
                   "anonymizer=external", f"anonymizer.command={command}"])
    message = raised(Experiment, cfg).replace(sys.executable, "python")
    assert not (tmp_path / "data" / "cache" / "train").exists()
    record("external-cannot-start", "external anonymiser whose interpreter lacks a package", "experiment start "
           "(one utterance, before any training)", message, tmp_path, "failed with exit status 1",
           "ModuleNotFoundError")


NOISE_SYSTEM = """
import sys, zlib
import numpy as np
import soundfile as sf
for line in open(sys.argv[1]):
    utt, speaker, path = line.split()
    audio, rate = sf.read(path, dtype="float32")
    noise = np.random.default_rng(zlib.crc32(utt.encode())).normal(0, 10 ** (-70 / 20), len(audio))
    sf.write(f"{sys.argv[2]}/{utt}.wav", noise.astype("float32"), rate)
"""


def test_external_command_writes_white_noise_at_minus_70_dbfs(tmp_path):
    """Regression (issue 38): an external 'anonymiser' writing white noise at -70 dBFS passed
    the silent/constant check and the run reported AA EER 44 %, DeID 82-96 %, exit 0. It is
    refused with exit 2 and one line when it is first tried, before any training; the override
    (`output_check.speech=false`) lets it through (tests/unit/anonymizers/test_speech_screen.py)."""
    script = tmp_path / "noise_system.py"
    script.write_text(NOISE_SYSTEM)
    command = f"[{sys.executable},{script},'{{list_file}}','{{output_dir}}']"
    done = vpeval("data=synthetic_tiny", "attacker=ecapa_tiny", "device=cpu", "~attacks.OO", "similarity=false",
                  "anonymizer=external", f"anonymizer.command={command}", tmp=tmp_path)
    message = cli_message(done).replace(sys.executable, "python")
    assert not (tmp_path / "vpeval_data" / "cache" / "train").exists()  # no attacker trained
    record("external-noise", "external anonymiser writing white noise at -70 dBFS (no speech)",
           "experiment start (an external system's first 5 utterances); anonymize (every system's output)",
           message, tmp_path,
           "output is not speech for", "100 % > output_check.max_non_speech=0.2", "0 % voiced frames",
           "output_check.speech=false")

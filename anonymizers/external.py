"""The user's own anonymisation system, run as a command on a folder of wavs.

Contract of the command (placeholders are replaced in every argv item):

- `{input_dir}`: folder holding `<utt_id>.wav` for every utterance of the batch
  (mono, 16-bit PCM, at `{sample_rate}`);
- `{list_file}`: text file, one line per utterance: `<utt_id> <speaker_id> <input wav path>`;
- `{output_dir}`: empty folder where the command writes `<utt_id>.wav` (or `.flac`) for
  every utterance: mono, at `{sample_rate}`, length within `length_tolerance` (+ 0.05 s)
  of the input's;
- `{sample_rate}`, `{seed}` (`anonymization_seed`, for reproducible stochastic systems),
  `{level}` (`utterance` or `speaker`) and `{list_name}` (the list being anonymised, e.g.
  `dev_enrolls`, `dev_trials_f`, `train`: at speaker level a speaker must get a different
  pseudo-speaker in each list, as in the VoicePrivacy attack model).

The command is an argv list, run without a shell, in the current directory, with a timeout;
exit status 0 means success. Anything it prints goes to a log whose last line is quoted if
it fails. Example (`conf/anonymizer/external.yaml`)::

    command: [python, my_system.py, --in, "{input_dir}", --list, "{list_file}",
              --out, "{output_dir}", --rate, "{sample_rate}", --seed, "{seed}"]
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from anonymizers.base import Anonymizer, Batch, Parameters
from anonymizers.checked_audio import LENGTH_TOLERANCE, check_file_ids, find_output, load_checked
from pipeline.core.checks import SECONDS, Check, setting
from pipeline.core.errors import VpevalError
from pipeline.data.audio import write_audio

PLACEHOLDERS = ("input_dir", "list_file", "output_dir", "sample_rate", "seed", "level", "list_name")
PLACEHOLDER_PATTERN = re.compile(r"\{([A-Za-z_]+)\}")


def is_argv(command) -> bool:
    """A non-empty list of strings or numbers (run without a shell), not a shell string."""
    return (isinstance(command, (list, tuple)) and bool(command)
            and all(isinstance(arg, (str, int, float)) and not isinstance(arg, bool) for arg in command))


@dataclass
class ExternalParameters(Parameters):
    """The external command's parameters (conf/anonymizer/external.yaml).

    command: argv list with placeholders (see the module docstring); never a shell string.
    timeout_seconds: the command is killed (with its process group) after this long.
    length_tolerance: allowed relative change of an utterance's length (0.1 = 10 %).
    workdir: where the temporary folders go (None: the system's temp folder).
    """

    command: list | None = setting(None, Check("a non-empty argv list (run without a shell)", is_argv))
    timeout_seconds: float = setting(3600.0, SECONDS)
    length_tolerance: float = setting(0.1, LENGTH_TOLERANCE)
    workdir: str | None = setting(None)

    def relations(self, key: str) -> list[str]:
        if not is_argv(self.command):  # left to set (`???`)
            return []
        unknown = sorted({name for arg in self.command for name in PLACEHOLDER_PATTERN.findall(str(arg))}
                         - set(PLACEHOLDERS))
        return [f"{key}.command: unknown placeholder(s) {unknown}; known: {list(PLACEHOLDERS)}"] if unknown else []


class External(Anonymizer):
    """Runs `command` once per batch on a temporary folder and checks what it wrote; its
    parameters are `ExternalParameters`, with `seed`, `device` (see `Anonymizer`)."""

    probe_first = True  # a command can fail to start (e.g. `python` without soundfile): find out first
    parameters = ExternalParameters

    def __init__(self, **settings):
        super().__init__(**settings)
        self.command = [str(arg) for arg in self.settings.command]
        self.timeout_seconds = float(self.settings.timeout_seconds)
        self.length_tolerance = float(self.settings.length_tolerance)
        self.workdir = self.settings.workdir

    def argv(self, values: dict[str, str]) -> list[str]:
        """The command with every `{placeholder}` replaced."""
        return [PLACEHOLDER_PATTERN.sub(lambda match: values[match.group(1)], arg) for arg in self.command]

    def anonymize(self, batch: Batch) -> list[torch.Tensor]:
        check_file_ids(batch.utt_ids)
        with tempfile.TemporaryDirectory(prefix="vpeval-external-", dir=self.workdir) as scratch:
            scratch = Path(scratch)
            input_dir, output_dir = scratch / "input", scratch / "output"
            input_dir.mkdir()
            output_dir.mkdir()
            lines = []
            for utt, speaker, wave in zip(batch.utt_ids, batch.speaker_ids, batch.waves):
                path = write_audio(input_dir / f"{utt}.wav", wave.cpu().numpy(), batch.sample_rate)
                lines.append(f"{utt} {speaker} {path}\n")
            list_file = scratch / "list.txt"
            list_file.write_text("".join(lines))
            values = {"input_dir": str(input_dir), "list_file": str(list_file), "output_dir": str(output_dir),
                      "sample_rate": str(batch.sample_rate), "seed": str(self.seed), "level": self.level,
                      "list_name": batch.list_name}
            self.run(self.argv(values), scratch / "command.log")
            paths = {utt: find_output(output_dir, utt) for utt in batch.utt_ids}
            return load_checked(paths, batch, f"external command {self.command[0]!r} output", self.length_tolerance)

    def run(self, argv: list[str], log_path: Path) -> None:
        """Run argv without a shell; a missing program, a non-zero exit or a timeout raises."""
        with open(log_path, "wb") as log:
            try:
                process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           start_new_session=True)
            except FileNotFoundError:
                raise VpevalError(f"anonymizer.command: program {argv[0]!r} not found") from None
            except PermissionError:
                raise VpevalError(f"anonymizer.command: program {argv[0]!r} is not executable") from None
            try:
                status = process.wait(timeout=self.timeout_seconds)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                raise VpevalError(f"anonymizer.command {argv[0]!r} timed out after {self.timeout_seconds:g} s "
                                  f"(anonymizer.timeout_seconds)") from None
        if status != 0:
            raise VpevalError(f"anonymizer.command {argv[0]!r} failed with exit status {status}: {last_line(log_path)}")


def last_line(path: Path) -> str:
    """The last non-empty line of a log, or a note that it printed nothing."""
    lines = [line.strip() for line in path.read_bytes()[-4096:].decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"

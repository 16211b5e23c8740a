"""Kaldi-style data dirs as the VoicePrivacy toolkits use them.

A dir holds `wav.scp` (`utt path`), `utt2spk`, `spk2utt`, `spk2gender`, and either
`enrolls` (enrolment utterance ids) or `trials` (`enroll_spk test_utt target|nontarget`).

A `wav.scp` value is a path or one of the pipe forms the VPC dirs use; `wav_scp_path` reads
the path out of it. Nothing in a `wav.scp` is ever executed.

>>> wav_scp_path("flac -c -d -s /c/19-198-0001.flac |")
'/c/19-198-0001.flac'
>>> wav_scp_path("sox /c/p225_001.wav -t wav -R -b 16 - |")
'/c/p225_001.wav'
"""
from __future__ import annotations

import shlex
from pathlib import Path

from pipeline.core import fileio
from pipeline.core.fileio import write_lines
from pipeline.data.manifest import Trial, Utterance, by_speaker, write_trials

WAV_SCP_FORMS = "PATH, 'flac -c -d -s PATH |' or 'sox PATH -t wav - |'"
SOX_OUTPUT_OPTIONS = {"-t": "wav", "-R": None, "-b": int, "-r": int, "-c": "1", "-e": "signed-integer"}


def table_lines(path: Path) -> list[tuple[int, str, str]]:
    r"""(line number, first field, rest of the line) of a Kaldi table file, blank lines skipped;
    fields are separated by spaces or tabs, as Kaldi's own readers take them.

    >>> import tempfile; listing = Path(tempfile.mkdtemp()) / "utt2spk"
    >>> _ = listing.write_text("u1\ts1\nu2  s2\n\nu3 some text\n")
    >>> table_lines(listing)
    [(1, 'u1', 's1'), (2, 'u2', 's2'), (4, 'u3', 'some text')]
    """
    rows = []
    for number, raw in enumerate(fileio.read_text(path).splitlines(), start=1):
        fields = raw.split(maxsplit=1)
        if fields:
            rows.append((number, fields[0], fields[1].strip() if len(fields) > 1 else ""))
    return rows


def wav_scp_path(value: str) -> str:
    """The audio path in a `wav.scp` value; ValueError (with the reason) for any other form."""
    text = value.strip()
    if text.endswith("|") and not text.endswith(" |"):
        text = f"{text[:-1]} |"
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot split {value!r} ({exc})") from None
    if len(tokens) == 1 and tokens[0] != "|":
        return tokens[0]
    if len(tokens) < 3 or tokens[-1] != "|":
        raise ValueError(f"{value!r} is neither a path nor a command ending in '|'")
    program, args = tokens[0], tokens[1:-1]
    if program == "flac":
        return _flac_path(value, args)
    if program == "sox":
        return _sox_path(value, args)
    raise ValueError(f"{value!r} runs {program!r}; only flac and sox pipes are understood")


def _flac_path(value: str, args: list[str]) -> str:
    flags = [a for a in args if a.startswith("-")]
    paths = [a for a in args if not a.startswith("-")]
    if not set(flags) <= {"-c", "-d", "-s"} or not {"-c", "-d"} <= set(flags) or len(paths) != 1:
        raise ValueError(f"{value!r} is not 'flac -c -d -s PATH |'")
    return paths[0]


def _sox_path(value: str, args: list[str]) -> str:
    if len(args) < 4 or args[-1] != "-" or args[0].startswith("-"):
        raise ValueError(f"{value!r} is not 'sox PATH -t wav [options] - |'")
    options, i = {}, 1
    while i < len(args) - 1:
        name = args[i]
        if name not in SOX_OUTPUT_OPTIONS:
            raise ValueError(f"{value!r}: sox option {name!r} is not understood")
        expected = SOX_OUTPUT_OPTIONS[name]
        if expected is None:
            options[name], i = True, i + 1
            continue
        argument = args[i + 1] if i + 1 < len(args) - 1 else None
        if argument is None or (expected is int and not argument.isdigit()) or \
                (isinstance(expected, str) and argument != expected):
            raise ValueError(f"{value!r}: sox option {name} needs {'a number' if expected is int else expected!r}")
        options[name], i = argument, i + 2
    if options.get("-t") != "wav":
        raise ValueError(f"{value!r} is not 'sox PATH -t wav [options] - |'")
    return args[0]


def write_data_dir(folder: str | Path, utterances: list[Utterance], *, enrolls: bool = False,
                   trials: list[Trial] | None = None) -> Path:
    """Write a Kaldi data dir for `utterances` (sorted by id, as Kaldi requires); `text` when
    they have transcripts."""
    folder = Path(folder)
    utts = sorted(utterances, key=lambda u: u.id)
    speakers = by_speaker(utts)
    write_lines(folder / "wav.scp", (f"{u.id} {u.path}" for u in utts))
    write_lines(folder / "utt2spk", (f"{u.id} {u.speaker}" for u in utts))
    write_lines(folder / "spk2utt", (f"{s} {' '.join(u.id for u in us)}" for s, us in speakers.items()))
    write_lines(folder / "spk2gender", (f"{s} {us[0].gender}" for s, us in speakers.items()))
    if any(u.text for u in utts):
        write_lines(folder / "text", (f"{u.id} {u.text}" for u in utts))
    if enrolls:
        write_lines(folder / "enrolls", (u.id for u in utts))
    if trials is not None:
        write_trials(folder / "trials", trials)
    return folder


def read_text(path: Path) -> dict[str, str]:
    """`<utt> <text>` lines as a dict, {} when the file is absent; a last line without its newline
    (cut by a kill while appending) is left out."""
    if not path.is_file():
        return {}
    raw = fileio.read_text(path)
    lines = raw.split("\n")[:-1]  # the part after the last newline is incomplete or empty
    return {utt: text for utt, _, text in (line.partition(" ") for line in lines if line)}

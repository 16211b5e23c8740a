"""Kaldi-style data dirs as the VoicePrivacy toolkits use them.

A dir holds `wav.scp` (`utt path`), `utt2spk`, `spk2utt`, `spk2gender`, and either
`enrolls` (enrolment utterance ids) or `trials` (`enroll_spk test_utt target|nontarget`).
"""
from __future__ import annotations

from pathlib import Path

from pipeline.data.manifest import Trial, Utterance, by_speaker, write_trials
from pipeline.fileio import write_lines


def write_data_dir(folder: str | Path, utterances: list[Utterance], *, enrolls: bool = False,
                   trials: list[Trial] | None = None) -> Path:
    """Write a Kaldi data dir for `utterances` (sorted by id, as Kaldi requires)."""
    folder = Path(folder)
    utts = sorted(utterances, key=lambda u: u.id)
    speakers = by_speaker(utts)
    write_lines(folder / "wav.scp", (f"{u.id} {u.path}" for u in utts))
    write_lines(folder / "utt2spk", (f"{u.id} {u.speaker}" for u in utts))
    write_lines(folder / "spk2utt", (f"{s} {' '.join(u.id for u in us)}" for s, us in speakers.items()))
    write_lines(folder / "spk2gender", (f"{s} {us[0].gender}" for s, us in speakers.items()))
    if enrolls:
        write_lines(folder / "enrolls", (u.id for u in utts))
    if trials is not None:
        write_trials(folder / "trials", trials)
    return folder

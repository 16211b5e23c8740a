"""Read Multilingual LibriSpeech (MLS, Pratap et al. 2020), one language at a time.

Layout under `data.root`:

    mls_<language>/metainfo.txt     `SPEAKER | GENDER | PARTITION | MINUTES | BOOK ID | TITLE | CHAPTER`
    mls_<language>/<split>/transcripts.txt   `<speaker>_<book>_<n>` TAB text
    mls_<language>/<split>/segments.txt      where each utterance was cut from (not needed, not read)
    mls_<language>/<split>/audio/<speaker>/<book>/<speaker>_<book>_<n>.flac   (.opus in the opus release)

A subset is a split folder (`train`, `dev`, `test`); the audio extension is `audio_ext`
(any format soundfile reads: flac, or opus for the opus release).

>>> MultilingualLibriSpeech("/corpora/mls", language="german").entries("dev")  # doctest: +SKIP
"""
from __future__ import annotations

from pathlib import Path

from pipeline.core.errors import VpevalError, input_error
from pipeline.core.fileio import read_text
from pipeline.data.corpus import Entry, listed_once


def read_metainfo(path: Path) -> dict[str, str]:
    """Speaker -> 'f' | 'm' from `metainfo.txt` (one row per speaker and book; a speaker given
    two genders is an error naming both lines)."""
    if not path.is_file():
        raise input_error(path, "not found; is data.root the folder holding mls_<language>/?")
    rows = []
    for number, raw in enumerate(read_text(path).splitlines(), start=1):
        fields = [f.strip() for f in raw.split("|")]
        if not raw.strip() or fields[0].upper() == "SPEAKER":
            continue
        if len(fields) < 3 or fields[1].upper() not in ("F", "M"):
            raise input_error(path, f"expected 'SPEAKER | GENDER | PARTITION | ...' with GENDER F or M, got {raw!r}",
                              number)
        rows.append((number, fields[0], fields[1].lower()))
    return {speaker: gender for speaker, (gender, _) in listed_once(path, rows, "speaker", "as {}").items()}


class MultilingualLibriSpeech:
    """The MLS tree of one `language` (english, german, french, spanish, ...) under `root`."""

    def __init__(self, root: str | Path, language: str, audio_ext: str = "flac"):
        self.folder = Path(root) / f"mls_{language}"
        if not self.folder.is_dir():
            raise VpevalError(f"{self.folder}: MLS language folder not found (data.root holds mls_<language>/; "
                              f"data.language={language})")
        self.audio_ext = audio_ext.lstrip(".")

    def entries(self, subset: str) -> list[Entry]:
        """Every line of the split's `transcripts.txt`, in file order, without opening the audio."""
        transcripts = self.folder / subset / "transcripts.txt"
        if not transcripts.is_file():
            raise input_error(transcripts, f"not found; every MLS split needs its transcripts "
                                           f"(mls_<language>/{subset}/transcripts.txt)")
        metainfo = self.folder / "metainfo.txt"
        genders = read_metainfo(metainfo)
        audio = (self.folder / subset / "audio").resolve()
        entries = []
        for number, raw in enumerate(read_text(transcripts).splitlines(), start=1):
            if not raw.strip():
                continue
            utt, _, text = raw.partition("\t")
            if len(utt.split()) > 1:
                raise input_error(transcripts, f"no TAB between the id and the text (a space instead?): {raw!r}",
                                  number)
            parts = utt.strip().split("_")
            if len(parts) != 3 or not all(parts):
                raise input_error(transcripts, f"expected '<speaker>_<book>_<n> TAB text', got {raw!r}", number)
            speaker, book, _ = parts
            if speaker not in genders:
                raise input_error(metainfo, f"speaker {speaker} of {transcripts}:{number} is not listed")
            entries.append(Entry(id=utt.strip(), speaker=speaker, gender=genders[speaker],
                                 path=str(audio / speaker / book / f"{utt.strip()}.{self.audio_ext}"),
                                 text=text.strip(), where=f"{transcripts}:{number}"))
        if not entries:
            raise input_error(transcripts, "no utterances listed")
        return entries

"""Stage 1 — prepare: a corpus into manifests, VPC-style protocols and Kaldi data dirs.

The reader (`data.reader`) lists the utterances, the protocol source (`data.protocol`)
builds each split's protocols: generated from its utterances, or given by the corpus. In
between, every header is read in parallel and bad input is named: all problems stop the
stage together (listed in `problems.txt`), or with `data.skip_bad` they are dropped and
listed in `skipped.txt`. Audio that is not mono at `data.sample_rate` is converted once
into `audio/` (resumable); conforming audio is referenced in place.

Output folder (`<set>` is a split, or `<split>_<variant>` such as VCTK's `dev_common`):
    manifests/train.jsonl                      the attacker's training utterances
    manifests/<set>_enrolls.jsonl              enrolment utterances (both genders)
    manifests/<set>_trials_<g>.jsonl           trial utterances of gender g (g = mixed: both genders,
                                               with data.eval_trials mixed or both)
    trials/<set>_trials_<g>.txt                `enroll_spk test_utt target|nontarget`
    kaldi/<tag>_<split>_enrolls/, kaldi/<tag>_<split>_trials_<g>[_<variant>]/   Kaldi data dirs
    audio/<spk>/<utt>.flac                     converted copies, where needed
    outside_audio.json                         {path: source_stamp} of the audio used from outside the corpus
                                               folder: a later run that finds one changed prepares again
    skipped.txt                                with data.skip_bad: what was dropped, and why
The stage summary lists the evaluation sets (`eval_sets`), counts, conversions and skips.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat
from dataclasses import asdict
from pathlib import Path

from pipeline.core.cache import Cache, content_hash
from pipeline.core.config import instantiate
from pipeline.core.errors import VpevalError, input_error
from pipeline.core.fileio import macos_metadata, read_text, write_json, write_lines
from pipeline.core.layout import PROBLEM_LIST, SKIP_LIST, manifest_path, trials_path
from pipeline.core.schemas import Data
from pipeline.data.corpus import MAIN, Entry, Problems, Reader, set_name
from pipeline.data.kaldi import write_data_dir
from pipeline.data.manifest import Utterance, audio_stamp, write_manifest, write_trials
from pipeline.data.protocol import MIXED, Protocol, ProtocolSource, trial_lists
from pipeline.data.screening import conform, screen

log = logging.getLogger(__name__)
SPLITS = ("dev", "test")
GENERATED_KEY_LENGTH = 12  # a generated corpus's folder: the hash of its settings
OUTSIDE_AUDIO = "outside_audio.json"  # {path: source_stamp} of the used audio outside the corpus folder
PARAMS = ("reader", "subsets", "protocol", "tag", "sample_rate", "convert_audio", "skip_bad", "eval_trials",
          "mixed_seed")


def corpus_root(data: Data) -> Path:
    """The corpus folder; the built-in corpus is generated on first use under a folder
    named after a hash of its settings, so changed settings never reuse an old corpus."""
    if data.generate is None:
        if not Path(data.root).is_dir():
            raise VpevalError(f"{data.root}: corpus folder not found (set data.root=...)")
        return Path(data.root)
    from pipeline.data.synthetic import generate_corpus

    _check_generated_root(Path(data.root))
    settings = asdict(data.generate)
    root = Path(data.root) / content_hash(settings, length=GENERATED_KEY_LENGTH)
    return generate_corpus(root, sample_rate=data.sample_rate, **settings)


def _check_generated_root(folder: Path) -> None:
    """Refuse to generate the built-in corpus into a folder that holds anything else: a
    data.root meant for a real corpus given without its data= (`vpeval data.root=/corpora/LibriSpeech`
    ran on the built-in corpus, written into the LibriSpeech folder, and reported it, exit 0)."""
    generated = re.compile(rf"[0-9a-f]{{{GENERATED_KEY_LENGTH}}}|\..*\.partial-.*")  # corpora, their staging folders
    foreign = sorted(p.name for p in folder.iterdir() if not generated.fullmatch(p.name)) if folder.is_dir() else []
    if foreign:
        raise VpevalError(f"data.root={folder}: the built-in corpus (data=synthetic) is generated there, but the folder "
                          f"holds other files ({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); to read "
                          f"a corpus there name its reader (data=librispeech, data=vctk, data=vpc, ...), or leave data.root "
                          f"at its default")


def fingerprint(root: Path) -> str:
    """A cheap identity of a corpus tree: every file's relative path, size and mtime. macOS
    metadata files (`._*`, `.DS_Store`; no reader uses them) are left out and counted in one
    log line; what no reader could use safely stops here, by name: a symlink loop or a dangling
    link (which the walk cannot stat), a FIFO, socket or device (reading a FIFO waits forever)."""
    entries, metadata = [], []
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            if macos_metadata(name):
                metadata.append(path)
                continue
            try:
                info = os.stat(path)
            except OSError as error:
                loop = " (a symlink loop)" if error.errno == errno.ELOOP else ""
                raise input_error(path, f"cannot read ({error.strerror}){loop}; remove it from the corpus") from None
            if not stat.S_ISREG(info.st_mode):
                raise input_error(path, f"not a regular file ({file_kind(info.st_mode)}); remove it from the corpus")
            entries.append((os.path.relpath(path, root), info.st_size, info.st_mtime_ns))
    if metadata:
        log.info("prepare: skipped %d macOS metadata file(s) (._*, .DS_Store) under %s, e.g. %s", len(metadata), root,
                 sorted(metadata)[0])
    return content_hash(sorted(entries))


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words.

    >>> file_kind(stat.S_IFIFO)
    'a FIFO'
    """
    kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a character device",
             stat.S_ISBLK: "a block device"}
    return next((kind for test, kind in kinds.items() if test(mode)), "not a regular file")


def run(data: Data, cache: Cache) -> Path:
    """Prepare `data`, the corpus settings (`typed(cfg.data, Data, "data")` of a
    `conf/data/*.yaml` node); returns the stage folder."""
    root = corpus_root(data)
    params = {k: getattr(data, k) for k in PARAMS}
    inputs = {"corpus": str(root), "fingerprint": fingerprint(root)}
    return cache.build("prepare", params, inputs, lambda out: _build(out, data, root), code=__name__,
                       stale=changed_outside_audio)


def changed_outside_audio(out: Path) -> str | None:
    """Which audio file outside the corpus folder (a Kaldi `wav.scp` may name any path; the key's
    fingerprint covers the folder only) changed or went away since `out` was prepared."""
    for path, stamp in json.loads(read_text(out / OUTSIDE_AUDIO)).items():
        try:
            if audio_stamp(path) != stamp:
                return f"{path} changed since it was prepared"
        except OSError:
            return f"{path} is gone since it was prepared"
    return None


def _build(out: Path, data: Data, root: Path) -> dict:
    for key in ("reader", "protocol"):
        if "_target_" not in getattr(data, key):
            raise VpevalError(f"data.{key} has no _target_ (see conf/data/librispeech.yaml for the form)")
    trial_lists(data.eval_trials)
    reader = instantiate(data.reader, root=root)
    protocol = instantiate(data.protocol)
    skip_bad = data.skip_bad
    problems = Problems()
    train_subsets = [data.subsets["train"]] if isinstance(data.subsets["train"], str) else data.subsets["train"]
    listed = {"train": [e for subset in train_subsets
                        for e in _entries(lambda: reader.entries(subset), problems) or []]}
    read = {split: _entries(lambda: protocol.entries(reader, data.subsets[split]), problems) for split in SPLITS}
    unreadable = {split for split, entries in read.items() if entries is None}  # already a problem: no protocol
    listed.update({split: entries or [] for split, entries in read.items()})
    _check_unseen(listed, root, problems)
    screened, multichannel = _screen_lists(listed, problems, data)
    train = screened["train"]
    try:
        sets = _protocols(protocol, reader, screened, data, root, problems, unreadable)
    except VpevalError as error:  # the lists' own problems may be its cause: all of them are named
        problems.whole(str(error))
    problems.stop_unless(skip_bad, out / PROBLEM_LIST)
    used = {u.id: u for u in train + [u for p in sets.values() for u in p.utterances()]}
    ready = conform(list(used.values()), out / "audio", problems, sample_rate=data.sample_rate,
                    multichannel=multichannel, check_decodes=skip_bad, workers=data.workers)
    problems.stop_unless(skip_bad, out / PROBLEM_LIST)
    train = [ready[u.id] for u in train if u.id in ready]
    sets = {key: p.restricted(ready) for key, p in sets.items()}
    corpus = root.resolve()
    write_json(out / OUTSIDE_AUDIO, {u.path: u.source_stamp for i, u in sorted(used.items())
                                     if i in ready and not Path(u.path).resolve().is_relative_to(corpus)})
    write_manifest(manifest_path(out, "train"), train)
    for (split, variant), p in sets.items():
        _write_set(out, data.tag, split, variant, p)
    if skip_bad:
        write_lines(out / SKIP_LIST, problems.lines())
    converted = sum(ready[i].path != used[i].path for i in ready)
    return _summary(train, {set_name(*key): p for key, p in sets.items()}, problems, converted)


def _screen_lists(listed: dict[str, list[Entry]], problems: Problems,
                  data: Data) -> tuple[dict[str, list[Utterance]], set[str]]:
    """Screen every list in one parallel pass: good utterances per list, multi-channel ids."""
    flat = [entry for entries in listed.values() for entry in entries]
    result = screen(flat, problems, sample_rate=data.sample_rate, convert=data.convert_audio)
    screened, start = {}, 0
    for name, entries in listed.items():
        screened[name] = [u for u in result.utterances[start:start + len(entries)] if u is not None]
        start += len(entries)
    return screened, result.multichannel


def _entries(read, problems: Problems) -> list[Entry] | None:
    """A list's entries; a list that cannot be read at all is a corpus problem and None (the
    others are still read, so every problem is named in one run)."""
    try:
        return read()
    except VpevalError as error:
        problems.whole(str(error))
        return None


def _check_unseen(listed: dict[str, list[Entry]], root: Path, problems: Problems) -> None:
    train_speakers = {e.speaker for e in listed["train"] if not e.problem}
    for split in SPLITS:
        overlap = train_speakers & {e.speaker for e in listed[split] if not e.problem}
        if overlap:
            problems.whole(f"{root}: {split} speakers {sorted(overlap)[:5]} are also in the attacker's training "
                           "data; evaluation speakers must be unseen")


def _protocols(protocol: ProtocolSource, reader: Reader, screened: dict[str, list[Utterance]], data: Data,
               root: Path, problems: Problems, unreadable: set[str]) -> dict[tuple[str, str], Protocol]:
    """Every split's protocols by (split, variant); none of a split whose list could not be read
    (its empty list would add a wrong consequence: "0 'f' speakers")."""
    eval_trials = data.eval_trials
    mixed = MIXED in trial_lists(eval_trials)
    sets = {}
    for split in (s for s in SPLITS if s not in unreadable):
        subset = data.subsets[split]
        genders = sorted({u.gender for u in screened[split]})
        if mixed and len(genders) < 2:
            problems.whole(f"data.eval_trials={eval_trials}: {root}/{subset} has {genders or 'no'} speakers only; "
                           "mixed-gender trials need speakers of both genders")
            continue
        built = protocol.build(screened[split], reader=reader, subset=subset, name=f"{root}/{subset}",
                               problems=problems)
        if mixed:
            built[MAIN] = built[MAIN].with_mixed(protocol.mixed(
                built[MAIN], reader=reader, subset=subset, seed=data.mixed_seed, problems=problems))
        sets.update({(split, variant): p for variant, p in built.items()})
    return sets


def kaldi_dir_name(tag: str, split: str, variant: str, kind: str) -> str:
    """VPC naming: `<tag>_<split>_enrolls` (shared by variants), `<tag>_<split>_trials_<g>[_<variant>]`.

    >>> kaldi_dir_name("vctk", "dev", "common", "trials_f")
    'vctk_dev_trials_f_common'
    """
    suffix = f"_{variant}" if variant and kind != "enrolls" else ""
    return f"{tag}_{split}_{kind}{suffix}"


def _write_set(out: Path, tag: str, split: str, variant: str, protocol: Protocol) -> None:
    name = set_name(split, variant)
    write_manifest(manifest_path(out, f"{name}_enrolls"), protocol.enrolls)
    if variant == MAIN:
        write_data_dir(out / "kaldi" / kaldi_dir_name(tag, split, variant, "enrolls"), protocol.enrolls,
                       enrolls=True)
    for g in protocol.trials:
        list_name = f"{name}_trials_{g}"
        write_manifest(manifest_path(out, list_name), protocol.trial_utts[g])
        write_trials(trials_path(out, list_name), protocol.trials[g])
        write_data_dir(out / "kaldi" / kaldi_dir_name(tag, split, variant, f"trials_{g}"), protocol.trial_utts[g],
                       trials=protocol.trials[g])


def _summary(train: list[Utterance], sets: dict[str, Protocol], problems: Problems, converted: int) -> dict:
    summary: dict = {"train": {"speakers": len({u.speaker for u in train}), "utterances": len(train)}}
    for name, p in sets.items():
        summary[name] = p.counts()
        log.info("prepare: %s protocol %s", name, summary[name])
    summary["eval_sets"] = list(sets)
    summary["converted"] = converted
    summary["skipped"] = {"utterances": len(problems.utterances), "trials": len(problems.trials)}
    return summary

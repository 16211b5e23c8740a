"""Stage 2 — anonymize: run an anonymisation system over one utterance manifest.

Output folder: `audio/<speaker>/<utt>.flac`, `pseudo_speakers.jsonl` (one record per
utterance, see `anonymizers.base`) and `manifest.jsonl` (same ids, new paths, each entry's
`pseudo_speaker` the utterance's record). `list_name` names the list (e.g. `dev_enrolls`):
at speaker level a speaker gets a different pseudo-speaker in each list. `speakers` are the
source speakers of the whole corpus, the same for every list: a system that maps speakers as
a whole (PERM) draws over them, so a speaker keeps its pseudo-speaker in every list.
The folder is keyed by the system's config, the seed, the input manifest's content and the
digests of the files the system's parameters name (weights), without building it, so
another experiment needing the same anonymised set reuses it, and a changed parameter
never reuses stale audio. An interrupted run resumes: finished files are kept (each is
written atomically) and only the missing ones are processed.

The output check (`anonymizers.base`): an utterance whose output is silent or constant stops
the batch; `speech.json` lists the utterances whose output fails the speech screen
(`pipeline.signal.speech`), and every call, cached or not, refuses the system when more than
`output_check.max_non_speech` of them fail (unless `output_check.speech` is false), before any
attacker trains on its output. The check's settings are no part of the folder's key: they
decide whether the audio is used, not what it is.

With a team (`distributed`: several GPUs) a system that can run on the ranks
(`Anonymizer.on_ranks`: in-process systems, not an external command) is run by every rank on
its own device: the same length-sorted batches as one process, dealt round-robin, each rank
appending its records to `pseudo_speakers.<rank>.jsonl`; the leader then gathers them into
`pseudo_speakers.jsonl`. A pseudo-speaker depends only on the seed and its key (the utterance,
or the list and speaker) and each batch is one process's batch, so the audio is the same as one
process's (tested on CPU), and the folder's key does not name the number of ranks.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from anonymizers.base import Anonymizer, check_speech
from pipeline.core.cache import Cache
from pipeline.core.config import instantiate, plugin_with, without
from pipeline.core.fileio import read_text, write_json, write_lines
from pipeline.core.schemas import OutputCheck
from pipeline.data.audio import audio_info, read_audio, write_audio
from pipeline.data.manifest import Utterance, file_digest, read_manifest, write_manifest
from pipeline.runtime.cpus import file_threads
from pipeline.runtime.distributed import World
from pipeline.runtime.ordered import ordered_map
from pipeline.runtime.team import Team

log = logging.getLogger(__name__)
# change nothing in the output: raising an external system's timeout after a time-out resumes the folder
LABEL_KEYS = ("name", "batch_seconds", "timeout_seconds", "workdir")
SPEECH = "speech.json"  # the speech screen of every output: {"utterances": n, "screens": {id: Screen fields}}
RECORDS = "pseudo_speakers.jsonl"  # a record per finished utterance: {"id", "pseudo_speaker", "screen"}


def output_path(out: Path, utt: Utterance) -> Path:
    return out / "audio" / utt.speaker / f"{utt.id}.flac"


def run(system: DictConfig, manifest: Path, cache: Cache, *, list_name: str, seed: int, device: str,
        sample_rate: int = 16000, speakers: Mapping[str, str] | None = None,
        output_check: OutputCheck | None = None, team: Team | None = None) -> Path:
    """Anonymise the utterances of list `list_name` (`manifest`) with `system` (a
    conf/anonymizer node); `speakers`: {speaker: gender} of every list of the corpus (None:
    this list's own, for a list anonymised on its own); `output_check`: the typed section
    (`speech`, `max_non_speech`; None: its defaults, on); `team`: the ranks that share the
    work when the system can run on them (see the module doc). The folder's key is the system's
    config (less its labels) and the fingerprint of the files its parameter dataclass names
    (checked first): the system is built only when the folder is not complete."""
    system_class, settings = system_settings(system)
    parameters = system_class.parameters.of(settings)
    parameters.check()
    params = {"system": without(system, *LABEL_KEYS), "seed": seed, "sample_rate": sample_rate, "list": list_name}
    inputs = {"manifest": file_digest(manifest), **parameters.fingerprint(speakers)}

    def build(out: Path) -> dict:
        utts = read_manifest(manifest)
        if team is not None and system_class.on_ranks:
            log.info("anonymize: %s on the team's %d ranks", system.name, team.spec.world_size)
            team.run(anonymize_on_rank, system=OmegaConf.to_container(system, resolve=True), manifest=str(manifest),
                     out=str(out), list_name=list_name, seed=seed, sample_rate=sample_rate, speakers=speakers)
        else:
            anonymizer = system_class(**settings, seed=seed, device=device, source_speakers=speakers)
            _anonymize(out, system.name, anonymizer, utts, list_name, sample_rate, World.single(anonymizer.device))
        return _finish(out, system.name, utts)

    out = cache.build("anonymize", params, inputs, build, code=__name__)
    check_speech(str(system.name), list_name, json.loads(read_text(out / SPEECH))["screens"], output_check)
    return out


def system_settings(system: DictConfig) -> tuple[type[Anonymizer], dict]:
    """The anonymiser class a conf/anonymizer node names and the settings it is built with (a
    strategy node instantiated into its builder); the class is not instantiated."""
    system_class = plugin_with(system, "anonymizer", "parameters", "an anonymiser class (a subclass of "
                               "anonymizers.base.Anonymizer in a module that imports)")
    return system_class, instantiate(without(system, "name", "_target_"), _convert_="all")


def _batches(utts: list[Utterance], seconds: float) -> list[list[Utterance]]:
    """Length-sorted batches of at most `seconds` of audio (at least one utterance each)."""
    batches, current, total = [], [], 0.0
    for utt in sorted(utts, key=lambda u: (u.duration, u.id)):
        if current and total + utt.duration > seconds:
            batches.append(current)
            current, total = [], 0.0
        current.append(utt)
        total += utt.duration
    return batches + [current] if current else batches


def _written(out: Path, utt: Utterance, pseudo_speaker: dict) -> Utterance:
    """The manifest entry of an anonymised file: new path, its own rate and duration, the
    pseudo-speaker it received."""
    rate, frames, _ = audio_info(output_path(out, utt))
    return replace(utt, path=str(output_path(out, utt)), sample_rate=rate, duration=round(frames / rate, 4),
                   pseudo_speaker=pseudo_speaker)


def anonymize_on_rank(world: World, system: dict, manifest: str, out: str, list_name: str, seed: int,
                      sample_rate: int, speakers: Mapping[str, str] | None) -> None:
    """This rank's share of the list's batches, with the system built on the rank's device
    (rank 0 first: a system that builds a cache of its own, e.g. a speaker pool, builds it once)."""
    system = OmegaConf.create(system)
    system_class, settings = system_settings(system)
    with world.main_first():
        anonymizer = system_class(**settings, seed=seed, device=str(world.device), source_speakers=speakers)
    _anonymize(Path(out), system.name, anonymizer, read_manifest(Path(manifest)), list_name, sample_rate, world)


def _anonymize(out: Path, name: str, anonymizer: Anonymizer, utts: list[Utterance], list_name: str, sample_rate: int,
               world: World) -> None:
    """Anonymise the utterances of `utts` not yet done in `out` (its audio file and record
    written): `world`'s rank takes every size-th of their batches, and appends its records to
    its own file (see the module doc)."""
    done = set(_records(out))
    todo = [u for u in utts if not (output_path(out, u).is_file() and u.id in done)]
    world.barrier()  # every rank has read the same state before any writes
    if not todo:
        return
    anonymizer.prepare(utts)
    batches = _batches(todo, anonymizer.batch_seconds)[world.rank::world.size]
    records_path = out / (RECORDS if world.size == 1 else f"pseudo_speakers.{world.rank}.jsonl")
    _drop_half_written_line(records_path)
    if world.is_main:
        log.info("anonymize: %s on %d/%d utterances of %s", name, len(todo), len(utts), list_name)
    threads = file_threads()
    load = lambda batch: list(ordered_map(lambda u: read_audio(u.path, sample_rate), batch,  # noqa: E731
                                          workers=threads))
    with tqdm(total=sum(map(len, batches)), desc=f"anonymize {name}", unit="utt", disable=not world.is_main) as bar:
        # the next batch is read while this one is anonymised
        for batch, waves in zip(batches, ordered_map(load, batches, workers=1, lookahead=2)):
            outputs, drawn, screened = anonymizer.run_batch(waves, [u.id for u in batch], [u.speaker for u in batch],
                                                            sample_rate, list_name)
            list(ordered_map(lambda pair: write_audio(output_path(out, pair[0]), pair[1].numpy(), sample_rate),
                             zip(batch, outputs), workers=threads))
            with open(records_path, "a") as handle:  # after the batch's audio: a record means a finished file
                handle.writelines(json.dumps({"id": u.id, "pseudo_speaker": r, "screen": s}) + "\n"
                                  for u, r, s in zip(batch, drawn, screened))
            bar.update(len(batch))


def _finish(out: Path, name: str, utts: list[Utterance]) -> dict:
    """Gather the records (of every rank) into `pseudo_speakers.jsonl` and write the manifest
    and the speech screens of the finished folder."""
    records = _records(out)
    write_lines(out / RECORDS, [json.dumps({"id": u.id, **records[u.id]}) for u in utts])
    for part in out.glob("pseudo_speakers.*.jsonl"):
        part.unlink()
    anonymized = [_written(out, u, records[u.id]["pseudo_speaker"]) for u in utts]
    write_manifest(out / "manifest.jsonl", anonymized)
    write_json(out / SPEECH, {"utterances": len(utts), "screens": {u.id: records[u.id]["screen"] for u in utts}})
    return {"utterances": len(utts), "system": name}


def _records(out: Path) -> dict[str, dict]:
    """{id: {"pseudo_speaker", "screen"}} of every finished utterance, from `pseudo_speakers.jsonl`
    and the ranks' files; a line an interrupted run left half-written is not read."""
    records = {}
    for path in sorted(out.glob("pseudo_speakers*.jsonl")):
        text = path.read_text()
        for line in text[:text.rfind("\n") + 1].splitlines():
            record = json.loads(line)
            records[record.pop("id")] = record
    return records


def _drop_half_written_line(path: Path) -> None:
    """Cut the half-written last line an interrupted run may have left, so appends stay whole."""
    if path.is_file() and (text := path.read_text()) and not text.endswith("\n"):
        write_lines(path, text[:text.rfind("\n") + 1].splitlines())

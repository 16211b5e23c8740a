"""The one interface every anonymisation system implements.

A system receives a batch of waveforms with their utterance ids, speaker ids and sample
rate, and returns one anonymised waveform per input. What every system shares is handled
here, once: the anonymisation level, per-utterance random keys derived from the seed,
device placement and batching size.

Pseudo-speakers follow the VoicePrivacy attack model (tomashenko2020 §2): at speaker level a
speaker gets one pseudo-speaker per list (enrolment, trials, the attacker's training data),
a different one in each list; its key is `<list>/<speaker>`. At utterance level the key is
the utterance id. A system notes what it drew for an utterance (e.g. McAdams' alpha) in
`batch.drawn[i]`; the anonymize stage writes the key and those values into the manifest. A system is a subclass plus a YAML file in
`conf/anonymizer/` whose `_target_` names it; nothing else registers it.

A system's parameters (the keys of its YAML file less `name` and `_target_`) are a dataclass,
its class's `parameters`: each field holds its default and its range (`setting(default,
Check)`), and the dataclass checks itself (`problems`, `file_problems`) and gives the
fingerprint of the files it names. The settings check before a run and the anonymize stage's
cache key read the dataclass alone, so neither builds the system (no weights loaded); the
constructor receives the same keys, checks them through the dataclass and keeps it as
`self.settings`.

Example (a system that only scales the signal)::

    @dataclass
    class QuieterParameters(Parameters):
        gain: float = setting(0.5, Check("a number in (0, 1)", open_range(0, 1)))

    class Quieter(Anonymizer):
        parameters = QuieterParameters

        def anonymize(self, batch: Batch) -> list[torch.Tensor]:
            return [w * self.settings.gain for w in batch.waves]
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import ClassVar

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf

from pipeline.core.checks import SECONDS, Checked, choice, field_problems, setting
from pipeline.core.devices import resolve_device
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import OutputCheck
from pipeline.data.manifest import Utterance
from pipeline.runtime.cpus import file_threads
from pipeline.runtime.ordered import ordered_map
from pipeline.runtime.seeds import stable_seed
from pipeline.signal.speech import Screen, screen

LEVELS = ("utterance", "speaker")
# Refuse a system when more than this share of a list's outputs fail the speech screen (the
# default of conf/config.yaml's output_check.max_non_speech; docs/robustness.md, "Output checks").
MAX_NON_SPEECH = 0.2


def check_not_constant(system: str, utt_ids: list[str], inputs: list[torch.Tensor],
                       outputs: list[torch.Tensor]) -> None:
    """A system whose output is silent or constant where its input is not has failed (an
    external command writing zeros): scored, it reads as perfect privacy (EER 50 %, DeID
    100 %). One line naming the utterances.

    >>> check_not_constant("x", ["u1"], [torch.ones(3)], [torch.ones(3)])  # constant in, constant out
    """
    bad = [u for u, x, y in zip(utt_ids, inputs, outputs)
           if y.numel() and bool(y.max() == y.min()) and not (x.numel() and bool(x.max() == x.min()))]
    if bad:
        raise VpevalError(f"{system}: output is silent or constant (every sample equal) for {len(bad)} utterance(s) "
                          f"whose input is not: {shown_ids(bad)}; the system failed, its output would read as perfect privacy")


def check_speech(system: str, list_name: str, screens: Mapping[str, dict], settings: OutputCheck | None = None) -> None:
    """The other half of the output check: a system whose output is not speech where its input
    is, for more than `max_non_speech` of those utterances of a list (`settings`: the typed
    `output_check` section; None: on, with MAX_NON_SPEECH),
    has failed as surely as one writing zeros, and reads as excellent privacy (white noise at
    -70 dBFS: AA EER 44 %). `screens`: utterance id -> the speech screen of its output (`Screen`
    fields, `pipeline.signal.speech`) and `input_speech`, that of its input, as `run_batch`
    returns them; input that is not speech (a test tone, a damaged recording) is not the
    system's fault and not counted. One line naming the share, a few ids and the key that lets a
    system that truly outputs non-speech through (`output_check.speech=false`).

    >>> check_speech("x", "train", {"u1": {"speech": True, "input_speech": True},
    ...                             "u2": {"speech": False, "input_speech": False}}, OutputCheck(True, 0))
    """
    settings = settings or OutputCheck(speech=True, max_non_speech=MAX_NON_SPEECH)
    max_share, enabled = settings.max_non_speech, settings.speech
    spoken = [u for u, found in screens.items() if found["input_speech"]]
    failing = sorted(u for u in spoken if not screens[u]["speech"])
    share = len(failing) / max(len(spoken), 1)
    if not enabled or share <= max_share:
        return
    first = Screen(**{k: v for k, v in screens[failing[0]].items() if k != "input_speech"})
    raise VpevalError(f"{system}: output is not speech for {len(failing)} of the {len(spoken)} utterance(s) of "
                      f"{list_name or 'its list'} whose input is ({100 * share:.0f} % > output_check.max_non_speech="
                      f"{max_share:g}): {shown_ids(failing)} ({failing[0]}: {first.reason()}); "
                      f"the system failed, its output would read as excellent privacy "
                      f"(output_check.speech=false lets a system that truly outputs non-speech through)")


def shown_ids(ids: list[str], count: int = 5) -> str:
    """The first `count` ids and how many more."""
    return ", ".join(ids[:count]) + (f" and {len(ids) - count} more" if len(ids) > count else "")


@dataclass
class Batch:
    """Inputs of one `anonymize` call. `keys[i]` is the pseudo-speaker key of utterance i
    (its utterance id at utterance level, `<list>/<speaker>` at speaker level, so that a
    speaker's utterances share one key within a list) and `seeds[i]` the random seed derived
    from it and the experiment seed. `drawn[i]` is where the system records the parameters it
    drew for utterance i (JSON values)."""

    waves: list[torch.Tensor]
    utt_ids: list[str]
    speaker_ids: list[str]
    seeds: list[int]
    sample_rate: int
    list_name: str = ""
    keys: list[str] = field(default_factory=list)
    drawn: list[dict] = field(default_factory=list)


@dataclass
class Parameters:
    """The parameters every system has; a system's own dataclass subclasses this one.

    `model_folders`: its fields naming trained model folders (looked for by `file_problems`).
    Override `relations` for checks of several fields, `file_problems` for what must exist on
    disk and `fingerprint` for the digests of the files it names.
    """

    level: str = setting("utterance", choice(LEVELS))
    batch_seconds: float = setting(300.0, SECONDS)

    model_folders: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def of(cls, settings: Mapping, key: str = "anonymizer") -> Parameters:
        """The parameters of the settings `settings` (a config node or a dict of its keys; `name`
        and `_target_` are ignored); a key that is no field is a one-line error."""
        if isinstance(settings, DictConfig):
            settings = OmegaConf.to_container(settings, resolve=True)  # a key left to set stays "???"
        values = {k: OmegaConf.to_container(v, resolve=True) if isinstance(v, (DictConfig, ListConfig)) else v
                  for k, v in settings.items() if k not in ("name", "_target_")}  # (hydra passes lists as nodes)
        known = [entry.name for entry in fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise VpevalError(f"{key}.{unknown[0]}: not a parameter of this system (its parameters: "
                              f"{', '.join(known)})")
        return cls(**values)

    def problems(self, key: str = "anonymizer") -> list[str]:
        """Each field outside its range, one line each; with none, what `relations` finds."""
        return field_problems(self, key) or self.relations(key)

    def relations(self, key: str) -> list[str]:
        """Problems of several fields together. Default: none."""
        return []

    def file_problems(self, key: str = "anonymizer") -> list[str]:
        """What the parameters name on disk that is missing. Default: each of `model_folders`
        must be a folder."""
        return [f"{key}.{name}={getattr(self, name)}: must be a trained model folder (recipes/train_vc/README.md)"
                for name in self.model_folders
                if getattr(self, name) is None or not Path(str(getattr(self, name))).is_dir()]

    def check(self, key: str = "anonymizer") -> None:
        """Raise one VpevalError listing the problems (a value left to set, `???`; ranges and
        relations; then files). The settings check reports `???` on its own, before any stage."""
        unset = [f"{key}.{f.name}: a value is required (it is ??? in the config)" for f in fields(self)
                 if getattr(self, f.name) == "???"]
        found = unset or self.problems(key) or self.file_problems(key)
        if found:
            raise VpevalError("; ".join(found))

    def fingerprint(self, source_speakers: Mapping[str, str] | None) -> dict[str, str]:
        """Digests of the files the system would load (weights, target pools), read without
        building it; the anonymize stage keys its cached audio on them, so retrained weights at
        the same path are never mistaken for the old ones. `source_speakers`: as the
        anonymiser's. Default: none."""
        return {}


class Anonymizer(Checked, ABC):
    """Base class. Subclasses implement `anonymize(batch) -> list[Tensor]` and name their
    parameter dataclass in `parameters`.

    Args:
        seed: experiment seed; results depend only on it and the ids, not on batching.
        device: "auto", "cpu" or "cuda[:n]".
        source_speakers: {speaker: gender} of every source speaker of the corpus, the same
            for each list (the anonymize stage passes them). A system that maps the speakers
            as a whole (PERM) draws over them, so that a speaker's pseudo-speaker does not
            depend on the list. None: the speakers of the manifest given to `prepare`.
        **settings: the fields of `parameters`, checked by it and kept as `self.settings`;
            every system has `level` ("utterance": a new pseudo-speaker per utterance,
            "speaker": one per speaker and list) and `batch_seconds` (audio seconds per batch
            handed to `anonymize`).

    `probe_first`: a system that can fail for reasons outside vpeval (an external command
    whose interpreter lacks a package) is run once on one utterance when an experiment
    starts, so it fails before any training, not after it.

    `on_ranks`: the system may run as one copy per rank of a team (`distributed`), each on its
    own device and its share of the batches (the anonymize stage). Only for systems whose
    copies share nothing but read-only files and caches they build atomically; off by default.
    """

    sample_rate: int = 16000
    probe_first: bool = False
    on_ranks: bool = False
    parameters: ClassVar[type[Parameters]] = Parameters

    def __init__(self, *, seed: int = 0, device: str = "auto", source_speakers: Mapping[str, str] | None = None,
                 **settings):
        self.settings = self.parameters.of(settings)
        self.settings.check()
        self.level = self.settings.level
        self.seed = int(seed)
        self.device = resolve_device(device)
        self.batch_seconds = float(self.settings.batch_seconds)
        self.source_speakers = None if source_speakers is None else {str(s): str(g) for s, g in source_speakers.items()}

    @classmethod
    def check_settings(cls, settings: DictConfig, key: str) -> list[str]:
        """The problems of the config node `settings` at `key`, found by `parameters` (the system
        is not built)."""
        try:
            return cls.parameters.of(settings, key).problems(key)
        except VpevalError as error:
            return [str(error)]

    def prepare(self, utterances: Sequence[Utterance]) -> None:
        """Called once by the anonymize stage with every utterance of the manifest (ids,
        speakers, genders, paths) before any batch, e.g. for speaker-level statistics or the
        list of source speakers. Default: nothing."""

    @abstractmethod
    def anonymize(self, batch: Batch) -> list[torch.Tensor]:
        """Return one anonymised 1-D waveform per `batch.waves[i]`, at `batch.sample_rate`."""

    def pseudo_speaker_key(self, list_name: str, utt_id: str, speaker: str) -> str:
        """The key an utterance's pseudo-speaker is drawn from: `u1` at utterance level,
        `dev_enrolls/s1` at speaker level for speaker s1 in list dev_enrolls."""
        return utt_id if self.level == "utterance" else f"{list_name}/{speaker}"

    def __call__(self, waves, utt_ids: list[str], speaker_ids: list[str], sample_rate: int,
                 list_name: str = "") -> list[torch.Tensor]:
        """Anonymise a batch of list `list_name`; returns 1-D float32 CPU tensors, one per input."""
        return self.run_batch(waves, utt_ids, speaker_ids, sample_rate, list_name)[0]

    def run_batch(self, waves, utt_ids: list[str], speaker_ids: list[str], sample_rate: int,
                  list_name: str = "") -> tuple[list[torch.Tensor], list[dict], list[dict]]:
        """`__call__` that also returns, per utterance, its pseudo-speaker record (the key, the
        seed drawn from it and what the system drew: `{"key": ..., "seed": ..., "alpha": ...}`)
        and the output check's speech screen of its output (`Screen` fields) with that of its
        input (`input_speech`), which the anonymize stage records for `check_speech`."""
        if sample_rate != self.sample_rate:
            raise VpevalError(f"{type(self).__name__} expects {self.sample_rate} Hz audio, got {sample_rate} Hz")
        keys = [self.pseudo_speaker_key(list_name, u, s) for u, s in zip(utt_ids, speaker_ids)]
        waves = [torch.as_tensor(w, dtype=torch.float32) for w in waves]
        for utterance, wave in zip(utt_ids, waves):  # checked where they are (host), before the copy
            if not torch.isfinite(wave).all():
                raise VpevalError(f"{type(self).__name__}: utterance {utterance} has non-finite samples (NaN or inf)")
        batch = Batch(
            waves=[wave.to(self.device) for wave in waves],
            utt_ids=list(utt_ids),
            speaker_ids=list(speaker_ids),
            seeds=[stable_seed(self.seed, key) for key in keys],
            sample_rate=sample_rate,
            list_name=list_name,
            keys=keys,
            drawn=[{} for _ in keys],
        )
        outputs = self.anonymize(batch)
        if len(outputs) != len(batch.waves):
            raise VpevalError(f"{type(self).__name__} returned {len(outputs)} waveforms for {len(batch.waves)} inputs")
        records = [{"key": key, "seed": seed, **drawn} for key, seed, drawn in zip(keys, batch.seeds, batch.drawn)]
        outputs = [out.detach().float().cpu() for out in outputs]
        check_not_constant(type(self).__name__, utt_ids, waves, outputs)
        screens = list(ordered_map(lambda pair: {**vars(screen(pair[1].numpy(), sample_rate)),
                                                 "input_speech": screen(pair[0].numpy(), sample_rate).speech},
                                   zip(waves, outputs), workers=file_threads()))
        return outputs, records, screens

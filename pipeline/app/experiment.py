"""An experiment: the stages composed for every attack condition of the config.

For each attack (conf/attacks), the enrolment and trial data are original or anonymised
by the evaluated system, and the attacker is trained on original data or on data
anonymised by the attacker's system (`attacker_anonymizer`, the evaluated one by default).
Stage outputs are cached by content, so conditions share whatever they have in common: the
attacker trained on original data serves OO, OA and AA-lazy alike.

>>> report = run_experiment(compose(["data=synthetic_tiny"]), Path("runs/x"))  # doctest: +SKIP
"""
from __future__ import annotations

import logging
from collections import Counter
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from anonymizers.base import check_speech
from pipeline.app import utility
from pipeline.asv.train import attacker_settings
from pipeline.core import faults
from pipeline.core.cache import Cache, content_hash, plain
from pipeline.core.config import instantiate, without
from pipeline.core.devices import compile_mode, resolve_device
from pipeline.core.errors import VpevalError
from pipeline.core.layout import manifest_path, trials_path
from pipeline.core.schemas import (Attacker, Data, Detect, Distributed, OutputCheck, Reidentification, Split, Utility,
                                   typed)
from pipeline.core.vocabulary import ANONYMIZED, ORIGINAL
from pipeline.data.audio import read_audio
from pipeline.data.manifest import GENDERS, read_manifest
from pipeline.data.protocol import trial_lists
from pipeline.metrics.detection import Settings
from pipeline.metrics.legal import grid_error, grid_problems
from pipeline.metrics.registry import metric_list
from pipeline.metrics.reidentification import grid_of
from pipeline.metrics.results import ConditionResult, DetectSettings, RunConfig, RunSummary
from pipeline.report.vpc2026_results import RunResults, write_vpc2026_results
from pipeline.report.vpc_results import write_vpc_results
from pipeline.runtime.curves import chosen_backend, written
from pipeline.runtime.team import Team, serve_node, team_spec
from pipeline.stages import (
    anonymize,
    confidence,
    detect,
    evaluate,
    extract,
    prepare,
    report,
    score,
    similarity,
    split,
    train,
    validate,
)

log = logging.getLogger(__name__)
PROBE_UTTERANCES = 5  # a system that asks to be tried first runs on these many, as one batch


@dataclass
class EvalSet:
    """One verification condition's inputs: who enrols, which utterances are tried, the trials."""

    name: str
    enrolls: str
    trial_utts: str
    trials: Path


class Experiment:
    """Resolves the data, attackers and scores an experiment needs, through the cache."""

    def __init__(self, cfg: DictConfig, team: Team | None = None, curves: dict | None = None):
        self.cfg = cfg
        self.team = team  # the ranks that anonymise, train and extract, when distributed
        self.curves = curves  # where the attackers trained here log their curves (`curve_settings`)
        # the settings the stages take, typed once (pipeline.core.schemas)
        self.split, self.detect = typed(cfg.split, Split, "split"), typed(cfg.detect, Detect, "detect")
        self.data_settings = typed(cfg.data, Data, "data")
        self.utility = typed(cfg.utility, Utility, "utility")
        self.output_check = typed(cfg.output_check, OutputCheck, "output_check")
        self.reidentification = typed(cfg.reidentification, Reidentification, "reidentification")
        self.attacker_settings = attacker_settings(cfg.attacker)
        self.cache = Cache(Path(cfg.paths.cache))
        device = resolve_device(cfg.device)
        self.device = str(device)
        compile_mode(OmegaConf.select(cfg, "attacker.training.compile"), device,
                     config_key="attacker.training.compile")  # a bad value or no compiler: now, not after hours
        self.evaluated = cfg.anonymizer
        self.attacker_system = attacker_system(cfg)
        self.labels = system_labels(cfg)
        self.prepared = prepare.run(self.data_settings, self.cache)
        validate.run(self.prepared, self.cache, tuple(cfg.eval_splits))
        check_reidentification(self.reidentification, tuple(cfg.eval_splits), int(cfg.seed), self.prepared)
        self.probe_systems()
        self._attackers: dict[str, tuple[Path, Path]] = {}
        self._anonymized: dict[tuple[str, str], Path] = {}  # (list name, system hash) -> manifest
        self.score_files: dict[str, str] = {}  # "<attack>/<set>" -> score file
        self._replicates: dict[str, list[float]] = {}  # score file -> bootstrap EER replicates

    def check_split(self) -> None:
        """The split's own checks (e.g. too few speakers to hold out unseen), before the
        training list is anonymised: the held-out ids are the same for every system."""
        split.hold_out(read_manifest(manifest_path(self.prepared, "train")), int(self.cfg.seed),
                       self.split.val_fraction, self.split.holdout, split.named_speakers(self.split.unseen_speakers),
                       self.split.select_fraction)

    def probe_systems(self) -> None:
        """Run each anonymisation system that asks for it (`probe_first`: an external
        command) on PROBE_UTTERANCES utterances, before any long work: a command that cannot
        start, or whose output is not speech (the output check's rule on those utterances), fails
        now, not after the attacker on original data has trained."""
        systems = {content_hash(plain(s)): s for s in (self.evaluated, self.attacker_system)}
        rate, listed = self.data_settings.sample_rate, f"{self.cfg.eval_splits[0]}_enrolls"
        probes = read_manifest(manifest_path(self.prepared, listed))[:PROBE_UTTERANCES]
        for system in systems.values():
            if not getattr(get_class(str(system._target_)), "probe_first", False):
                continue  # building it may take minutes (a voice converter's pool): only when asked
            anonymizer = instantiate(without(system, "name"), seed=int(self.cfg.anonymization_seed), device=self.device)
            log.info("anonymize: trying %s on %d utterance(s) of %s before any long work", system.name, len(probes),
                     listed)
            _, _, screens = anonymizer.run_batch([read_audio(u.path, rate) for u in probes], [u.id for u in probes],
                                                 [u.speaker for u in probes], rate, "probe")
            check_speech(str(system.name), f"the probe ({listed})", dict(zip([u.id for u in probes], screens)),
                         self.output_check)

    def data(self, kind: str, name: str, system: DictConfig) -> Path:
        """Manifest of list `name`, original or anonymised by `system`."""
        source = manifest_path(self.prepared, name)
        if kind == ORIGINAL:
            return source
        key = (name, content_hash(plain(system)))  # each list anonymised (or found in the cache) once
        if key not in self._anonymized:
            self._anonymized[key] = anonymize.run(system, source, self.cache, list_name=name,
                                                  seed=int(self.cfg.anonymization_seed),
                                                  device=self.device,
                                                  sample_rate=self.data_settings.sample_rate,
                                                  speakers=self.source_speakers,
                                                  output_check=self.output_check, team=self.team) / "manifest.jsonl"
        return self._anonymized[key]

    @cached_property
    def source_speakers(self) -> dict[str, str]:
        """{speaker: gender} of every list of the prepared corpus (the attacker's training
        data, every split's enrolment and trials), given alike to the anonymisation of each
        list: a speaker-keyed system (PERM) maps them as a whole, so that a speaker keeps its
        pseudo-speaker in every list and no two speakers share one."""
        lists = sorted(manifest_path(self.prepared, "train").parent.glob("*.jsonl"))
        return {utt.speaker: utt.gender for path in lists for utt in read_manifest(path)}

    def attacker(self, kind: str) -> tuple[Path, Path]:
        """(model folder, split folder) of the attacker trained on `kind` data; on original data
        that is `attacker.pretrained` when set (imported, not trained), validated on the data it
        was trained on (`trained_on`)."""
        if kind not in self._attackers:
            training = self.data(trained_on(self.attacker_settings, kind), "train", self.attacker_system)
            held_out = split.run(self.split, training, self.cache, seed=self.cfg.seed, warned=True)  # check_split
            pretrained = self.attacker_settings.pretrained if kind == ORIGINAL else None
            model = train.imported(pretrained, self.cache) if pretrained else train.run(
                self.attacker_settings, held_out, self.cache, seed=self.cfg.seed, device=self.device, team=self.team,
                curves=self.curves)
            log.info("attacker for %s data: %s", kind, model)  # e.g. the voice converter's speaker_encoder
            self._attackers[kind] = (model, held_out)
        return self._attackers[kind]

    def embed(self, model: Path, manifest: Path) -> Path:
        """Embeddings of a list by an attacker (cached)."""
        return extract.run(model, manifest, self.cache, device=self.device,
                           extraction=self.attacker_settings.extraction, team=self.team)

    def scores(self, model: Path, held_out: Path, enrolls: Path, trial_utts: Path, trials: Path) -> Path:
        """Score file of one condition: embeddings of both sides, then the backend."""
        training = manifest_path(held_out, "train")
        return score.run(self.cfg.backend, self.embed(model, enrolls), self.embed(model, trial_utts), enrolls,
                         trials, self.cache, training_emb=lambda: (self.embed(model, training), training))

    def records(self) -> list[ConditionResult]:
        records = []
        for attack, spec in self.cfg.attacks.items():
            trained_on_anonymized = trained_on(self.attacker_settings, spec.attacker) != ORIGINAL
            model, held_out = self.attacker(spec.attacker)
            anonymized = spec.enroll != ORIGINAL or spec.trials != ORIGINAL
            labels = {
                "attack": attack,
                "anonymizer": self.labels[0] if anonymized else ORIGINAL,
                "attacker_anonymizer": self.labels[1] if trained_on_anonymized else ORIGINAL,
                "enroll": str(spec.enroll),
                "trials": str(spec.trials),
            }
            for split_name in self.cfg.eval_splits:
                enrolls = self.data(spec.enroll, f"{split_name}_enrolls", self.evaluated)
                for g in trial_lists(self.data_settings.eval_trials):
                    name = f"{split_name}_{g}"
                    trial_utts = self.data(spec.trials, f"{split_name}_trials_{g}", self.evaluated)
                    scores = self.scores(model, held_out, enrolls, trial_utts,
                                         trials_path(self.prepared, f"{split_name}_trials_{g}"))
                    self.score_files[f"{attack}/{name}"] = str(scores)
                    records.append(ConditionResult.measured(self.metrics(scores, model, enrolls, trial_utts),
                                                            self.metric_list, **labels, set=name))
            origin, imported = attacker_origin(self.attacker_settings, self.split, spec.attacker)
            val_labels = {**labels, "anonymizer": labels["attacker_anonymizer"], "attacker_origin": origin,
                          "imported": imported, "protocol_problem": protocol_problem(self.split)}
            enrolls = manifest_path(held_out, "val_enrolls")
            for g in GENDERS:  # per gender, as the evaluation sets: EER_val is their mean, as EER_test is
                trial_utts = manifest_path(held_out, f"val_trials_{g}")
                if not trial_utts.is_file():  # no reported trials of this gender (the split warned)
                    continue
                scores = self.scores(model, held_out, enrolls, trial_utts, trials_path(held_out, f"val_trials_{g}"))
                self.score_files[f"{attack}/val_{g}"] = str(scores)
                records.append(ConditionResult.measured(self.metrics(scores, model, enrolls, trial_utts),
                                                        self.metric_list, **val_labels, set=f"val_{g}"))
        return records

    def evaluates_anonymized(self) -> bool:
        """Whether some attack enrols or tries speech anonymised by the evaluated system."""
        return any(spec.enroll != ORIGINAL or spec.trials != ORIGINAL for spec in self.cfg.attacks.values())

    def voice_similarity(self) -> dict[str, dict]:
        """Voice similarity of every evaluation set (`<split>_<gender>`), keyed by set: the
        trial utterances, original and anonymised by the evaluated system, embedded by the
        attacker trained on original data (VPC 2020); empty when `similarity` is off or no
        attack evaluates anonymised speech."""
        if not self.cfg.get("similarity", False) or not self.evaluates_anonymized():
            return {}
        model, _ = self.attacker(ORIGINAL)
        found = {}
        for split_name in self.cfg.eval_splits:
            for g in GENDERS:
                name = f"{split_name}_trials_{g}"
                original = self.data(ORIGINAL, name, self.evaluated)
                anonymized = self.data(ANONYMIZED, name, self.evaluated)
                folder = similarity.run(self.embed(model, original), self.embed(model, anonymized), original,
                                        self.cache)
                found[f"{split_name}_{g}"] = {"folder": str(folder), **similarity.load(folder)}
        return found

    def metrics(self, scores: Path, model: Path, enrolls: Path, trial_utts: Path) -> dict:
        """Every metric of a score file, with the bootstrap interval of its EER (its
        replicates are kept for `replicates`); `trial_utts` names the test speakers; the
        embedding-based metrics get `model`'s embeddings of `enrolls` and `trial_utts`."""
        boot = self.detect.bootstrap
        interval = confidence.run(scores, trial_utts, self.cache, n_resamples=boot.n_resamples,
                                  confidence=boot.confidence, unit=boot.unit, seed=self.cfg.seed)
        self._replicates[str(scores)] = interval.pop("eer_replicates")
        embeddings = evaluate.EmbeddingSources(self.embed(model, enrolls), enrolls, self.embed(model, trial_utts),
                                               trial_utts)
        return {**evaluate.run(scores, self.cache, trial_utts=trial_utts, embeddings=embeddings,
                               metrics=self.metric_list),
                **interval}

    @cached_property
    def metric_list(self) -> tuple:
        """The metrics of every condition: `METRICS` and the re-identification grid's rates."""
        return metric_list(self.reidentification, int(self.cfg.seed))

    def replicates(self) -> dict[str, list[float]]:
        """Bootstrap EER replicates of every condition, keyed `<attack>/<set>`."""
        return {name: self._replicates[path] for name, path in self.score_files.items() if path in self._replicates}


def check_reidentification(settings: Reidentification, eval_splits: tuple[str, ...], seed: int,
                           prepared: Path) -> None:
    """Refuse a `reidentification` grid that an evaluation set's speakers cannot serve, from the
    prepared lists, before any long work (anonymised lists keep the original ids and speakers).
    The candidates are the enrolled speakers the set's trial list tries. Every bad value of every
    set is named in one line, with the largest grid that fits them all."""
    if not settings.enabled:
        return
    grid = grid_of(settings, seed)
    problems, fits = [], []
    for split_name in eval_splits:
        enrolled = {u.speaker for u in read_manifest(manifest_path(prepared, f"{split_name}_enrolls"))}
        for g in GENDERS:
            counts = Counter(u.speaker for u in read_manifest(manifest_path(prepared, f"{split_name}_trials_{g}")))
            found, fit = grid_problems(grid, dict(counts), enrolled & set(counts), data=f"{split_name}_{g}")
            if found and not fit:  # a setting no set can take (M < 1): nothing else to say
                raise VpevalError(found[0])
            problems += found
            fits.append(fit)
    if problems:
        raise VpevalError(grid_error(problems, fits))


def attacker_system(cfg: DictConfig) -> DictConfig:
    """The system the attacker trains on: `attacker_anonymizer`, or the evaluated one."""
    return cfg.attacker_anonymizer if cfg.get("attacker_anonymizer") else cfg.anonymizer


def trained_on(attacker: Attacker, kind: str) -> str:
    """What the attacker of an attack with `attacker: kind` was trained on: `kind`, except
    for an imported attacker trained on anonymised speech (`attacker.pretrained_on`)."""
    if kind == ORIGINAL and attacker.pretrained:
        return attacker.pretrained_on
    return kind


def attacker_origin(attacker: Attacker, split_settings: Split, kind: str) -> tuple[str, str | None]:
    """(trained | imported | fine-tuned, why its EER_val cannot be judged, or None) of the
    attacker of an attack with `attacker: kind`: an imported or fine-tuned attacker's training
    data is unknown, so vpeval's split may hold out speakers it saw, unless
    `split.unseen_speakers` names speakers it never saw."""
    if kind == ORIGINAL and attacker.pretrained:
        key, origin = "attacker.pretrained", "imported"
    elif attacker.init:
        key, origin = "attacker.init", "fine-tuned"
    else:
        return "trained", None
    if split_settings.unseen_speakers is not None:
        return origin, None
    return origin, (f"imported attacker ({key}), its training data unknown: EER_val on vpeval's split may be on "
                    "speakers it saw; name speakers it never saw in split.unseen_speakers to judge it")


def protocol_problem(split_settings: Split) -> str | None:
    """Why the validation protocol cannot judge a privacy estimate, or None: `split.holdout`
    `speaker` and `list` validate on the attacker's own training speakers, so EER_val measures
    how well it memorised them (0 on small corpora whatever the system), not a mismatch
    (docs/detection.md, the validation protocol)."""
    holdout = split_settings.holdout
    if holdout == "unseen":
        return None
    return (f"split.holdout={holdout} cannot judge (its validation speakers are training speakers: EER_val "
            "measures memorisation, not a mismatch; split.holdout=unseen judges)")


def system_labels(cfg: DictConfig) -> tuple[str, str]:
    """Names of the evaluated and the attacker's system in records. Two different configs
    under one name (e.g. `attacker_anonymizer.alpha=...` on the same file) get a short hash
    of their config appended, so a mismatch never reads as a matched pair."""
    evaluated, attacker = cfg.anonymizer, attacker_system(cfg)
    plain_evaluated = OmegaConf.to_container(evaluated, resolve=True)
    plain_attacker = OmegaConf.to_container(attacker, resolve=True)
    if evaluated.name != attacker.name or plain_evaluated == plain_attacker:
        return evaluated.name, attacker.name
    return evaluated.name, f"{attacker.name}#{content_hash(plain_attacker, 6)}"


def config_summary(cfg: DictConfig, split_settings: Split, detect_cfg: Detect) -> RunConfig:
    """The run's settings as results.json records them (`split` and `detect` typed)."""
    evaluated, attacker = system_labels(cfg)
    return RunConfig(name=cfg.name, data=cfg.data.name, data_tag=str(cfg.data.tag), anonymizer=evaluated,
                     attacker_anonymizer=attacker, attacker=cfg.attacker.name, backend=cfg.backend.name,
                     attacks=", ".join(cfg.attacks), seed=cfg.seed, anonymization_seed=cfg.anonymization_seed,
                     detect=DetectSettings(method=detect_cfg.method, false_alarm=detect_cfg.false_alarm,
                                           tolerance=detect_cfg.tolerance, column=bool(detect_cfg.column),
                                           trusted=detect_trusted_label(detect_cfg.trusted)),
                     detection_group=detection_group(cfg),
                     validation_protocol=validation_protocol(cfg, split_settings),
                     similarity=bool(cfg.get("similarity", False)), asr=cfg.asr.name if "asr" in cfg else None,
                     emotion=bool(cfg.get("emotion") and cfg.emotion.get("folder") and cfg.emotion.get("data")))


def detect_trusted_label(trusted) -> str | None:
    """`detect.trusted` as one string (a CSV path, or the system names)."""
    if trusted is None or isinstance(trusted, str):
        return trusted
    return ", ".join(str(s) for s in trusted)


def detection_group(cfg: DictConfig) -> str:
    """The detection group: jobs sharing corpus, attacker configuration, backend and
    validation protocol (split settings and `detect.test_split`, which decide what EER_val
    and EER_test measure) are calibrated together. Their names, and a hash of those configs
    so that an override (e.g. `attacker.training.epochs=5`, `split.val_fraction=0.3`) makes another
    group."""
    parts = {key: OmegaConf.to_container(cfg[key], resolve=True) for key in ("data", "attacker", "backend", "split")}
    parts["test_split"] = str(cfg.detect.test_split)
    return f"{cfg.data.name}/{cfg.attacker.name}/{cfg.backend.name}#{content_hash(parts, 6)}"


def validation_protocol(cfg: DictConfig, split_settings: Split) -> str:
    """The validation protocol in one line: what a trusted CSV must have been measured with
    (the split settings, the corpus, attacker and backend by name, and the test split: a matched
    pair's gap depends on every one of them).

    >>> from pipeline.core.config import compose
    >>> cfg = compose([])
    >>> validation_protocol(cfg, typed(cfg.split, Split, "split"))
    'holdout=unseen val_fraction=0.1 enroll_utterances=5 select_fraction=0.5 sparse_trials=None unseen_speakers=drawn corpus=synthetic attacker=ecapa_small backend=cosine test_split=test eer_val=gender_mean'
    """
    sparse, named = split_settings.sparse_trials, split_settings.unseen_speakers
    return (f"holdout={split_settings.holdout} val_fraction={split_settings.val_fraction} "
            f"enroll_utterances={split_settings.enroll_utterances} select_fraction={split_settings.select_fraction} "
            f"sparse_trials={asdict(sparse) if sparse is not None else None} "
            f"unseen_speakers={'named:' + content_hash(plain(named), 6) if named is not None else 'drawn'} "
            f"corpus={cfg.data.name} attacker={cfg.attacker.name} backend={cfg.backend.name} "
            f"test_split={cfg.detect.test_split} eer_val=gender_mean")


def detect_settings(detect_cfg: Detect) -> Settings:
    """`detect.*` as the detection statistics' settings."""
    return Settings(method=detect_cfg.method, false_alarm=detect_cfg.false_alarm, tolerance=detect_cfg.tolerance,
                    column=detect_cfg.column)


def config_hash(cfg: DictConfig) -> str:
    """Hash of everything that changes results (not paths, devices or Hydra's own settings)."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    return content_hash({k: v for k, v in resolved.items()
                         if k not in ("paths", "device", "distributed", "curves", "hydra")})


def curve_settings(cfg: DictConfig, run_dir: Path) -> dict:
    """The `curves` config, its backend checked now (not when the first attacker trains), and
    the folder the run's trainings log to (`<run folder>/curves`)."""
    settings = plain(cfg.get("curves") or {})
    return {**settings, "backend": chosen_backend(str(settings.get("backend", "auto"))),
            "folder": str(Path(run_dir) / "curves")}


def run_experiment(cfg: DictConfig, run_dir: Path) -> Path | None:
    """Run every stage the config needs and write the report; returns the report folder.

    With `distributed` asking for several ranks, anonymisation (by a system that can run on the
    ranks), training and extraction run on a team of
    torchrun workers; on a multi-node job the nodes other than node 0 only serve that team
    and return None.
    """
    spec = team_spec(typed(cfg.distributed, Distributed, "distributed"), str(cfg.device))
    if spec is not None and spec.node_rank > 0:
        serve_node(spec)
        return None
    with Team(spec) if spec is not None else nullcontext() as team:
        experiment = Experiment(cfg, team, curves=curve_settings(cfg, run_dir))
        experiment.check_split()
        records = experiment.records()
        voice_similarity = experiment.voice_similarity()
        utility_results = utility.measure(experiment)
    trusted = experiment.detect.trusted
    detection, fit = detect.run(records, test_split=experiment.detect.test_split,
                                trusted=trusted if trusted is None or isinstance(trusted, str) else list(trusted),
                                settings=detect_settings(experiment.detect), replicates=experiment.replicates(),
                                protocol=validation_protocol(cfg, experiment.split),
                                seeds=(cfg.seed, cfg.anonymization_seed))
    with faults.stage("report"):
        config = config_summary(cfg, experiment.split, experiment.detect)
        summary = RunSummary(config_hash=config_hash(cfg), config=config, records=records,
                             detection=detection, detection_fit=fit, score_files=experiment.score_files,
                             stages=experiment.cache.events, utility=utility_results)
        folder = report.run(Path(run_dir) / "report", summary, similarity=voice_similarity,
                            curves=written(Path(run_dir) / "curves"))
        evaluated, attacker = system_labels(cfg)
        write_vpc_results(folder / "vpc2024", records, plain(cfg.attacks), dataset=str(cfg.data.tag),
                          system=evaluated, attacker_system=attacker, eval_splits=list(cfg.eval_splits),
                          genders=trial_lists(cfg.data.get("eval_trials", "same_gender")))
        write_vpc2026_results(folder / "vpc2026", [RunResults(str(cfg.data.tag), list(cfg.eval_splits), records,
                                                              plain(cfg.attacks), utility_results)], system=evaluated)
    return folder

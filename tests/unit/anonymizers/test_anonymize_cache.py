"""The anonymize stage keys its folder on the system's parameter dataclass, so a list already in
the cache never builds the system, and the settings check never builds one either."""
import json
import sys

import pytest
import torch
from omegaconf import OmegaConf

from anonymizers.external import ExternalParameters
from anonymizers.mcadams import McAdams
from anonymizers.vc.model import MODEL_FORMAT
from anonymizers.vc.system import SpeakerEmbeddingParameters
from pipeline.app.settings import problems
from pipeline.core.cache import PARAMS, Cache
from pipeline.core.config import compose
from pipeline.core.errors import VpevalError
from pipeline.core.schemas import OutputCheck
from pipeline.data.audio import write_audio
from pipeline.data.manifest import Utterance, write_manifest
from pipeline.runtime.distributed import World
from pipeline.stages import anonymize
from tests.helpers import tone, waves


@pytest.fixture
def built(monkeypatch):
    """Counts McAdams constructions."""
    count = []
    original = McAdams.__init__

    def counting(self, **settings):
        count.append(settings)
        original(self, **settings)

    monkeypatch.setattr(McAdams, "__init__", counting)
    return count


def one_list(tmp_path):
    utts = [Utterance(f"s1-{i}", "s1", "f", str(write_audio(tmp_path / f"s1-{i}.flac", tone(0.3, 150 + 20 * i), 16000)),
                      0.3) for i in range(2)]
    return write_manifest(tmp_path / "train.jsonl", utts)


def test_a_cached_list_never_builds_the_system(tmp_path, built):
    """Regression (issue 39): McAdams was built again for every anonymised list, cached or not."""
    cache, manifest, system = Cache(tmp_path / "cache"), one_list(tmp_path), compose([]).anonymizer
    first = anonymize.run(system, manifest, cache, list_name="train", seed=1, device="cpu")
    assert len(built) == 1
    assert anonymize.run(system, manifest, cache, list_name="train", seed=1, device="cpu") == first
    assert len(built) == 1 and [event.reused for event in cache.events] == [False, True]


def test_a_target_that_names_no_anonymiser_is_one_line(tmp_path):
    system = compose(["anonymizer._target_=no.such.System"]).anonymizer
    with pytest.raises(VpevalError, match=r"^anonymizer._target_=no.such.System: must name an anonymiser class \(a "
                                          r"subclass of anonymizers.base.Anonymizer in a module that imports\)$"):
        anonymize.run(system, one_list(tmp_path), Cache(tmp_path / "cache"), list_name="train", seed=1, device="cpu")


def test_the_key_holds_the_config_and_the_parameters_fingerprint(tmp_path):
    """What names the folder besides the code version is what it was before the parameters were
    a dataclass: the system's config less its labels, the seed, rate and list, the manifest."""
    cache, manifest, system = Cache(tmp_path / "cache"), one_list(tmp_path), compose([]).anonymizer
    key = json.loads((anonymize.run(system, manifest, cache, list_name="train", seed=1, device="cpu") / PARAMS)
                     .read_text())
    assert key["params"] == {"system": {"_target_": "anonymizers.mcadams.McAdams", "level": "utterance",
                                        "alpha": [0.5, 0.9], "lpc_order": 20, "lpc": "levinson",
                                        "deterministic": False, "chunk_frames": None},
                             "seed": 1, "sample_rate": 16000, "list": "train"}
    assert set(key["inputs"]) == {"manifest"}


def test_an_external_systems_timeout_and_temporary_folder_are_not_in_the_key(tmp_path):
    """Regression: raising `anonymizer.timeout_seconds` after a time-out made a new folder, so the
    batches the timed-out run had finished were anonymised again; its `workdir` likewise."""
    class Keyed(Exception):
        pass

    class KeyOnly:
        def build(self, stage, params, inputs, builder, *, code):
            raise Keyed(json.dumps(params, sort_keys=True))

    manifest = one_list(tmp_path)

    def key(*overrides: str) -> str:
        system = compose(["anonymizer=external", "anonymizer.command=['true']", *overrides]).anonymizer
        with pytest.raises(Keyed) as keyed:
            anonymize.run(system, manifest, KeyOnly(), list_name="train", seed=1, device="cpu")
        return str(keyed.value)

    assert key("anonymizer.timeout_seconds=60", f"anonymizer.workdir={tmp_path}") == key()
    assert key("anonymizer.length_tolerance=0.2") != key()


def test_a_timed_out_external_run_resumes_with_a_longer_timeout(tmp_path):
    """What the key fix is for (docs/anonymisers.md): the batch finished before the time-out is
    not sent to the system again once `timeout_seconds` is raised."""
    script = tmp_path / "system.py"
    script.write_text("import shutil, sys, time\n"
                      "lst, out, log = sys.argv[1:4]\n"
                      "rows = [line.split() for line in open(lst) if line.strip()]\n"
                      "open(log, 'a').write(' '.join(r[0] for r in rows) + '\\n')\n"
                      "time.sleep(3 if any(r[0] == 's0-1' for r in rows) else 0)\n"
                      "[shutil.copy(r[2], f'{out}/{r[0]}.wav') for r in rows]\n")
    utts = [Utterance(f"s0-{i}", "s0", "f", str(write_audio(tmp_path / f"{i}.wav", w, 16000)), 1.0)
            for i, w in enumerate(waves((1.0, 0), (1.0, 1)))]
    manifest, cache, log = write_manifest(tmp_path / "train.jsonl", utts), Cache(tmp_path / "cache"), tmp_path / "log"
    command = f"anonymizer.command=['{sys.executable}','{script}','{{list_file}}','{{output_dir}}','{log}']"

    def run(timeout: float):
        system = compose(["anonymizer=external", command, f"anonymizer.timeout_seconds={timeout}",
                          "anonymizer.batch_seconds=1"]).anonymizer
        return anonymize.run(system, manifest, cache, list_name="train", seed=1, device="cpu",
                             output_check=OutputCheck(speech=False, max_non_speech=1.0))

    with pytest.raises(VpevalError, match="timed out after 1 s"):
        run(1)
    run(60)
    assert log.read_text().splitlines() == ["s0-0", "s0-1", "s0-1"]  # s0-0 once: kept from the first run


def test_the_settings_check_builds_no_anonymiser(built):
    assert problems(compose(["device=cpu"]), build=True) == []
    assert problems(compose(["anonymizer.lpc_order=0", "device=cpu"]), build=True) == [
        "anonymizer.lpc_order=0: must be an integer from 1 to 100"]
    assert built == []


def test_each_mcadams_parameter_is_checked_once_by_its_field(built):
    """Regression (issue 39): `lpc` and `deterministic` were checked by `settings_checks` and again
    in the constructor; now by the parameter dataclass alone, for the check and the constructor."""
    with pytest.raises(Exception, match=r"^anonymizer.lpc=covariance: must be levinson or burg$"):
        McAdams(lpc="covariance", device="cpu")
    cfg = compose(["anonymizer.lpc=covariance"])
    assert problems(cfg) == ["anonymizer.lpc=covariance: must be levinson or burg"]


def test_a_misspelt_pool_key_a_value_left_unset_and_an_old_model_description_are_one_line(tmp_path):
    """Regressions (review of issue 39): `pool: {sorce: ...}` passed and used the stored pool;
    `???` passed a parameter dataclass's own check; a model.json without the encoder digest was
    a KeyError."""
    found = problems(compose(["anonymizer=xvector", f"anonymizer.vc_model={tmp_path}", "+anonymizer.pool.sorce=x"]))
    assert [p for p in found if p.startswith("anonymizer.pool=")] == [
        "anonymizer.pool={'source': None, 'subsets': None, 'cache_dir': None, 'sorce': 'x'}: must be a mapping of "
        "source, subsets, cache_dir (subsets: null or a list of names)"]
    with pytest.raises(VpevalError, match=r"^anonymizer.command: a value is required \(it is \?\?\? in the config\)$"):
        ExternalParameters(command="???").check()
    (tmp_path / "model.json").write_text(json.dumps({"format": MODEL_FORMAT, "model": {}}))
    with pytest.raises(VpevalError, match="model.json: no speaker_encoder_sha256"):
        SpeakerEmbeddingParameters(vc_model=str(tmp_path)).fingerprint(None)


class RankWithoutPeers(World):
    """One rank of a team whose other ranks never ran (killed before their first batch)."""

    def barrier(self) -> None:
        pass


def test_a_folder_left_by_an_interrupted_team_resumes_in_one_process(tmp_path, caplog):
    """Rank 1 of 2 finished its batches, wrote half a record and died with rank 0 idle: one
    process later anonymises only rank 0's batches and gathers the records of both, and the
    folder holds what one process alone writes."""
    utts = [Utterance(f"s{k}-{i}", f"s{k}", "fm"[k], str(write_audio(tmp_path / f"s{k}-{i}.flac",
                                                                      tone(0.3 + 0.05 * i, 120 + 40 * k), 16000)),
                      0.3 + 0.05 * i) for k in range(2) for i in range(4)]
    manifest = write_manifest(tmp_path / "train.jsonl", utts)
    system = compose(["anonymizer.batch_seconds=0.7"]).anonymizer  # 4 batches of 2 utterances
    alone = anonymize.run(system, manifest, Cache(tmp_path / "alone"), list_name="train", seed=1, device="cpu")
    resumed = tmp_path / "resumed" / "anonymize" / alone.name
    resumed.mkdir(parents=True)
    anonymizer = McAdams(**{k: v for k, v in OmegaConf.to_container(system).items() if k not in ("name", "_target_")},
                         seed=1, device="cpu")
    anonymize._anonymize(resumed, "mcadams", anonymizer, utts, "train", 16000, RankWithoutPeers(1, 2, torch.device("cpu")))
    part = resumed / "pseudo_speakers.1.jsonl"
    assert len(part.read_text().splitlines()) == 4
    with open(part, "a") as handle:
        handle.write('{"id": "s0-0", "pseudo_spea')
    with caplog.at_level("INFO", logger="pipeline.stages.anonymize"):
        again = anonymize.run(system, manifest, Cache(tmp_path / "resumed"), list_name="train", seed=1, device="cpu")
    assert again == resumed and "mcadams on 4/8 utterances" in caplog.text
    assert sorted(p.name for p in resumed.glob("pseudo_speakers*")) == ["pseudo_speakers.jsonl"]
    for name in ("pseudo_speakers.jsonl", "speech.json"):
        assert (resumed / name).read_text() == (alone / name).read_text()
    for utt in utts:
        assert (anonymize.output_path(resumed, utt).read_bytes() == anonymize.output_path(alone, utt).read_bytes())

"""recipes/vpc2026, vpc2026_track2 (and vpc2024's emotion settings): the settings the VoicePrivacy
toolkits' evaluation uses (VPC 2026's configs/track1, configs/track2), as the experiments compose them."""
import pytest

from pipeline.core.config import compose

VPC = ["data.root=/vpc/data", "attacker.pretrained=/vpc/exp/asv_ssl", "attacker.model.wavlm=/vpc/exp/asv_ssl/WavLM-Large.pt"]


def test_track1_has_both_privacy_rows_on_mixed_lists_with_the_fine_tuned_ssl_attacker():
    cfg = compose(["+experiment=vpc2026", *VPC])
    assert {name: dict(spec) for name, spec in cfg.attacks.items()} == {
        "OO": {"enroll": "original", "trials": "original", "attacker": "original"},
        "AA-lazy": {"enroll": "anonymized", "trials": "anonymized", "attacker": "original"},  # ASV_eval
        "AA": {"enroll": "anonymized", "trials": "anonymized", "attacker": "anonymized"}}  # ASV_eval^anon
    assert cfg.data.eval_trials == "both" and cfg.data.protocol.mixed_trials == "{subset}_trials_mixed"
    assert cfg.attacker.name == "ecapa_ssl" and cfg.attacker.finetune is True
    assert cfg.attacker.init == cfg.attacker.pretrained == "/vpc/exp/asv_ssl"
    training = cfg.attacker.training
    assert (training.epochs, training.batch_size, training.crop_seconds) == (2, 32, 3.0)
    assert training.optimizer._target_ == "torch.optim.AdamW" and training.optimizer.weight_decay == 0.01
    assert training.scheduler.step_size_up == 65000 and training.scheduler.base_lr == 1e-8
    assert [a._target_.rsplit(".", 1)[1] for a in training.augment] == ["DropFreq", "DropChunk"]
    assert (cfg.backend.embedding, cfg.backend.enrolment) == ("sign", "mean_raw")  # VPC's sign vectors
    assert cfg.asr.interface.endswith("EncoderASR") and cfg.utility.uar_rule == "vpc"  # evaluate_ser's speaker mean
    assert cfg.asr.batch_size == 8 and cfg.utility.wer_text == "vpc_speechbrain"  # VPC's eval_batchsize, compute_wer
    assert cfg.emotion.name == "vpc_ser"  # its fold models, each speaker by the model of its fold
    assert cfg.emotion.interface == "custom_interface.py:CustomEncoderWav2vec2Classifier"  # VPC's foreign_class


@pytest.mark.parametrize("language, tag, epochs", [("english", "en", 4), ("german", "de", 10),
                                                   ("french", "fr", 10), ("spanish", "es", 10)])
def test_track2_trains_one_attacker_per_language_for_vpcs_epochs(language, tag, epochs):
    cfg = compose(["+experiment=vpc2026_track2", f"+vpc2026_language={language}", *VPC])
    assert (cfg.data.language, cfg.data.tag, cfg.attacker.training.epochs) == (language, tag, epochs)
    assert cfg.data.subsets.train == [f"train_{language}"] and cfg.data.subsets.test == f"{tag}_test"
    assert cfg.data.eval_trials == "mixed" and cfg.asr.name == "whisper_vpc2026" and cfg.asr.language == language
    assert cfg.utility.wer_text == "vpc2026_whisper" and cfg.utility.uar_rule == "vpc_track2"  # emotion2vec+ pools
    assert cfg.emotion.name == "emotion2vec" and cfg.emotion._target_.endswith("Emotion2vecClassifier")


def test_the_built_in_corpus_variant_trains_from_scratch_on_cpu():
    cfg = compose(["+experiment=vpc2026_synthetic", "attacker.model.wavlm=/models/wavlm_tiny"])
    assert cfg.data.name == "synthetic_small" and cfg.attacker.name == "ecapa_ssl_tiny" and cfg.device == "cpu"
    assert cfg.attacker.init is None and cfg.attacker.finetune is None and cfg.data.eval_trials == "both"


def test_vpc2024_scores_emotion_with_its_fold_models_and_last_checkpoints():
    cfg = compose(["+experiment=vpc2024", "data.root=/vpc/data"])
    assert (cfg.emotion.name, cfg.emotion.checkpoint, cfg.utility.uar_rule) == ("vpc_ser", "last", "vpc")
    assert (cfg.asr.name, cfg.asr.batch_size, cfg.utility.wer_text) == ("speechbrain_ctc", 8, "vpc_speechbrain")
    assert compose(["+experiment=vpc2026", *VPC]).emotion.checkpoint == "valid_loss"  # VPC 2026 reads the log

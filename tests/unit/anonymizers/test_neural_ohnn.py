"""OHNN training: the objective decreases, images move to their pseudo-speaker's region and away
from the source, a speaker's utterances land together, and training resumes."""
import pytest
import torch
import torch.nn.functional as F

from pipeline.app.train_vc.ohnn import EmbeddingSet, OHNNTrainer, pseudo_targets
from pipeline.core.errors import VpevalError

TRAINING = {"epochs": 12, "batch_size": 32, "lr": 0.02, "margin": 0.2, "scale": 30.0, "similarity_weight": 1.0,
            "similarity_margin": 0.0, "same_gender_targets": True, "val_fraction": 0.2}
SPEC = {"_target_": "anonymizers.vc.householder.HouseholderMap", "dim": 16, "reflections": None, "seed": 0}


pytestmark = pytest.mark.usefixtures("single_thread")


def clustered(speakers=8, per_speaker=20, dim=16, spread=0.15, seed=0):
    """Speaker clusters on the unit sphere, half of them 'f', half 'm'."""
    generator = torch.Generator().manual_seed(seed)
    centres = F.normalize(torch.randn(speakers, dim, generator=generator), dim=-1)
    labels = torch.arange(speakers).repeat_interleave(per_speaker)
    x = F.normalize(centres[labels] + spread * torch.randn(len(labels), dim, generator=generator), dim=-1)
    return EmbeddingSet(x, labels, ["f" if k % 2 else "m" for k in range(speakers)])


def test_pseudo_targets_are_a_same_gender_derangement():
    genders = ["f", "m", "f", "m", "f", "m"]
    targets = pseudo_targets(genders, seed=1, same_gender=True)
    assert all(int(targets[k]) != k and genders[int(targets[k])] == genders[k] for k in range(6))
    assert sorted(targets.tolist()) == list(range(6))
    torch.testing.assert_close(targets, pseudo_targets(genders, seed=1, same_gender=True))
    with pytest.raises(VpevalError, match="1 training speaker.*group 'm'"):
        pseudo_targets(["f", "f", "m"], seed=0, same_gender=True)


def test_objective_decreases_and_moves_speakers_to_their_targets():
    data = clustered()
    trainer = OHNNTrainer(data, SPEC, TRAINING, seed=0, checkpoint_path=None, device=torch.device("cpu"))
    with torch.no_grad():  # start from the identity: pairs of equal reflections cancel
        trainer.ohnn.vectors[1::2] = trainer.ohnn.vectors[0::2]
    before = trainer.evaluate(trainer.val_index)
    assert before["source_cosine"] > 0.999
    after = trainer.fit()["validation"]
    assert after["loss"] < 0.5 * before["loss"]
    assert after["target_accuracy"] > 0.9 and after["source_accuracy"] < 0.1
    assert after["source_cosine"] < 0.3
    assert after["speaker_consistency"] > 0.9  # deterministic map: one speaker -> one pseudo-speaker
    matrix = trainer.ohnn.matrix().detach()
    torch.testing.assert_close(matrix @ matrix.T, torch.eye(16), atol=1e-5, rtol=0)


def test_training_resumes_to_the_same_map(tmp_path):
    data, device = clustered(seed=2), torch.device("cpu")
    straight = OHNNTrainer(data, SPEC, {**TRAINING, "epochs": 4}, 0, tmp_path / "a.pt", device)
    straight.fit()
    OHNNTrainer(data, SPEC, {**TRAINING, "epochs": 2}, 0, tmp_path / "b.pt", device).fit()
    with pytest.raises(VpevalError, match=r"b\.pt: written by a run with other settings \(training\.epochs: 2 -> 4\)"):
        OHNNTrainer(data, SPEC, {**TRAINING, "epochs": 4}, 0, tmp_path / "b.pt", device).fit()
    changed_lr = OHNNTrainer(data, SPEC, {**TRAINING, "epochs": 2, "lr": 0.1}, 0, tmp_path / "b.pt", device)
    with pytest.raises(VpevalError, match="training.lr: 0.02 -> 0.1"):
        changed_lr.fit()
    resumed = OHNNTrainer(data, SPEC, {**TRAINING, "epochs": 2}, 0, tmp_path / "b.pt", device)
    resumed.training = {**TRAINING, "epochs": 4}  # more epochs of the same run
    resumed.fit()
    torch.testing.assert_close(resumed.ohnn.vectors, straight.ohnn.vectors)
    assert len(resumed.state["history"]) == 4

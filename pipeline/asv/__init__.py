"""The ASV attacker: ECAPA-TDNN speaker encoder, audio cache, training, extraction, scoring.

Modules: `features` (batched Kaldi fbank), `model` (encoder and AAM-softmax head),
`audio_cache` (decoded int16 audio), `crops` (reproducible training crops), `schedules`
(learning-rate schedules), `augment` (training-crop augmentation), `finetune` (`attacker.init` /
`finetune`), `checkpoint` (safe save/load), `train`, `embed`, `scoring`.
"""

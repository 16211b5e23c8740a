"""The words of vpeval's two speech conditions, defined once for configs, records, caches and reports.

`ORIGINAL` is speech as recorded, `ANONYMIZED` speech an anonymiser produced: the values of an
attack's `enroll`, `trials` and `attacker` and of `attacker.pretrained_on`, a record's
`anonymizer` / `attacker_anonymizer` where no system applies, the kinds of an experiment's lists,
the inputs of the pitch and similarity stages' keys, and the ends of the utility keys
(`wer_original`, `uar_anonymized`). The VoicePrivacy toolkits' results files spell them `VPC_LABELS`.
"""
from __future__ import annotations

ORIGINAL = "original"
ANONYMIZED = "anonymized"
CONDITIONS = (ORIGINAL, ANONYMIZED)
VPC_LABELS = {ORIGINAL: "original", ANONYMIZED: "anon"}  # `enrollment` / `trial` / `asr` of VPC's results

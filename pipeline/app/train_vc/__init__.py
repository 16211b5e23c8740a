"""`vpeval train-vc`: training of the neural anonymisers, apart from their inference
(`anonymizers.vc`, `anonymizers.xvector`, `anonymizers.ohnn` never import it): `command` is the
subcommand, `vc` trains the voice converter, `ohnn` the OHNN map, `recipe` holds their shared
corpus and embedding steps. Both loops are `pipeline.runtime.trainer.Trainer`s, like the attacker's."""

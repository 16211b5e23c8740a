"""The runtime layer: worker processes, ranks, the training loop, checkpoints and small shared
helpers (seeds, ordered maps, precision). It imports only `pipeline.core`."""

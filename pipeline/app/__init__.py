"""The application layer: the `vpeval` commands (experiment, sweep, aggregate, slurm, export,
metrics, train-vc) built on the stages and the libraries."""

"""vpeval's Slurm launcher (`hydra/launcher=slurm`) as a Hydra plugin: Hydra instantiates
launchers only from the `hydra_plugins` namespace. It is hydra-submitit-launcher's, with a
wait that always ends and says what it waits for (`pipeline.app.slurm.SweepWatch`)."""
try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as _SubmititSlurmLauncher
except ImportError:  # the slurm extra is not installed: `vpeval -m hydra/launcher=slurm` says so first
    _SubmititSlurmLauncher = None

if _SubmititSlurmLauncher is not None:

    class VpevalSlurmLauncher(_SubmititSlurmLauncher):
        """submitit's jobs wrapped for this launch (`pipeline.app.slurm.WatchedExecutor`)."""

        def launch(self, job_overrides, initial_job_idx: int):
            import submitit

            from pipeline.app.slurm import WatchedExecutor

            real = submitit.AutoExecutor
            submitit.AutoExecutor = lambda **kwargs: WatchedExecutor(real(**kwargs))  # this launch only
            try:
                return super().launch(job_overrides, initial_job_idx)
            finally:
                submitit.AutoExecutor = real

"""Regression: pipeline.asv.wavlm imported transformers at module level, so every run (the
wheel's smoke job, installed without the optional `ssl` / `whisper` extras) failed with
ModuleNotFoundError before any stage. Optional libraries load only where they are used."""
import subprocess
import sys
import textwrap


def test_the_pipeline_imports_and_a_wavlm_names_its_extra_without_transformers(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        sys.modules["transformers"] = None  # import transformers raises ImportError
        import pipeline.app.cli, pipeline.app.experiment  # noqa: F401 (every stage, ecapa_ssl included)
        from pipeline.asv.wavlm import load_wavlm
        from pipeline.core.errors import VpevalError
        try:
            load_wavlm({str(tmp_path)!r})
        except VpevalError as error:
            print(error)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == ("attacker.model.wavlm: a WavLM needs the transformers package: "
                                                    "pip install -c constraints.txt -e '.[ssl]'")


# The test extras that the CUDA image of the GPU check lacks (/work/shared/device/README.md lists
# what it has): a module-level import of one of them loses every GPU test of its module there.
TEST_ONLY_EXTRAS = ("librosa", "importlinter", "pocketsphinx", "jiwer", "mkdocs")


def test_every_gpu_test_collects_without_the_test_only_extras():
    """Regression: test_mcadams_kernels.py imported librosa at module level, so on the CUDA
    machine (no librosa) its two GPU tests would not even be collected."""
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in TEST_ONLY_EXTRAS)
    code = (f"import sys; {blocked}; import pytest; "
            "sys.exit(pytest.main(['--collect-only', '-q', '-m', 'gpu', '-p', 'no:cacheprovider', 'tests']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "test_mcadams_kernels.py::test_cuda_matches_cpu[burg]" in done.stdout, done.stdout[-3000:]

"""Regenerate the "Bad inputs" table of docs/robustness.md from the messages the tests of
tests/faults/bad_inputs/ observe.

    python tests/bad_inputs_table.py
"""
import os
import subprocess
import sys
from pathlib import Path

if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "VPEVAL_WRITE_TABLE": "1", "PYTHONPATH": str(root)}
    sys.exit(subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/faults/bad_inputs"], cwd=root, env=env, check=False).returncode)

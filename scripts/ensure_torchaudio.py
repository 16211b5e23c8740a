"""Make torchaudio's pure-Python parts importable on a CPU-only torch.

PyPI's torchaudio 2.11 wheel is linked against CUDA; on a CPU build of torch its C++
extension cannot load and `import torchaudio` fails. Its pure-Python parts (fbank,
resample, MelSpectrogram, the HuBERT/wav2vec 2.0 models) need no extension, so when, and
only when, the extension fails to load, this script removes the installed `torchaudio/lib`
folder. See DEVELOPERS.md.
"""
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

probe = subprocess.run([sys.executable, "-c", "import torchaudio"], capture_output=True, text=True)
if probe.returncode == 0:
    print("torchaudio imports; nothing to do")
    sys.exit(0)
if "Could not load this library" not in probe.stderr and "libc10_cuda" not in probe.stderr:
    sys.exit(f"torchaudio fails to import for another reason:\n{probe.stderr}")
lib = Path(importlib.util.find_spec("torchaudio").submodule_search_locations[0]) / "lib"
shutil.rmtree(lib)
print(f"torchaudio's CUDA-linked extension could not load; removed {lib}")
subprocess.run([sys.executable, "-c", "import torchaudio"], check=True)

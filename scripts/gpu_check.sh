#!/usr/bin/env bash
# The GPU check, unattended, on a CUDA machine whose image has torch but no package registry
# (DEVELOPERS.md "GPU check on the development machines"): install the offline wheels staged in
# ./.whl beside the image's torch, without pip -e, then run scripts/gpu_check.py with this
# script's arguments (e.g. --budget 570, --dry-run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
site="${VPEVAL_SITE:-/tmp/vpeval-site}"
if ! PYTHONPATH="$site" python3 -c "import hydra, omegaconf, speechbrain, soundfile" 2>/dev/null; then
    if ! ls .whl/*.whl >/dev/null 2>&1; then
        echo "gpu_check: no wheels in .whl/ and hydra/speechbrain/soundfile missing; stage them first (DEVELOPERS.md, \"GPU check on the development machines\")" >&2
        exit 2
    fi
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .whl/*.whl
fi
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec python3 scripts/gpu_check.py "$@"

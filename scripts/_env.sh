# Shared by scripts/demo and scripts/test: make .venv and install the project into it.
# Idempotent: a stamp of the dependency inputs skips pip when nothing changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup] creating $VENV with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv "$VENV"
fi
STAMP="$VENV/.tritonkit-install-stamp"
WANT="$(cat pyproject.toml scripts/_env.sh | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
    echo "[setup] installing tritonkit with extras cpu,cluster,dev into $VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    # cpu: onnxruntime (never together with onnxruntime-gpu); cluster: Ray, for the cluster sweeps and
    # their tests. The bundled tritonserver is installed below, into a folder of its own.
    # numpy<2 here only: the bundled Triton 2.51's python-backend stub answers some python models' outputs
    # empty under numpy 2 (tests/client, tests/builders/trtllm), and the suite serves them in this environment.
    "$VENV/bin/python" -m pip install --quiet -e ".[cpu,cluster,dev]" "numpy<2"
    echo "$WANT" > "$STAMP"
fi
# The bundled tritonserver (its files only, out of the nvidia-pytriton wheel: no numpy<2 pin) and the real
# perf_analyzer binary (and, on glibc < 2.38, its private runtime); quick when present.
"$VENV/bin/tritonkit" install --quiet
"$VENV/bin/tritonkit" deploy install-prometheus --quiet  # promtool + Prometheus (Debian package, private) for the rule tests
"$VENV/bin/tritonkit" deploy install-checkov --quiet  # checkov (pinned) in its own venv for the manifest tests
export PATH="$VENV/bin:$PATH"

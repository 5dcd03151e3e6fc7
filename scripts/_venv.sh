# Sourced by scripts/train and scripts/test: create or reuse .venv in the repository
# and install rlightning with its extras at the versions pinned in constraints.txt.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
    echo "[rlightning] creating virtual environment in .venv"
    "$PY" -m venv "$VENV"
fi
# Reinstall only when the project's install inputs changed.
STAMP="$VENV/.rlightning-install-stamp"
WANT="$(cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
    echo "[rlightning] installing dependencies (pinned in constraints.txt)"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    # torch first, so nothing pulls a multi-GB CUDA build.
    "$VENV/bin/python" -m pip install -q "torch==2.13.0"
    "$VENV/bin/python" -m pip install -q -c "$ROOT/constraints.txt" -e "$ROOT[dev,notebook]"
    echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"

#!/usr/bin/env bash
# Creates (once) the pinned JAX environment used by the exporters and by `ebb bench --xla`:
# a virtual environment at .venv-jax in the repository root (or at $1) with
# examples/export/requirements.txt installed, CPU only. Prints the environment's Python on
# stdout, so that:
#   export EBB_PYTHON=$(bash examples/export/make_env.sh)
# Progress and pip's output go to stderr. Idempotent: an environment whose jax already has the
# pinned version is reused as it is.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
env_dir="${1:-$root/.venv-jax}"
req="$root/examples/export/requirements.txt"
py="$env_dir/bin/python"
want="$(sed -n 's/^jax==//p' "$req")"
if [ -x "$py" ] && [ "$("$py" -c 'import jax; print(jax.__version__)' 2>/dev/null)" = "$want" ]; then
  echo "make_env: reusing $env_dir (jax $want)" >&2
else
  command -v python3 >/dev/null || { echo "make_env: python3 not found (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
  echo "make_env: creating $env_dir with $req" >&2
  python3 -m venv "$env_dir" >&2
  "$env_dir/bin/pip" install -q -r "$req" >&2
fi
echo "$py"

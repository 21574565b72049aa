#!/usr/bin/env bash
# Creates (once) the pinned JAX environment used by the exporters and by `ebb bench --xla`:
# a virtual environment with examples/export/requirements.txt installed, CPU only, at $1 if
# given, else at .venv-jax in the repository root. Prints the environment's Python on stdout,
# so that:
#   export EBB_PYTHON=$(bash examples/export/make_env.sh)
# Progress and pip's output go to stderr. Idempotent: an environment whose jax already has the
# pinned version is reused as it is.
#
# A checkout without .venv-jax gets it as a symbolic link to a shared environment in the user's
# cache, `${XDG_CACHE_HOME:-~/.cache}/ebb/venvs/jax-<digest of requirements.txt and python3's
# version>`, so that every clone on a machine (CI's fresh clones, worktrees) shares one
# environment instead of downloading JAX (and, from scripts/setup-debian.sh, torch) again.
# EBB_VENV_SHARED=0 makes a private environment in the checkout instead.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
req="$root/examples/export/requirements.txt"
want="$(sed -n 's/^jax==//p' "$req")"
if [ -n "${1:-}" ]; then
  env_dir="$1"
  target="$1"
else
  env_dir="$root/.venv-jax"
  target="$env_dir"
  if [ ! -e "$env_dir" ] && [ ! -L "$env_dir" ] && [ "${EBB_VENV_SHARED:-1}" != 0 ]; then
    command -v python3 >/dev/null || { echo "make_env: python3 not found (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
    key="$( { cat "$req"; python3 --version; } | sha256sum | cut -c1-16)"
    target="${XDG_CACHE_HOME:-$HOME/.cache}/ebb/venvs/jax-$key"
  fi
fi
py="$target/bin/python"
if [ -x "$py" ] && [ "$("$py" -c 'import jax; print(jax.__version__)' 2>/dev/null)" = "$want" ]; then
  echo "make_env: reusing $target (jax $want)" >&2
else
  command -v python3 >/dev/null || { echo "make_env: python3 not found (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
  echo "make_env: creating $target with $req" >&2
  mkdir -p "$(dirname "$target")"
  python3 -m venv "$target" >&2
  "$target/bin/pip" install -q -r "$req" >&2
fi
if [ "$target" != "$env_dir" ]; then
  ln -sfn "$target" "$env_dir"
  echo "make_env: $env_dir -> $target" >&2
fi
echo "$env_dir/bin/python"

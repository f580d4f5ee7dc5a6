#!/usr/bin/env bash
# Set up a virtualenv and run tutorrl's main job or its whole test suite.
#
#   bash tools/dev.sh demo   # set up, compile the chess tutor spec, dry-run it on an embedded Ray with the real verl
#   bash tools/dev.sh test   # set up (verl + torch for the CPU), then every test and the bundle staleness gate
#
# torch is installed first, pinned to the CPU build this machine kind provides
# (pip's configured find-links): asked for later by verl, an unpinned torch
# would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv="${TUTORRL_VENV:-.venv}"
python="${PYTHON:-python3}"

setup() {
  local extras="$1"
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet 'torch==2.13.0'
  "$venv/bin/python" -m pip install --quiet -e ".[$extras]"
}

case "${1:-}" in
  demo)
    setup "ray,verl"
    bundle="$("$venv/bin/tutorrl" compile specs/chess_tutor_grpo.toml)"
    "$venv/bin/tutorrl" verify "$bundle"
    "$venv/bin/tutorrl" run "$bundle" --dry-run
    ;;
  test)
    setup "test"
    "$venv/bin/tutorrl" check
    "$venv/bin/python" -m pytest -p no:cacheprovider "${@:2}"
    ;;
  *)
    echo "usage: bash tools/dev.sh demo|test [pytest args]" >&2
    exit 2
    ;;
esac

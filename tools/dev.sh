#!/usr/bin/env bash
# Set up a virtualenv and run tutorrl's main job or its whole test suite.
#
#   bash tools/dev.sh demo   # set up, compile the chess tutor spec, dry-run it on an embedded Ray with the real verl
#   bash tools/dev.sh test   # set up (verl + torch for the CPU), then every test and the bundle staleness gate
#
# Needs Python >= 3.11 (PYTHON=python3.12 to choose one); the virtualenv is
# .venv (TUTORRL_VENV to choose another). Set-up prints one line per phase;
# pip's full output goes to build/dev-setup.log, shown when a phase fails.
# pip is upgraded first (an old pip mis-resolves this dependency set), then
# torch is installed pinned to the CPU build this machine kind provides (pip's
# configured find-links): asked for later by verl, an unpinned torch would pull
# a multi-GB CUDA build. A set-up that already succeeded with the same
# pyproject.toml and Python is not repeated (delete .venv to start over);
# TUTORRL_DEV_SETUP=skip uses the virtualenv as it is (tests, offline work).
# The demo compiles into build/demo/bundles/ (TUTORRL_DEMO_DIR for another
# folder), emptied first so the compile happens every time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv="${TUTORRL_VENV:-.venv}"
python="${PYTHON:-python3}"
torch_pin="torch==2.13.0"
log="$PWD/build/dev-setup.log"

python_ok() {  # $1: an interpreter; succeeds when it is Python >= 3.11
  "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null
}

python_version() {
  "$1" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || echo "not runnable"
}

phase() {  # $1: what the phase does; the rest: its command, whose output goes to the log
  local what="$1" started=$SECONDS
  shift
  printf 'setup: %s ...' "$what"
  printf '\n==== %s\n$ %s\n' "$what" "$*" >>"$log"
  if "$@" >>"$log" 2>&1; then
    printf ' done (%ds)\n' $((SECONDS - started))
  else
    printf ' FAILED after %ds\n' $((SECONDS - started))
    echo "---- the last 60 lines of $log:" >&2
    tail -n 60 "$log" >&2
    echo "---- pip's full output: $log" >&2
    exit 1
  fi
}

setup() {
  local extras="$1" started=$SECONDS
  # Refuse an old Python before anything is installed: verl and torch would
  # install (gigabytes) and tutorrl itself would then be refused.
  if ! python_ok "$python"; then
    echo "tutorrl needs Python >= 3.11; '$python' is $(python_version "$python")." >&2
    echo "Run again with a newer one, e.g.: PYTHON=python3.11 bash tools/dev.sh ${command}" >&2
    exit 2
  fi
  if [ -e "$venv/bin/python" ] && ! python_ok "$venv/bin/python"; then
    echo "$venv was made with Python $(python_version "$venv/bin/python"); tutorrl needs >= 3.11." >&2
    echo "Remove it (rm -r $venv) and run this again." >&2
    exit 2
  fi
  if [ "${TUTORRL_DEV_SETUP:-}" = "skip" ] && [ -x "$venv/bin/tutorrl" ]; then
    echo "setup: skipped (TUTORRL_DEV_SETUP=skip); using $venv as it is"
    return
  fi
  mkdir -p "$(dirname "$log")"
  : >"$log"
  local stamp="$venv/.tutorrl-setup-${extras//,/-}"
  local want
  want="$(cat pyproject.toml; echo "$torch_pin"; python_version "$python")"
  if [ -x "$venv/bin/tutorrl" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "setup: $venv is up to date with pyproject.toml (tutorrl[$extras]); nothing to install"
    return
  fi
  echo "setup: pip's full output goes to $log"
  if [ ! -x "$venv/bin/python" ]; then
    phase "creating the virtualenv $venv (Python $(python_version "$python"))" "$python" -m venv "$venv"
  fi
  local pip=("$venv/bin/python" -m pip install --progress-bar off)
  phase "upgrading pip" "${pip[@]}" --upgrade pip
  phase "installing $torch_pin (CPU build)" "${pip[@]}" "$torch_pin"
  phase "installing tutorrl[$extras] and its dependencies (verl, Ray, ...)" "${pip[@]}" -e ".[$extras]"
  printf '%s' "$want" >"$stamp"
  echo "setup: ready in $((SECONDS - started))s"
}

command="${1:-}"
case "$command" in
  demo)
    setup "ray,verl"
    tutorrl="$venv/bin/tutorrl"
    out="${TUTORRL_DEMO_DIR:-build/demo}"
    rm -rf -- "$out/bundles"  # only what an earlier demo wrote: the compile happens every time
    echo
    echo "== compile specs/chess_tutor_grpo.toml: check the spec, resolve it against verl 0.9.1's keys, write the bundle"
    bundle="$("$tutorrl" compile specs/chess_tutor_grpo.toml --out "$out/bundles")"
    echo "== verify: every file of the bundle matches its manifest"
    "$tutorrl" verify "$bundle"
    echo "== dry run: an embedded Ray head runs the bundle's launch.sh; the real verl composes its config, no training"
    "$tutorrl" run "$bundle" --dry-run
    echo
    echo "The bundle is the launch, sealed: launch.sh (verl's command, one override per line), bundle.env, ray-job.json, the spec with every default filled in, and manifest.json with every file's sha256."
    echo "It is at $bundle (the dry run's record, with verl's full config, is under $bundle/runs/)."
    echo "Next: source $venv/bin/activate (puts tutorrl on PATH), then: tutorrl runs $bundle; tutorrl diff specs/chess_tutor_grpo.toml specs/chess_tutor_lora.toml; tutorrl compile your-spec.toml (examples in specs/)."
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

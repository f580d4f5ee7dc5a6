#!/usr/bin/env bash
# tutorrl launch script: experiment "gsm8k-dapo", verl 0.8.0 (fsdp).
# Generated from spec.toml by tutorrl. Edit the spec and recompile rather than
# this file: `tutorrl verify` refuses a bundle whose files were changed.
# Arguments given to this script (e.g. `--cfg job`) are passed to verl first.
set -euo pipefail

bundle_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$bundle_dir/bundle.env"

# Roots (the spec's [roots]): folders named by the job's environment.
if [ -z "${CKPT_ROOT:-}" ]; then export CKPT_ROOT=checkpoints; fi
if [ -z "${DATA_ROOT:-}" ]; then export DATA_ROOT=data; fi
if [ -z "${RECIPE_ROOT:-}" ]; then export RECIPE_ROOT=specs/recipes; fi

python_bin="${TUTORRL_PYTHON:-python}"
installed="$("$python_bin" -c 'import importlib.metadata as m; print(m.version("verl"))' 2>/dev/null)" || installed="no verl"
if [ "$installed" != "0.8.0" ]; then
  echo "tutorrl: this bundle targets verl 0.8.0, but the job's Python ($python_bin) has ${installed}" >&2
  exit 3
fi
# The recipe's code (the spec's [experiment.recipe]): the files it was compiled with, or no start.
recipe_dir="${RECIPE_ROOT}"/recipe
"$python_bin" -c '
import hashlib, os
SKIP_DIRS = {".git", "__pycache__"}
def recipe_files(folder):
    out = {}
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in names:
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(top, name)
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            with open(path, "rb") as fh:
                out[rel] = hashlib.sha256(fh.read()).hexdigest()
    return dict(sorted(out.items()))
def recipe_digest(files):
    text = "".join(f"{sha}  {rel}\n" for rel, sha in sorted(files.items()))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

import sys
folder, want = sys.argv[1], sys.argv[2]
if not os.path.isdir(folder):
    sys.exit(f"tutorrl: the recipe folder {folder} is absent where the job runs (the spec'"'"'s [experiment.recipe] path)")
got = recipe_digest(recipe_files(folder))
if got != want:
    sys.exit(f"tutorrl: the recipe code in {folder} is not what this bundle was compiled with ({got}, "
             f"the bundle pins {want}); `tutorrl verify` names the changed files")
' "$recipe_dir" sha256:2513dca47d77065fecefe4626b8c83fece7fcec51c3e97553c00f1671e020f7c || exit 3
export PYTHONPATH="$(cd "$recipe_dir/.." && pwd)${PYTHONPATH:+:$PYTHONPATH}"

# Paths under a root: the job's value is put in here, quoted for Hydra by the
# compiler's own quoting code, so a value cannot add shell or Hydra syntax.
roots_program='import json, math, os, re, sys
_INTERPOLATION = re.compile('"'"'(\\\\*)\\$\\{'"'"')
_BEFORE_QUOTE = re.compile('"'"'(\\\\*)(")'"'"')
_TRAILING = re.compile('"'"'(\\\\+)$'"'"')
def omegaconf_escape(text: str) -> str:
    """Make ``${`` literal for OmegaConf (what Hydra'"'"'s parser hands back)."""
    return _INTERPOLATION.sub(lambda m: m.group(1) * 2 + "\\${", text)

def quote_string(text: str) -> str:
    body = omegaconf_escape(text)
    body = _BEFORE_QUOTE.sub(lambda m: m.group(1) * 2 + '"'"'\\"'"'"', body)
    body = _TRAILING.sub(lambda m: m.group(1) * 2, body)
    return f'"'"'"{body}"'"'"'

def render_value(value) -> str:
    """One typed value in override grammar."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value!r}")
        return repr(value)
    if isinstance(value, str):
        return quote_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(render_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{render_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot render {type(value).__name__} as a Hydra value")

def join(root_value: str, rest: str) -> str:
    """The path a reference stands for once the root'"'"'s value is known."""
    if not rest:
        return root_value
    return root_value.rstrip("/") + rest if root_value.rstrip("/") else rest

key, raw = sys.argv[1:]
def part(item):
    if isinstance(item, str):
        return item
    value = os.environ.get(item['"'"'root'"'"'], '"'"''"'"')
    if not value:
        sys.exit('"'"'tutorrl: root %s (the spec\'"'"'s [roots]) is not set in the job environment; %s needs it'"'"' % (item['"'"'root'"'"'], key.lstrip('"'"'+'"'"')))
    return join(value, item['"'"'path'"'"'])
value = json.loads(raw)
value = [part(v) for v in value] if isinstance(value, list) else part(value)
print('"'"'%s=%s'"'"' % (key, render_value(value)))
'

rooted_0="$("$python_bin" -c "$roots_program" data.train_files '{"path": "/gsm8k/train.parquet", "root": "DATA_ROOT"}')" || exit 3
rooted_1="$("$python_bin" -c "$roots_program" data.val_files '{"path": "/gsm8k/test.parquet", "root": "DATA_ROOT"}')" || exit 3
rooted_2="$("$python_bin" -c "$roots_program" trainer.default_local_dir '{"path": "/gsm8k-dapo", "root": "CKPT_ROOT"}')" || exit 3

exec "$python_bin" -m recipe.dapo.main_dapo --config-name dapo_trainer "$@" \
  'hydra.searchpath=[pkg://verl.trainer.config]' \
  'trainer.experiment_name="gsm8k-dapo"' \
  'trainer.project_name="math"' \
  "$rooted_0" \
  "$rooted_1" \
  data.train_batch_size=512 \
  data.max_prompt_length=512 \
  data.max_response_length=1024 \
  'actor_rollout_ref.model.path="Qwen/Qwen3-0.6B"' \
  'algorithm.adv_estimator="grpo"' \
  algorithm.use_kl_in_reward=false \
  'actor_rollout_ref.actor.strategy="fsdp2"' \
  actor_rollout_ref.actor.ppo_mini_batch_size=128 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
  actor_rollout_ref.actor.use_kl_loss=false \
  'actor_rollout_ref.rollout.name="vllm"' \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  trainer.total_epochs=1 \
  trainer.save_freq=-1 \
  trainer.test_freq=5 \
  "$rooted_2" \
  'trainer.logger=["console"]' \
  'trainer.resume_mode="disable"' \
  trainer.nnodes=1 \
  trainer.n_gpus_per_node=8


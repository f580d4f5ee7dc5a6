#!/usr/bin/env bash
# tutorrl launch script: experiment "tiny-cpu-one-step-off", verl 0.9.1 (fsdp).
# Generated from spec.toml by tutorrl. Edit the spec and recompile rather than
# this file: `tutorrl verify` refuses a bundle whose files were changed.
# Arguments given to this script (e.g. `--cfg job`) are passed to verl first.
set -euo pipefail

bundle_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$bundle_dir/bundle.env"

# Roots (the spec's [roots]): folders named by the job's environment.
if [ -z "${CKPT_ROOT:-}" ]; then export CKPT_ROOT=checkpoints; fi
if [ -z "${TINY_ROOT:-}" ]; then export TINY_ROOT=build/tiny; fi

python_bin="${TUTORRL_PYTHON:-python}"
installed="$("$python_bin" -c 'import importlib.metadata as m; print(m.version("verl"))' 2>/dev/null)" || installed="no verl"
if [ "$installed" != "0.9.1" ]; then
  echo "tutorrl: this bundle targets verl 0.9.1, but the job's Python ($python_bin) has ${installed}" >&2
  exit 3
fi

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

rooted_0="$("$python_bin" -c "$roots_program" data.train_files '{"path": "/data/train.parquet", "root": "TINY_ROOT"}')" || exit 3
rooted_1="$("$python_bin" -c "$roots_program" data.val_files '{"path": "/data/val.parquet", "root": "TINY_ROOT"}')" || exit 3
rooted_2="$("$python_bin" -c "$roots_program" actor_rollout_ref.model.path '{"path": "/tiny-qwen2-hd32", "root": "TINY_ROOT"}')" || exit 3
rooted_3="$("$python_bin" -c "$roots_program" trainer.default_local_dir '{"path": "/tiny-cpu-one-step-off", "root": "CKPT_ROOT"}')" || exit 3
rooted_4="$("$python_bin" -c "$roots_program" reward.custom_reward_function.path '{"path": "/reward.py", "root": "TINY_ROOT"}')" || exit 3

exec "$python_bin" -m verl.experimental.one_step_off_policy.main_ppo --config-name one_step_off_ppo_trainer "$@" \
  'hydra.searchpath=[pkg://verl.trainer.config]' \
  'trainer.experiment_name="tiny-cpu-one-step-off"' \
  'trainer.project_name="tiny-cpu"' \
  "$rooted_0" \
  "$rooted_1" \
  data.train_batch_size=4 \
  data.max_prompt_length=64 \
  data.max_response_length=16 \
  data.dataloader_num_workers=0 \
  "$rooted_2" \
  actor_rollout_ref.model.use_remove_padding=false \
  '+actor_rollout_ref.model.override_config.attn_implementation="sdpa"' \
  'algorithm.adv_estimator="grpo"' \
  algorithm.use_kl_in_reward=false \
  'actor_rollout_ref.actor.strategy="fsdp2"' \
  actor_rollout_ref.actor.ppo_mini_batch_size=4 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
  actor_rollout_ref.actor.use_kl_loss=false \
  'actor_rollout_ref.rollout.name="vllm"' \
  actor_rollout_ref.rollout.n=2 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.05 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \
  actor_rollout_ref.rollout.max_num_batched_tokens=256 \
  actor_rollout_ref.rollout.max_num_seqs=8 \
  actor_rollout_ref.rollout.max_model_len=128 \
  actor_rollout_ref.rollout.enforce_eager=true \
  actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=16 \
  actor_rollout_ref.rollout.agent.num_workers=1 \
  trainer.total_training_steps=2 \
  trainer.save_freq=1 \
  trainer.test_freq=-1 \
  trainer.val_before_train=false \
  "$rooted_3" \
  'trainer.logger=["console"]' \
  'trainer.resume_mode="disable"' \
  trainer.nnodes=1 \
  trainer.n_gpus_per_node=1 \
  "$rooted_4" \
  'reward.custom_reward_function.name="compute_score"' \
  reward.num_workers=1 \
  +actor_rollout_ref.rollout.enable_sleep_mode=False \
  transfer_queue.backend.SimpleStorage.num_data_storage_units=1 \
  actor_rollout_ref.hybrid_engine=false \
  rollout.nnodes=1 \
  rollout.n_gpus_per_node=1 \
  actor_rollout_ref.rollout.checkpoint_engine.backend=gloo \
  actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=verl_cpu_checkpoint_engine


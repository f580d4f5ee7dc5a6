#!/usr/bin/env bash
#SBATCH --job-name=tutorrl-838c15f905d3e2b4
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --mem=200G
#SBATCH --output=tutorrl-838c15f905d3e2b4-%j.out
#SBATCH --partition=gpu
#SBATCH --requeue
#SBATCH --open-mode=append
# tutorrl export --to slurm: bundle 838c15f905d3e2b4 (sha256:838c15f905d3e2b4fbcd5fd6dbe20e25fb4a41df9f865841cddc6f226ba73fdd)
# experiment chess-tutor-grpo-wandb, verl 0.9.1 (fsdp); 1 node(s) x 7 trainer GPU(s) + 1 reward GPU(s)
# The job checks the sha256 of every bundle file before it starts and refuses a changed bundle.
# Secrets, by name only: WANDB_API_KEY
# The nodes' Python must hold verl 0.9.1; the bundle folder must be on a file system every node shares.
# Submit from the folder holding bundles/838c15f905d3e2b4: sbatch THIS_FILE (a dry run: sbatch THIS_FILE --cfg job)
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
bundle=bundles/838c15f905d3e2b4
# Secrets by name only: set in the environment sbatch passes on, never written here.
missing=()
for name in WANDB_API_KEY; do
  [ -n "${!name:-}" ] || missing+=("$name")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tutorrl: not set in the submitting environment: ${missing[*]}" >&2
  exit 2
fi
# The bundle must be the one exported: the sha256 of each of its files, fixed at export.
if ! (cd "$bundle" && sha256sum --check --strict --quiet >&2) <<'TUTORRL_SHA256'
95b704ca6008f01a024b6c43cd700488cd53b43fe66faeb0fc53e1d6dca5b025  bundle.env
59dfb765052297c0a60e87e16a666a6d57b6993c72cc6c4bb67a738affa499c0  launch.sh
f1618e27eb51ae8ca8ed0aea95cb41f842374e0a550d9c7fd56840f981b95b11  manifest.json
850fff250a55917cc7bcb4f12eae05f464f72c607c7e33f950341b27ff960e75  ray-job.json
b164bc204afd1adf662d1dcb66c508de7ad0c8c4031f6ebd100d9ba700f78a12  spec.toml
TUTORRL_SHA256
then
  echo "tutorrl: $bundle is not bundle sha256:838c15f905d3e2b4fbcd5fd6dbe20e25fb4a41df9f865841cddc6f226ba73fdd (a file differs from the export); refusing to run" >&2
  exit 3
fi
# Where the job's Python has tutorrl, re-derive the bundle from its spec as well.
python_bin="${TUTORRL_PYTHON:-python}"
if "$python_bin" -c 'import tutorrl.compiler' 2>/dev/null; then
  "$python_bin" -m tutorrl verify "$bundle" || exit 3
else
  echo "tutorrl: $python_bin has no tutorrl; bundle 838c15f905d3e2b4 checked by sha256 only" >&2
fi
# Exported before `ray start`: Ray's workers inherit the environment of the node's raylet.
source "$bundle/bundle.env"
TUTORRL_BUNDLE_DIR="$(cd "$bundle" && pwd)"  # apart from `export`, so a failing cd stops the job
export TUTORRL_BUNDLE_DIR
export TUTORRL_RUN_ID="slurm-${SLURM_JOB_ID:-unknown}"
# Ray's token auth, set up by this job alone: a fresh token in a folder of its own (never ~/.ray),
# which every `ray start`, the readiness probe and verl's ray.init() read.
job_dir=$(mktemp -d "$PWD/.tutorrl-slurm-${SLURM_JOB_ID:-job}.XXXXXX")
trap 'rm -rf "$job_dir"' EXIT
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$job_dir/ray-token")
unset RAY_AUTH_TOKEN
export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN_PATH="$job_dir/ray-token"
tutorrl_wait_nodes() {
  for _ in $(seq 1 120); do
    "$python_bin" -c "import sys, ray; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); sys.exit(0 if sum(1 for n in ray.nodes() if n['Alive']) >= int(sys.argv[2]) else 1)" "$1" "$2" 2>/dev/null && return 0
    sleep 5
  done
  echo "tutorrl: fewer than $2 Ray nodes joined $1 in 600 s" >&2
  exit 4
}
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head_node=${nodes[0]}
# The head's address: the head node's own, unless TUTORRL_RAY_HEAD_IP names another (a network of
# several; on one machine a loopback address other than 127.0.0.1, which `ray start` would replace
# by the machine's routable address).
if [ -n "${TUTORRL_RAY_HEAD_IP:-}" ]; then
  head_ip=$TUTORRL_RAY_HEAD_IP
else
  head_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address)
  head_ip=${head_ip%% *}  # the first address where a node has several
fi
# A node shared with other jobs: TUTORRL_RAY_PORT and TUTORRL_RAY_HEAD_OPTIONS (e.g. --dashboard-port=N)
# move the head off Ray's default ports.
port=${TUTORRL_RAY_PORT:-6379}
srun --nodes=1 --ntasks=1 -w "$head_node" \
  ray start --head --disable-usage-stats --node-ip-address="$head_ip" --port="$port" \
  --num-cpus="$SLURM_CPUS_PER_TASK" --num-gpus=8 ${TUTORRL_RAY_HEAD_OPTIONS:-} --block &
for node in "${nodes[@]:1}"; do
  srun --nodes=1 --ntasks=1 -w "$node" \
    ray start --address="$head_ip:$port" --disable-usage-stats \
    --num-cpus="$SLURM_CPUS_PER_TASK" --num-gpus=8 --block &
done
tutorrl_wait_nodes "$head_ip:$port" 1
# tutorrl-resume: the arguments a restarted job gives launch.sh (verl's resume keys).
tutorrl_resume_args() {
  local restarts=${SLURM_RESTART_COUNT:-0} dir
  resume=()
  [ "$restarts" -gt 0 ] || return 0
  if [ "$restarts" -gt 2 ]; then
    echo "tutorrl: restart $restarts of at most 2; not starting again" >&2
    exit 1
  fi
  if "$python_bin" -c 'import tutorrl.export.resume_node' 2>/dev/null; then
    dir=$("$python_bin" -m tutorrl.export.resume_node "$bundle") || exit 3
    if [ -n "$dir" ]; then
      resume=('trainer.resume_mode="resume_path"' trainer.resume_from_path="$dir")
    else
      resume=('trainer.resume_mode="disable"')
    fi
  else
    echo "tutorrl: restart $restarts of 2: $python_bin has no tutorrl, so no checkpoint's evidence is"\
" checked; verl resumes from its newest checkpoint folder, whatever its files" >&2
    resume=('trainer.resume_mode="auto"')
  fi
}
# tutorrl-resume-end
tutorrl_resume_args
status=0
# The resume arguments after the job's own: verl's command line is Hydra's argparse, whose overrides are
# one run of positionals, so an option such as the dry run's --cfg job must come before them all.
RAY_ADDRESS="$head_ip:$port" srun --overlap --nodes=1 --ntasks=1 -w "$head_node" \
  bash "$bundle/launch.sh" "$@" ${resume[@]+"${resume[@]}"} || status=$?
# A failed job goes back in the queue (#SBATCH --requeue covers a lost node or preemption); launch.sh's
# refusals (2, 3) would be refused again.
case $status in
  0) exit 0 ;;
  2|3) echo "tutorrl: launch.sh refused the job (exit $status); not requeued" >&2; exit "$status" ;;
esac
if [ "${SLURM_RESTART_COUNT:-0}" -lt 2 ]; then
  echo "tutorrl: the job failed (exit $status); requeued, restart $((${SLURM_RESTART_COUNT:-0} + 1)) of 2" >&2
  # Slurm refuses a job submitted with --no-requeue ("presently disabled"): the job then says so and ends
  # with launch.sh's status (under set -e it would end with scontrol's, having said it was requeued).
  scontrol requeue "$SLURM_JOB_ID" || echo "tutorrl: Slurm did not requeue the job; it ends failed" >&2
else
  echo "tutorrl: the job failed (exit $status) after 2 restart(s); not requeued" >&2
fi
exit "$status"

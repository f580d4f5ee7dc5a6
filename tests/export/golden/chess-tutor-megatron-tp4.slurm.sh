#!/usr/bin/env bash
#SBATCH --job-name=tutorrl-892823ae30015ab7
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --mem=200G
#SBATCH --output=tutorrl-892823ae30015ab7-%j.out
#SBATCH --partition=gpu
# tutorrl export --to slurm: bundle 892823ae30015ab7 (sha256:892823ae30015ab71a1338312be0797da0224ecdc6e9223f42d65ede88343b35)
# experiment chess-tutor-megatron-tp4, verl 0.9.1 (megatron); 2 node(s) x 8 trainer GPU(s) + 0 reward GPU(s)
# The job checks the sha256 of every bundle file before it starts and refuses a changed bundle.
# The nodes' Python must hold verl 0.9.1; the bundle folder must be on a file system every node shares.
# Submit from the folder holding bundles/892823ae30015ab7: sbatch THIS_FILE (a dry run: sbatch THIS_FILE --cfg job)
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
bundle=bundles/892823ae30015ab7
# The bundle must be the one exported: the sha256 of each of its files, fixed at export.
if ! (cd "$bundle" && sha256sum --check --strict --quiet >&2) <<'TUTORRL_SHA256'
ae68b2d3548c4f4a4d82385f8b7582d8abef03afb3f74a7d74b85234ddde1aab  bundle.env
64cefae1944a2ce9d3b1b7db4b927b768c529c3e0ce2eac5904e3b40b1912e6f  launch.sh
eaec07741f248c09fd950a55ea0bbe960e30fb4c7aa06c8252ba177ed5b69e78  manifest.json
96590729aee86ab3a8b79e3e82b0e8dc338a86987b042cc586cb511ce56444be  ray-job.json
194d03e7c166f9e9d8e899b99ad369d1c0f10b08fdfabb0fcb9d27c9117976d3  spec.toml
TUTORRL_SHA256
then
  echo "tutorrl: $bundle is not bundle sha256:892823ae30015ab71a1338312be0797da0224ecdc6e9223f42d65ede88343b35 (a file differs from the export); refusing to run" >&2
  exit 3
fi
# Where the job's Python has tutorrl, re-derive the bundle from its spec as well.
python_bin="${TUTORRL_PYTHON:-python}"
if "$python_bin" -c 'import tutorrl.compiler' 2>/dev/null; then
  "$python_bin" -m tutorrl verify "$bundle" || exit 3
else
  echo "tutorrl: $python_bin has no tutorrl; bundle 892823ae30015ab7 checked by sha256 only" >&2
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
tutorrl_wait_nodes "$head_ip:$port" 2
RAY_ADDRESS="$head_ip:$port" srun --overlap --nodes=1 --ntasks=1 -w "$head_node" \
  bash "$bundle/launch.sh" "$@"

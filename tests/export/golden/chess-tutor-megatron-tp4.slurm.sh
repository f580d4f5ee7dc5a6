#!/usr/bin/env bash
#SBATCH --job-name=tutorrl-f63a50f86a3f4588
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --output=tutorrl-f63a50f86a3f4588-%j.out
#SBATCH --partition=gpu
# tutorrl export --to slurm: bundle f63a50f86a3f4588 (sha256:f63a50f86a3f45884e636cfd9f09ec84024410ebc0b957eab6cb3121997777d0)
# experiment chess-tutor-megatron-tp4, verl 0.9.1 (megatron); 2 node(s) x 8 trainer GPU(s) + 0 reward GPU(s)
# The job checks the sha256 of every bundle file before it starts and refuses a changed bundle.
# The nodes' Python must hold verl 0.9.1; the bundle folder must be on a file system every node shares.
# Submit from the folder holding bundles/f63a50f86a3f4588: sbatch THIS_FILE
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
bundle=bundles/f63a50f86a3f4588
# The bundle must be the one exported: the sha256 of each of its files, fixed at export.
if ! (cd "$bundle" && sha256sum --check --strict --quiet >&2) <<'TUTORRL_SHA256'
ae68b2d3548c4f4a4d82385f8b7582d8abef03afb3f74a7d74b85234ddde1aab  bundle.env
c94993c4dbd975dfc103d042e3a5c63f17117392e92e471528d9a857b97996d7  launch.sh
fc6c28a6bc6373280941308bde53ff0d22c509755635adc3ac79b109d5a45a5c  manifest.json
d618b1654338bc2e899e8c699111519f599315b21be25922cd528722561c90cc  ray-job.json
194d03e7c166f9e9d8e899b99ad369d1c0f10b08fdfabb0fcb9d27c9117976d3  spec.toml
TUTORRL_SHA256
then
  echo "tutorrl: $bundle is not bundle sha256:f63a50f86a3f45884e636cfd9f09ec84024410ebc0b957eab6cb3121997777d0 (a file differs from the export); refusing to run" >&2
  exit 3
fi
# Where the job's Python has tutorrl, re-derive the bundle from its spec as well.
python_bin="${TUTORRL_PYTHON:-python}"
if "$python_bin" -c 'import tutorrl.compiler' 2>/dev/null; then
  "$python_bin" -m tutorrl verify "$bundle" || exit 3
else
  echo "tutorrl: $python_bin has no tutorrl; bundle f63a50f86a3f4588 checked by sha256 only" >&2
fi
# Exported before `ray start`: Ray's workers inherit the environment of the node's raylet.
source "$bundle/bundle.env"
export TUTORRL_BUNDLE_DIR="$(cd "$bundle" && pwd)"
export TUTORRL_RUN_ID="slurm-${SLURM_JOB_ID:-unknown}"
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
head_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address)
head_ip=${head_ip%% *}  # the first address where a node has several
port=${TUTORRL_RAY_PORT:-6379}
cpus=(${SLURM_CPUS_PER_TASK:+--num-cpus="$SLURM_CPUS_PER_TASK"})
srun --nodes=1 --ntasks=1 -w "$head_node" \
  ray start --head --node-ip-address="$head_ip" --port="$port" "${cpus[@]}" --num-gpus=8 --block &
for node in "${nodes[@]:1}"; do
  srun --nodes=1 --ntasks=1 -w "$node" \
    ray start --address="$head_ip:$port" "${cpus[@]}" --num-gpus=8 --block &
done
tutorrl_wait_nodes "$head_ip:$port" 2
RAY_ADDRESS="$head_ip:$port" srun --overlap --nodes=1 --ntasks=1 -w "$head_node" \
  bash "$bundle/launch.sh"

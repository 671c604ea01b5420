#!/usr/bin/env bash
# Plan a training run for a pool of Kubernetes GPU nodes and start it with Kubeflow.
#
#   NODES=4 GPUS_PER_NODE=8 GPU=H100-80GB examples/kubernetes/submit_and_apply.sh [trainjob|pytorchjob]
#   NODES=4 examples/kubernetes/submit_and_apply.sh --print-cluster   # the cluster it asks about
#
# `autopar submit --wait --format kubernetes` asks the autopar service for the fastest plan on
# NODES nodes of GPUS_PER_NODE GPUs, waits for the search and writes the best plan as a Kubeflow
# Trainer TrainJob (trainer.kubeflow.org/v1alpha1) and a training-operator PyTorchJob
# (kubeflow.org/v1), one pod per node; kubectl applies one of them.
#
# Needs: the `autopar` CLI, kubectl for the cluster, a Kubeflow Trainer (or training-operator)
# install, and an image with the framework and your data. To plan and launch a stored plan
# instead, see export_and_apply.sh.
set -euo pipefail

KIND=${1:-trainjob}
export AUTOPAR_URL=${AUTOPAR_URL:-http://127.0.0.1:8000}  # AUTOPAR_API_KEY too if it asks
MODEL=${MODEL:-llama3-8b}
TRAINING=${TRAINING:-llama3-8k}
GPU=${GPU:-H100-80GB}
NODES=${NODES:-2}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
FRAMEWORK=${FRAMEWORK:-torchtitan}           # megatron | deepspeed | torchtitan
IMAGE=${IMAGE:-ghcr.io/pytorch/torchtitan:latest}
OUT=${OUT:-autopar-k8s}

cluster_json() {
    printf '{"name": "k8s-pool", "groups": [{"name": "pool", "gpu": "%s", "num_nodes": %d, "gpus_per_node": %d}]}\n' \
        "$GPU" "$NODES" "$GPUS_PER_NODE"
}
if [[ $KIND == --print-cluster ]]; then
    cluster_json
    exit 0
fi
case $KIND in
    trainjob|pytorchjob) ;;
    *) echo "usage: $0 [trainjob|pytorchjob|--print-cluster]" >&2; exit 2 ;;
esac

mkdir -p "$OUT"
cluster_json > "$OUT/cluster.json"
# Exit status 3: no plan fits; 2: the service refused (a plan over several node groups has no
# Kubernetes export); 4: the search failed; 5: the service is unreachable.
autopar submit --model "$MODEL" --training "$TRAINING" --cluster "$OUT/cluster.json" \
    --timeout-s 120 --wait --format kubernetes --framework "$FRAMEWORK" --image "$IMAGE" \
    --out "$OUT"
kubectl apply -f "$OUT/$KIND.yaml"
echo "watch it with: kubectl get ${KIND}s" >&2

#!/usr/bin/env bash
# Run a stored autopar plan on Kubernetes with Kubeflow.
#
#   examples/kubernetes/export_and_apply.sh PLAN_ID [trainjob|pytorchjob]
#
# PLAN_ID is a plan a search found (GET /v1/searches/{id}/plans). `autopar export --format
# kubernetes` writes two manifests for it, one pod per node: a Kubeflow Trainer TrainJob
# (trainer.kubeflow.org/v1alpha1, runtime torch-distributed) and a training-operator PyTorchJob
# (kubeflow.org/v1). Each pod writes the framework's files and runs torchrun for its node with
# the rank and rendezvous the operator sets. Apply one of them.
#
# Needs: the `autopar` CLI, kubectl for the cluster, a Kubeflow Trainer (or training-operator)
# install, and a container image with the framework (Megatron-LM at $MEGATRON_LM,
# Megatron-DeepSpeed, or torchtitan) and your data. Where the server requires API keys, export
# AUTOPAR_API_KEY (autopar keys create) first; nothing else here is a secret.
set -euo pipefail

PLAN_ID=${1:?usage: $0 PLAN_ID [trainjob|pytorchjob]}
KIND=${2:-trainjob}
AUTOPAR_URL=${AUTOPAR_URL:-http://127.0.0.1:8000}
IMAGE=${IMAGE:-nvcr.io/nvidia/nemo:25.04}   # an image that holds the framework
FRAMEWORK=${FRAMEWORK:-}                     # megatron | deepspeed | torchtitan; empty: the
                                             # first framework that can launch the plan
OUT=${OUT:-autopar-k8s-$PLAN_ID}

args=(--format kubernetes --url "$AUTOPAR_URL" --image "$IMAGE" --out "$OUT")
if [[ -n $FRAMEWORK ]]; then
    args+=(--framework "$FRAMEWORK")
fi
autopar export "$PLAN_ID" "${args[@]}"

# A plan over several node groups has no Kubernetes export (one pod template for every node):
# `autopar export` says so and stops above; use --format slurm for it.
kubectl apply -f "$OUT/$KIND.yaml"
echo "watch it with: kubectl get ${KIND}s"

"""Kubernetes: a Kubeflow ``PyTorchJob`` (training-operator, ``kubeflow.org/v1``) and a Kubeflow
Trainer ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``, the ``torch-distributed`` runtime).

Each pod is one node: its container writes the framework's files, then runs the node script,
whose ``torchrun`` takes the node rank and rendezvous the operators set (``PET_NODE_RANK``,
``PET_MASTER_ADDR``, ``PET_MASTER_PORT``; a PyTorchJob also sets ``RANK`` = the pod's index and
``MASTER_ADDR``/``MASTER_PORT``). PyTorchJob fields: ``spec.nprocPerNode``,
``spec.pytorchReplicaSpecs.{Master,Worker}`` (container name ``pytorch``); TrainJob fields
(``pkg/apis/trainer/v1alpha1/trainjob_types.go``): ``spec.runtimeRef.name``,
``spec.trainer.{image, command, numNodes, numProcPerNode, resourcesPerNode}``.

Both run one pod template on every node, so a plan over several node groups has no Kubernetes
export here (use Slurm's heterogeneous job).
"""

from typing import Any

import yaml

from app.exports.layout import ExportError, LaunchLayout
from app.exports.schemas import ExportFile
from app.exports.scripts import comment_block, plan_summary
from app.exports.slurm import heredoc, job_name

PYTORCHJOB_FILE = "pytorchjob.yaml"
TRAINJOB_FILE = "trainjob.yaml"
NODE_SCRIPT = "launch_node.sh"
RUN_DIR = "/tmp/autopar"
DEFAULT_IMAGE = "your-registry/your-training-image:latest"
GPU_RESOURCE = "nvidia.com/gpu"


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the container's script) as YAML literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def check(layout: LaunchLayout) -> None:
    if len(layout.blocks) > 1:
        groups = ", ".join(dict.fromkeys(block.group for block in layout.blocks))
        raise ExportError(
            "format",
            "a PyTorchJob or TrainJob runs one pod template on every node; this plan spans "
            f"node groups {groups} (export it with format slurm: a heterogeneous job)",
        )


def container_script(node_script: str, configs: list[ExportFile]) -> str:
    lines = [
        "set -euo pipefail",
        f"export RUN_DIR={RUN_DIR}",
        'mkdir -p "$RUN_DIR"',
        *(heredoc(f'"$RUN_DIR/{config.name}"', config.content) for config in configs),
        heredoc(f'"$RUN_DIR/{NODE_SCRIPT}"', node_script),
        f'exec bash "$RUN_DIR/{NODE_SCRIPT}" "$@"',
    ]
    return "\n".join(lines) + "\n"


def _name(layout: LaunchLayout) -> str:
    """An RFC 1035 label (TrainJob requires one): lowercase alphanumerics and '-'."""
    name = "".join(c if c.isalnum() else "-" for c in job_name(layout).lower()).strip("-")
    return name[:63].rstrip("-") or "autopar"


def pytorchjob(layout: LaunchLayout, script: str, image: str) -> dict[str, Any]:
    procs = layout.blocks[0].procs_per_node

    def replica(count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": "OnFailure",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "pytorch",  # the operator looks for this container name
                            "image": image,
                            "command": ["/bin/bash", "-c", script],
                            "resources": {"limits": {GPU_RESOURCE: procs}},
                            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                        }
                    ],
                    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                }
            },
        }

    specs = {"Master": replica(1)}
    if layout.num_nodes > 1:
        specs["Worker"] = replica(layout.num_nodes - 1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": _name(layout)},
        "spec": {"nprocPerNode": str(procs), "pytorchReplicaSpecs": specs},
    }


def trainjob(layout: LaunchLayout, script: str, image: str) -> dict[str, Any]:
    procs = layout.blocks[0].procs_per_node
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": _name(layout)},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "image": image,
                "command": ["/bin/bash", "-c", script],
                "numNodes": layout.num_nodes,
                "numProcPerNode": procs,
                "resourcesPerNode": {"limits": {GPU_RESOURCE: procs}},
            },
        },
    }


def _document(header: list[str], body: dict[str, Any]) -> str:
    return (
        comment_block(header)
        + "\n"
        + yaml.dump(body, Dumper=_BlockDumper, sort_keys=False, width=100)
    )


def files(
    layout: LaunchLayout, node_script: str, configs: list[ExportFile], *, image: str | None
) -> list[ExportFile]:
    image = image or DEFAULT_IMAGE
    script = container_script(node_script, configs)
    header = [*plan_summary(layout), f"image: {image} (must hold {layout.framework})"]
    if len(layout.cluster.groups) > 1:
        header.append(
            f"schedule the pods on node group '{layout.blocks[0].group}' (add its nodeSelector)"
        )
    return [
        ExportFile(
            name=PYTORCHJOB_FILE,
            media_type="application/yaml",
            content=_document(
                [f"autopar export: Kubeflow PyTorchJob, {layout.framework} launcher", *header],
                pytorchjob(layout, script, image),
            ),
        ),
        ExportFile(
            name=TRAINJOB_FILE,
            media_type="application/yaml",
            content=_document(
                [
                    f"autopar export: Kubeflow Trainer TrainJob, {layout.framework} launcher",
                    *header,
                ],
                trainjob(layout, script, image),
            ),
        ),
    ]


def launch_command(layout: LaunchLayout) -> str:
    del layout
    return f"kubectl apply -f {PYTORCHJOB_FILE}   # or: kubectl apply -f {TRAINJOB_FILE}"

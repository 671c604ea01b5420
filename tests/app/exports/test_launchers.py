"""Slurm and Kubernetes exports parsed back: the batch directives and the Kubeflow manifests give
the plan's node and GPU counts, a heterogeneous plan is one Slurm heterogeneous job whose
components follow its node groups in rank order, and the launcher each wraps reads the same
degrees and batch as the framework's own export."""

import json
import re
import tomllib
from typing import Any

import pytest
import yaml

from app.exports import ExportError
from tests.support.exports import (
    Scenario,
    bash_arrays,
    deepspeed_parser,
    file,
    get,
    heredocs,
    launch_words,
    megatron_stage_layers,
    nproc_for,
    parse_megatron,
    torchrun_args,
    torchtitan_dp,
)


def sbatch_components(script: str) -> list[dict[str, str]]:
    """The #SBATCH options of each heterogeneous-job component (one for a plain job), up to
    the first command line, as sbatch reads them."""
    components: list[dict[str, str]] = [{}]
    for line in script.splitlines()[1:]:
        if not line.startswith("#"):
            break
        if line.strip() == "#SBATCH hetjob":
            components.append({})
            continue
        match = re.match(r"#SBATCH --([\w-]+)(?:=(\S+))?$", line)
        if match:
            components[-1][match.group(1)] = match.group(2) or ""
        else:
            assert not line.startswith("#SBATCH"), f"unparsed directive {line!r}"
    return components


def srun_line(script: str) -> list[str]:
    (line,) = [line for line in script.splitlines() if line.startswith("srun ")]
    return line.split()


def node_ranks(components: list[dict[str, str]]) -> list[int]:
    """SLURM_PROCID of each node's task (one per node): numbered across the components."""
    return list(range(sum(int(c["nodes"]) for c in components)))


# Slurm -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "framework"),
    [
        ("dense-3d", None),
        ("uneven-405b", "deepspeed"),
        ("fsdp", "torchtitan"),
        ("moe-folding", None),
    ],
)
def test_a_slurm_job_holds_the_plan(name: str, framework: str | None) -> None:
    case = get(name)
    result = case.export("slurm", framework=framework)
    script = file(result, "autopar.sbatch")
    (component,) = sbatch_components(script)
    nodes, gpus = int(component["nodes"]), int(component["gpus-per-node"])
    assert component["ntasks-per-node"] == "1"  # one torchrun per node
    assert nodes * gpus == case.estimate.num_gpus == result.num_gpus
    assert "--het-group" not in " ".join(srun_line(script))
    documents = heredocs(script)
    node_script = documents.pop("launch_node.sh")
    launch = torchrun_args(launch_words(node_script))
    assert (int(launch.nnodes), int(launch.nproc_per_node)) == (nodes, gpus)
    assert launch.rdzv_backend == "static"  # node ranks in the order the plan was placed
    args = launch.training_script_args
    plan = case.plan
    if result.framework == "megatron":
        ns, _ = parse_megatron(node_script)
        assert ns.tensor_model_parallel_size == plan.tp and ns.global_batch_size == 512
    elif result.framework == "deepspeed":
        config = json.loads(documents["ds_config.json"])
        assert config["train_batch_size"] == (
            config["train_micro_batch_size_per_gpu"]
            * config["gradient_accumulation_steps"]
            * nodes
            * gpus
            // (plan.tp * plan.pp)
        )
        ns = deepspeed_parser().parse_args(args)
        assert ns.deepspeed_config == "/run/ds_config.json"  # written into $RUN_DIR
        assert ns.pipeline_model_parallel_size == plan.pp
    else:
        config = tomllib.loads(documents["torchtitan.toml"])
        assert torchtitan_dp(config["parallelism"]) == plan.dp
        assert args == ["--job.config_file", "/run/torchtitan.toml"]


def test_a_heterogeneous_plan_is_one_heterogeneous_job() -> None:
    case = get("heterogeneous")
    result = case.export("slurm")
    script = file(result, "autopar.sbatch")
    components = sbatch_components(script)
    cluster = {group.name: group for group in case.cluster.groups}
    stages = case.plan.stages or []
    # One component per run of nodes of one group, in stage (rank) order.
    expected: list[tuple[str, int]] = []
    for stage in stages:
        ranks = (stage.tp or case.plan.tp) * case.plan.dp * case.plan.cp
        name = stage.group or ""
        if expected and expected[-1][0] == name:
            expected[-1] = (name, expected[-1][1] + ranks)
        else:
            expected.append((name, ranks))
    assert [c["constraint"] for c in components] == [name for name, _ in expected]
    for component, (name, ranks) in zip(components, expected, strict=True):
        nodes, gpus = int(component["nodes"]), int(component["gpus-per-node"])
        assert nodes * gpus == ranks
        assert gpus <= cluster[name].gpus_per_node and nodes <= cluster[name].num_nodes
    assert sum(int(c["nodes"]) * int(c["gpus-per-node"]) for c in components) == 256
    assert srun_line(script)[1] == "--het-group=" + ",".join(str(i) for i in range(len(components)))
    assert "SLURM_JOB_NODELIST_HET_GROUP_0" in script

    node_script = heredocs(script)["launch_node.sh"]
    # Every node's torchrun agrees on the world, and its share matches its component.
    offset = 0
    for component in components:
        for node in range(int(component["nodes"])):
            launch = torchrun_args(launch_words(node_script, node_rank=offset + node))
            assert int(launch.nnodes) == len(node_ranks(components))
            assert int(launch.nproc_per_node) == int(component["gpus-per-node"])
            assert launch.node_rank == offset + node
        offset += int(component["nodes"])
    ns, _ = parse_megatron(node_script)
    assert megatron_stage_layers(ns) == [stage.num_layers for stage in stages]


def test_node_groups_with_different_node_sizes_get_their_own_process_count() -> None:
    """A group of 4-GPU nodes after one of 8-GPU nodes: torchrun runs 4 processes there."""
    case = get("heterogeneous")
    groups = [
        group.model_copy(update={"num_nodes": 16, "gpus_per_node": 4})
        if group.name == "a100-40"
        else group
        for group in case.cluster.groups
    ]
    cluster = case.cluster.model_copy(update={"groups": groups})
    odd = Scenario(case.model, case.training, cluster, case.plan)
    result = odd.export("slurm")
    script = file(result, "autopar.sbatch")
    components = sbatch_components(script)
    assert [(c["nodes"], c["gpus-per-node"]) for c in components] == [
        ("8", "8"),
        ("16", "8"),
        ("16", "4"),
    ]
    node_script = heredocs(script)["launch_node.sh"]
    assert [nproc_for(node_script, rank) for rank in (0, 7, 8, 23, 24, 39)] == [8, 8, 8, 8, 4, 4]
    assert result.num_gpus == 256


# Kubernetes ------------------------------------------------------------------------------------
def manifests(result: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    (pytorchjob,) = yaml.safe_load_all(file(result, "pytorchjob.yaml"))
    (trainjob,) = yaml.safe_load_all(file(result, "trainjob.yaml"))
    return pytorchjob, trainjob


@pytest.mark.parametrize(
    ("name", "framework"),
    [("dense-3d", "megatron"), ("fsdp", "torchtitan"), ("fsdp", "deepspeed"), ("hsdp", None)],
)
def test_kubeflow_jobs_hold_the_plan(name: str, framework: str | None) -> None:
    case = get(name)
    result = case.export("kubernetes", framework=framework, image="registry.local/train:1")
    pytorchjob, trainjob = manifests(result)
    gpus = case.estimate.num_gpus

    assert pytorchjob["apiVersion"] == "kubeflow.org/v1" and pytorchjob["kind"] == "PyTorchJob"
    replicas = pytorchjob["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] == 1
    pods = 1 + replicas.get("Worker", {"replicas": 0})["replicas"]
    (container,) = replicas["Master"]["template"]["spec"]["containers"]
    assert container["name"] == "pytorch" and container["image"] == "registry.local/train:1"
    per_pod = container["resources"]["limits"]["nvidia.com/gpu"]
    assert pods * per_pod == gpus
    assert int(pytorchjob["spec"]["nprocPerNode"]) == per_pod

    assert trainjob["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert trainjob["kind"] == "TrainJob"
    trainer = trainjob["spec"]["trainer"]
    assert trainjob["spec"]["runtimeRef"]["name"] == "torch-distributed"
    assert trainer["numNodes"] * trainer["numProcPerNode"] == gpus
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == trainer["numProcPerNode"]
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", trainjob["metadata"]["name"])

    script = trainer["command"][-1]
    assert script == container["command"][-1]
    documents = heredocs(script)
    node_script = documents.pop("launch_node.sh")
    launch = torchrun_args(launch_words(node_script))
    assert int(launch.nnodes) == trainer["numNodes"] == pods
    assert int(launch.nproc_per_node) == per_pod
    if result.framework == "torchtitan":
        config = tomllib.loads(documents["torchtitan.toml"])
        assert torchtitan_dp(config["parallelism"]) == case.plan.dp
    elif result.framework == "deepspeed":
        config = json.loads(documents["ds_config.json"])
        assert config["train_batch_size"] == case.training.global_batch_size
    else:
        assert bash_arrays(node_script)["PARALLEL_ARGS"][:2] == [
            "--tensor-model-parallel-size",
            str(case.plan.tp),
        ]


def test_kubernetes_refuses_a_plan_over_several_node_groups() -> None:
    with pytest.raises(ExportError, match="one pod template on every node") as error:
        get("heterogeneous").export("kubernetes")
    assert error.value.field == "format"

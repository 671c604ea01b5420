"""``GET /v1/plans/{id}/export``: a stored plan as launch files, for the search's model, cluster
and training at the batch the plan was priced at; a framework that cannot launch it is a 422
naming the setting."""

import hashlib
import json
import tomllib
from typing import Any

import httpx
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from app.exports import ExportResult
from app.orm import PlanRow
from tests.app.service.api_helpers import assert_error
from tests.support.exports import file, parse_megatron

SEARCH = {
    "preset": "llama3-70b",
    "training": {"seq_length": 8192, "global_batch_size": 512},
    "cluster_id": "dgx-h100-16n",
    "sampler": "exhaustive",
    "constraints": {"tp": 8, "pp": 4},
}
DENSE_3D = {
    "dp": 4,
    "tp": 8,
    "pp": 4,
    "micro_batch_size": 1,
    "zero_stage": 1,
    "recompute": "selective",
}
FSDP = {"dp": 32, "tp": 4, "pp": 1, "micro_batch_size": 1, "zero_stage": 3, "recompute": "full"}


def store_plan(
    client: httpx.Client,
    db_connection: Connection,
    plan: dict[str, Any],
    *,
    global_batch_size: int | None = None,
) -> str:
    """A queued search (the API validates and stores its request) and one plan row of it, as
    a worker would have stored it."""
    response = client.post("/v1/searches", json=SEARCH)
    assert response.status_code == 202, response.text
    with Session(bind=db_connection, join_transaction_mode="create_savepoint") as session:
        row = PlanRow(
            search_id=response.json()["id"],
            rank=1,
            plan=plan,
            global_batch_size=global_batch_size,
            plan_hash=hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest(),
            feasible=True,
        )
        session.add(row)
        session.commit()
        return row.id


def test_a_stored_plan_exports_for_megatron(client: httpx.Client, db_connection: Connection):
    plan_id = store_plan(client, db_connection, DENSE_3D)
    response = client.get(f"/v1/plans/{plan_id}/export", params={"format": "megatron"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["plan_id"] == plan_id
    export = ExportResult.model_validate({k: v for k, v in body.items() if k != "plan_id"})
    assert export.framework == "megatron" and export.launchable_by == ["megatron"]
    assert export.num_gpus == 128 and export.num_nodes == 16
    assert (
        export.global_batch_size == export.micro_batch_size * export.gradient_accumulation_steps * 4
    )
    ns, launch = parse_megatron(file(export, "launch_megatron.sh"))
    assert (ns.tensor_model_parallel_size, ns.pipeline_model_parallel_size) == (8, 4)
    assert ns.num_layers == 80 and ns.global_batch_size == 512
    assert int(launch.nnodes) * int(launch.nproc_per_node) == 128


def test_the_plans_own_batch_is_exported(client: httpx.Client, db_connection: Connection):
    """A search over several global batch sizes stores each plan with the one it priced."""
    plan_id = store_plan(client, db_connection, FSDP, global_batch_size=256)
    response = client.get(f"/v1/plans/{plan_id}/export", params={"format": "torchtitan"})
    assert response.status_code == 200, response.text
    export = ExportResult.model_validate(
        {k: v for k, v in response.json().items() if k != "plan_id"}
    )
    config = tomllib.loads(file(export, "torchtitan.toml"))
    assert config["training"]["global_batch_size"] == 256
    assert config["parallelism"]["data_parallel_shard_degree"] == 32
    assert export.gradient_accumulation_steps == 256 // 32


def test_slurm_wraps_the_chosen_framework(client: httpx.Client, db_connection: Connection):
    plan_id = store_plan(client, db_connection, FSDP)
    response = client.get(
        f"/v1/plans/{plan_id}/export", params={"format": "slurm", "framework": "torchtitan"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["framework"] == "torchtitan"
    assert "#SBATCH --nodes=16" in body["files"][0]["content"]


def test_a_framework_that_cannot_launch_the_plan_is_422(
    client: httpx.Client, db_connection: Connection
) -> None:
    plan_id = store_plan(client, db_connection, FSDP)
    response = client.get(f"/v1/plans/{plan_id}/export", params={"format": "megatron"})
    error = assert_error(response, 422, "not_launchable")
    (detail,) = error["details"]
    assert detail["field"] == "format"
    assert detail["reason"].startswith("megatron cannot launch this plan: zero_stage: Megatron")
    assert "optimizer states" in error["message"]

    response = client.get(
        f"/v1/plans/{plan_id}/export", params={"format": "slurm", "framework": "megatron"}
    )
    error = assert_error(response, 422, "not_launchable")
    assert error["details"][0]["field"] == "framework"


def test_bad_requests(client: httpx.Client, db_connection: Connection) -> None:
    assert_error(client.get(f"/v1/plans/{'0' * 32}/export?format=megatron"), 404, "not_found")
    plan_id = store_plan(client, db_connection, DENSE_3D)
    assert_error(client.get(f"/v1/plans/{plan_id}/export"), 422, "invalid_input")
    error = assert_error(client.get(f"/v1/plans/{plan_id}/export?format=pdf"), 422, "invalid_input")
    assert "format" in error["message"]
    assert_error(
        client.get(f"/v1/plans/{plan_id}/export?format=slurm&framework=jax"), 422, "invalid_input"
    )

"""/v1/clusters and /v1/gpus: stored cluster specs checked against the GPU catalog."""

from typing import Any

import httpx

from costmodel.catalog import list_presets
from costmodel.hardware import CATALOG
from tests.app.service.api_helpers import assert_error, error_fields

POD = {
    "name": "lab-pod",
    "groups": [{"name": "h100", "gpu": "H100-80GB", "num_nodes": 2, "gpus_per_node": 8}],
}


def test_create_get_list_delete(client: httpx.Client) -> None:
    created = client.post("/v1/clusters", json=POD)
    assert created.status_code == 201, created.text
    record = created.json()
    assert record["spec"]["groups"][0]["zone"] == "default"  # validated, defaults filled in
    assert client.get(f"/v1/clusters/{record['id']}").json() == record
    assert client.get("/v1/clusters/lab-pod").json() == record
    listed = client.get("/v1/clusters", params={"name": "lab"}).json()
    assert [item["id"] for item in listed["items"]] == [record["id"]]
    assert client.delete("/v1/clusters/lab-pod").status_code == 204
    assert_error(client.get(f"/v1/clusters/{record['id']}"), 404, "not_found")


def test_inline_gpu_spec_is_accepted(client: httpx.Client) -> None:
    custom = {
        "name": "custom-gpu-pod",
        "groups": [
            {
                "name": "x",
                "gpu": {"name": "X1", "bf16_tflops": 500, "hbm_gib": 96, "hbm_GBps": 4000},
                "num_nodes": 1,
            }
        ],
    }
    response = client.post("/v1/clusters", json=custom)
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["groups"][0]["gpu"]["name"] == "X1"


def test_unknown_gpu_names_the_field(client: httpx.Client, snapshot: Any) -> None:
    before = snapshot()
    bad = {**POD, "groups": [{**POD["groups"][0], "gpu": "H999"}]}
    error = assert_error(client.post("/v1/clusters", json=bad), 422)
    assert error_fields(error) == ["groups[0].gpu"]
    assert "H100-80GB" in error["details"][0]["reason"]  # lists the choices
    assert snapshot() == before


def test_name_conflict_and_preset_protection(client: httpx.Client, snapshot: Any) -> None:
    assert client.post("/v1/clusters", json=POD).status_code == 201
    before = snapshot()
    assert_error(client.post("/v1/clusters", json=POD), 409, "conflict")
    assert_error(client.post("/v1/clusters", json={**POD, "name": "dgx-a100-8n"}), 409)
    assert_error(client.delete("/v1/clusters/dgx-a100-8n"), 409, "conflict")
    assert snapshot() == before


def test_cluster_presets_are_stored(client: httpx.Client) -> None:
    body = client.get("/v1/clusters", params={"preset": True, "limit": 200}).json()
    assert sorted(item["name"] for item in body["items"]) == list_presets("cluster")
    assert body["next_cursor"] is None


def test_gpus_list_the_catalog(client: httpx.Client) -> None:
    first = client.get("/v1/gpus", params={"limit": 4}).json()
    rest = client.get("/v1/gpus", params={"limit": 200, "cursor": first["next_cursor"]}).json()
    names = [item["name"] for item in first["items"] + rest["items"]]
    assert sorted(names) == sorted(CATALOG) and len(names) == len(set(names))
    h100 = client.get("/v1/gpus/H100-80GB").json()
    assert h100["spec"] == CATALOG["H100-80GB"].model_dump(mode="json")
    assert h100["is_preset"] is True
    assert [g["name"] for g in client.get("/v1/gpus?name=a100").json()["items"]] == [
        "A100-40GB",
        "A100-80GB",
    ]
    assert_error(client.get("/v1/gpus/H999"), 404, "not_found")


def test_names_match_ignoring_case_when_unambiguous(client: httpx.Client) -> None:
    assert client.get("/v1/gpus/h100-80gb").json()["name"] == "H100-80GB"  # as clusters accept
    assert client.get("/v1/clusters/DGX-A100-8N").json()["name"] == "dgx-a100-8n"
    for name in ("Lab", "lab"):
        assert client.post("/v1/clusters", json={**POD, "name": name}).status_code == 201
    assert client.get("/v1/clusters/lab").json()["name"] == "lab"  # exact match first
    assert_error(client.get("/v1/clusters/LAB"), 404)  # two candidates: no guessing

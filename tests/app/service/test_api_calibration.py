"""The calibration loop over HTTP: store profiles (measured or nccl-tests) and observed steps,
fit a calibration, price estimates and searches with it, and refuse bad data storing nothing."""

from typing import Any

import httpx
import pytest

import costmodel
from costmodel.observations import Profile, StepObservation
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams
from costmodel.specs import Plan
from tests.app.service.api_helpers import Snapshot, assert_error, error_fields
from tests.app.service.search_helpers import EXHAUSTIVE, Live
from tests.support.calibration_data import CLUSTER, MODEL, TRUTH, measured, observations
from tests.support.calibration_data import unmeasured_profile as synthetic_profile
from tests.support.paths import DATA_DIR

NCCL = DATA_DIR / "nccl"


def measured_data() -> tuple[Profile, list[StepObservation]]:
    """A profile and observed steps whose times the model gives under ``TRUTH``."""
    profiles, observed = measured([synthetic_profile()], observations(), TRUTH)
    return profiles[0], observed


def post_profile(client: httpx.Client, profile: Profile) -> dict[str, Any]:
    response = client.post("/v1/profiles", json={"profile": profile.model_dump(mode="json")})
    assert response.status_code == 201, response.text
    return dict(response.json())


def post_observation(client: httpx.Client, observed: StepObservation) -> dict[str, Any]:
    body = observed.model_dump(mode="json", include={"model", "training", "cluster", "plan"})
    body.update(name=observed.name, source=observed.source, step_time_s=observed.step_time_s)
    response = client.post("/v1/observations", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


# ---- profiles -------------------------------------------------------------------------------
def test_a_profile_is_stored_and_read_back(client: httpx.Client) -> None:
    profile, _ = measured_data()
    created = post_profile(client, profile)
    assert created["kind"] == "measured" and created["gpu"] == "cpu-test"
    assert created["samples"] == {
        "gemm": len(profile.gemm),
        "memory": len(profile.memory),
        "attention": len(profile.attention),
        "collectives": len(profile.collectives),
    }
    read = client.get(f"/v1/profiles/{created['id']}").json()
    assert Profile.model_validate(read["profile"]) == profile
    listed = client.get("/v1/profiles").json()["items"]
    assert created["id"] in [item["id"] for item in listed]
    assert "profile" not in listed[0]  # lists stay light: no samples


def test_nccl_tests_output_becomes_a_profile(client: httpx.Client) -> None:
    text = (NCCL / "all_gather_a100_2x8.txt").read_text()
    # This output lacks the test's name line, and all-gather and all-to-all have the same
    # busbw/algbw on 16 ranks: the import asks for the op rather than guess.
    error = assert_error(client.post("/v1/profiles", json={"nccl_tests": {"outputs": [text]}}), 422)
    assert "give the test name (op)" in error["details"][0]["reason"]
    body = {"nccl_tests": {"outputs": [text], "op": "all_gather"}}
    response = client.post("/v1/profiles", json=body)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["kind"] == "nccl-tests"
    assert created["gpu"] == "A100-80GB"  # from the rank lines' device name
    assert created["device"] == "NVIDIA A100-SXM4-80GB"
    samples = client.get(f"/v1/profiles/{created['id']}").json()["profile"]["collectives"]
    assert samples and {sample["op"] for sample in samples} == {"all_gather"}
    assert {(s["ranks"], s["ranks_per_node"]) for s in samples} == {(16, 8)}


def test_bad_profiles_are_refused_and_nothing_is_stored(
    client: httpx.Client, snapshot: Snapshot
) -> None:
    before = snapshot()
    gh200 = (NCCL / "all_reduce_gh200_2x4.txt").read_text()
    valid = synthetic_profile().model_dump(mode="json")
    profile = synthetic_profile().model_dump(mode="json")
    profile["gemm"][0]["low_s"] = 2.0  # above its median
    cases = [
        ({"nccl_tests": {"outputs": ["no table here"]}}, "nccl_tests.outputs[0]"),
        ({"nccl_tests": {"outputs": [gh200]}}, "nccl_tests.gpu"),  # GH200: not in the catalog
        ({"nccl_tests": {"outputs": [gh200], "gpu": "Z9000"}}, "nccl_tests.gpu"),
        ({"profile": profile}, "profile.gemm[0]"),
        (
            {"profile": {**profile, "gemm": [], "memory": [], "attention": [], "collectives": []}},
            "profile",
        ),
        ({}, "profile"),
        ({"profile": valid, "nccl_tests": {"outputs": [gh200]}}, "nccl_tests"),
    ]
    for body, field in cases:
        error = assert_error(client.post("/v1/profiles", json=body), 422)
        assert field in error_fields(error), (field, error)
    assert snapshot() == before


# ---- observations ---------------------------------------------------------------------------
def test_an_observed_run_is_stored_with_the_prediction_it_is_compared_with(
    client: httpx.Client,
) -> None:
    observed = measured_data()[1][0]
    created = post_observation(client, observed)
    expected = costmodel.estimate(MODEL, observed.training, CLUSTER, observed.plan).step_time_s
    assert created["step_time_s"] == pytest.approx(observed.step_time_s)
    assert created["predicted_step_time_s"] == pytest.approx(expected)
    assert created["prediction_error"] == pytest.approx(expected / observed.step_time_s - 1)
    read = client.get(f"/v1/observations/{created['id']}").json()
    assert Plan.model_validate(read["plan"]) == observed.plan
    assert read["training"]["global_batch_size"] == observed.training.global_batch_size
    listed = client.get("/v1/observations", params={"source": observed.source}).json()["items"]
    assert [item["id"] for item in listed] == [created["id"]]
    assert client.get("/v1/observations", params={"source": "elsewhere"}).json()["items"] == []


def test_bad_observations_are_refused(client: httpx.Client, snapshot: Snapshot) -> None:
    before = snapshot()
    observed = measured_data()[1][0]
    body = observed.model_dump(mode="json", include={"model", "training", "cluster", "plan"})
    cases = [
        ({**body}, None),  # neither step_time_s nor tokens_per_s
        ({**body, "step_time_s": -1}, "step_time_s"),
        ({**body, "step_time_s": 1, "plan": {**body["plan"], "dp": 7}}, "plan"),  # 7 ranks on 2
    ]
    for case, field in cases:
        error = assert_error(client.post("/v1/observations", json=case), 422)
        if field is not None:
            assert field in error_fields(error), error
    error = assert_error(client.post("/v1/plans/0123/observations", json={"step_time_s": 1}), 404)
    assert "0123" in error["message"]
    assert snapshot() == before


# ---- calibrations ---------------------------------------------------------------------------
def test_a_calibration_fits_stored_measurements_and_prices_estimates(
    client: httpx.Client,
) -> None:
    profile, observed = measured_data()
    profile_id = post_profile(client, profile)["id"]
    for item in observed:
        post_observation(client, item)
    body = {"name": "lab-cpu", "profile_ids": [profile_id], "observation_sources": ["cpu runs"]}
    response = client.post("/v1/calibrations", json=body)
    assert response.status_code == 201, response.text
    first = response.json()
    assert first["ref"] == "lab-cpu@1" and first["points"] == profile.sample_count + len(observed)
    assert first["held_out_mape_after"] < 0.01 < first["held_out_mape_before"]
    assert set(first["moved"]) == set(TRUTH.model_dump(exclude_defaults=True))
    assert first["inputs"]["profile_ids"] == [profile_id]
    assert len(first["inputs"]["observation_ids"]) == len(observed)
    params = EfficiencyParams.model_validate(first["params"])
    assert params.gemm_efficiency_scale == pytest.approx(TRUTH.gemm_efficiency_scale, rel=0.02)

    # A second fit of the same name is its next version; the name alone means the latest.
    second = client.post("/v1/calibrations", json={**body, "k_folds": 3}).json()
    assert second["version"] == 2
    assert client.get("/v1/calibrations/lab-cpu").json()["id"] == second["id"]
    assert client.get("/v1/calibrations/lab-cpu@1").json()["id"] == first["id"]
    assert client.get(f"/v1/calibrations/{first['id']}").json()["version"] == 1
    listed = client.get("/v1/calibrations", params={"name": "lab"}).json()["items"]
    assert [item["ref"] for item in listed] == ["lab-cpu@2", "lab-cpu@1"]

    # Estimates priced with it reproduce the measured step; uncalibrated ones do not.
    run = observed[3]
    request = {
        "model": MODEL.model_dump(mode="json"),
        "training": run.training.model_dump(mode="json"),
        "cluster": CLUSTER.model_dump(mode="json"),
        "plan": run.plan.model_dump(mode="json"),
    }
    plain = client.post("/v1/estimate", json=request).json()
    calibrated = client.post("/v1/estimate", json={**request, "calibration": "lab-cpu@1"}).json()
    assert plain["calibration"] is None
    assert calibrated["calibration"] == {"id": first["id"], "ref": "lab-cpu@1"}
    assert calibrated["step_time_s"] == pytest.approx(run.step_time_s, rel=0.01)
    assert abs(plain["step_time_s"] / run.step_time_s - 1) > 0.1
    expected = costmodel.estimate(MODEL, run.training, CLUSTER, run.plan, params=params)
    assert calibrated["step_time_s"] == pytest.approx(expected.step_time_s)


def test_refused_calibrations_store_nothing(client: httpx.Client, snapshot: Snapshot) -> None:
    profile, observed = measured_data()
    profile_id = post_profile(client, profile)["id"]
    # The same plan measured 3x apart: the data contradicts itself.
    slower = observed[0].model_copy(update={"step_time_s": 3 * (observed[0].step_time_s or 0)})
    contradicting = [observed[0], slower]
    ids = [post_observation(client, item)["id"] for item in contradicting]
    tiny = Profile.model_validate(
        {**profile.model_dump(mode="json"), "memory": [], "attention": [], "collectives": []}
        | {"gemm": profile.model_dump(mode="json")["gemm"][:1]}
    )
    tiny_id = post_profile(client, tiny)["id"]
    before = snapshot()
    refused = [
        {"name": "bad", "observation_ids": ids},
        {"name": "bad", "profile_ids": [tiny_id]},
    ]
    for body in refused:
        error = assert_error(client.post("/v1/calibrations", json=body), 422, "calibration_refused")
        assert error["message"].startswith("calibration refused: ")
    invalid = [
        ({"name": "bad"}, "profile_ids"),
        ({"name": "bad", "profile_ids": ["nope"]}, "profile_ids[0]"),
        ({"name": "bad", "observation_ids": [ids[0], "nope"]}, "observation_ids[1]"),
        ({"name": "bad", "observation_sources": ["nobody"]}, "observation_sources[0]"),
        ({"name": "bad", "profile_ids": [profile_id], "params": ["warp_speed"]}, "params[0]"),
        ({"name": "bad@2", "profile_ids": [profile_id]}, "name"),
        ({"name": "bad", "profile_ids": [profile_id], "k_folds": 1}, "k_folds"),
    ]
    for body, field in invalid:
        error = assert_error(client.post("/v1/calibrations", json=body), 422)
        assert error_fields(error) == [field], error
    assert snapshot() == before
    assert assert_error(client.get("/v1/calibrations/bad"), 404)


def test_estimates_refuse_an_unknown_calibration(client: httpx.Client) -> None:
    request = {
        "preset": "gpt-1.7b",
        "training": EXHAUSTIVE["training"],
        "cluster_id": "dgx-a100-1n",
    }
    request["plan"] = {"dp": 8, "tp": 1, "pp": 1, "micro_batch_size": 1}
    error = assert_error(client.post("/v1/estimate", json={**request, "calibration": "nope"}), 422)
    assert error_fields(error) == ["calibration"]


# ---- searches ranked with a calibration, and runs of their plans ------------------------------
def test_a_search_priced_with_a_calibration_records_it_on_its_plans(live: Live) -> None:
    # A calibration that makes every GEMM half as fast (fitted to a model-made profile).
    slow = DEFAULT_PARAMS.model_copy(update={"gemm_efficiency_scale": 0.5})
    profiles, _ = measured([synthetic_profile()], [], slow)
    profile_id = post_profile(live.http, profiles[0])["id"]
    response = live.http.post(
        "/v1/calibrations",
        json={
            "name": "half-gemm",
            "profile_ids": [profile_id],
            "params": ["gemm_efficiency_scale"],
        },
    )
    assert response.status_code == 201, response.text
    calibration = response.json()
    assert calibration["params"]["gemm_efficiency_scale"] == pytest.approx(0.5, rel=0.01)

    plain = live.submit(EXHAUSTIVE)
    search = live.submit({**EXHAUSTIVE, "calibration": "half-gemm"})
    assert search["calibration_id"] == calibration["id"] and plain["calibration_id"] is None
    worker = live.worker("w1")
    while worker.run_once() is not None:
        pass
    calibrated_plans, plain_plans = live.plans(search["id"]), live.plans(plain["id"])
    params = EfficiencyParams.model_validate(calibration["params"])
    request = live.search(search["id"])["request"]
    for plan in calibrated_plans:
        assert plan["calibration_id"] == calibration["id"]
        expected = costmodel.estimate(
            request["model"],
            request["training"],
            request["cluster"],
            plan["plan"],
            params=params,
        )
        assert plan["estimate"]["step_time_s"] == pytest.approx(expected.step_time_s)
    assert all(plan["calibration_id"] is None for plan in plain_plans)
    assert (
        calibrated_plans[0]["estimate"]["step_time_s"] > plain_plans[0]["estimate"]["step_time_s"]
    )

    # A run of the best plan: compared with what ranked it, listed under the plan.
    best = calibrated_plans[0]
    measured_s = best["estimate"]["step_time_s"] * 1.25
    response = live.http.post(
        f"/v1/plans/{best['id']}/observations", json={"step_time_s": measured_s, "source": "prod"}
    )
    assert response.status_code == 201, response.text
    observation = response.json()
    assert observation["predicted_step_time_s"] == best["estimate"]["step_time_s"]
    assert observation["prediction_error"] == pytest.approx(1 / 1.25 - 1)
    assert observation["training"]["global_batch_size"] == best["global_batch_size"]
    listed = live.http.get(f"/v1/plans/{best['id']}/observations").json()["items"]
    assert [item["id"] for item in listed] == [observation["id"]]
    # Given as tokens/s instead: the same step time.
    tokens = best["global_batch_size"] * EXHAUSTIVE["training"]["seq_length"]
    response = live.http.post(
        f"/v1/plans/{best['id']}/observations", json={"tokens_per_s": tokens / measured_s}
    )
    assert response.json()["step_time_s"] == pytest.approx(measured_s)


def test_recalibrating_from_a_base_with_new_runs(client: httpx.Client) -> None:
    """The loop: a profile-only calibration, then runs observed with it, fitted on top of it."""
    profile, observed = measured_data()
    profile_id = post_profile(client, profile)["id"]
    response = client.post("/v1/calibrations", json={"name": "loop", "profile_ids": [profile_id]})
    assert response.status_code == 201, response.text
    first = response.json()
    assert "per_step_overhead_s" in first["result"]["not_identifiable"]  # no step was seen
    observation_ids = [post_observation(client, item)["id"] for item in observed]
    overheads = ["per_step_overhead_s", "per_microbatch_overhead_s"]
    body = {"name": "loop", "observation_ids": observation_ids, "params": overheads}
    response = client.post("/v1/calibrations", json={**body, "base": "loop"})
    assert response.status_code == 201, response.text
    second = response.json()
    assert second["ref"] == "loop@2" and second["inputs"]["base"]["ref"] == "loop@1"
    # "Before" is the base's error on these runs; the fit on top of it removes the rest.
    (runs,) = second["result"]["held_out"]
    assert runs["observed_runs"] and runs["mape_after"] < 0.01 < runs["mape_before"]
    for name in overheads:
        assert second["params"][name] == pytest.approx(getattr(TRUTH, name), rel=0.1)
    for name, value in first["params"].items():
        if name not in overheads:
            assert second["params"][name] == value  # the base's other parameters carry over
    # Without the base the same runs start from the defaults: a larger error before.
    plain = client.post("/v1/calibrations", json={**body, "name": "no-base"}).json()
    assert plain["result"]["held_out"][0]["mape_before"] > runs["mape_before"]
    error = assert_error(client.post("/v1/calibrations", json={**body, "base": "nope"}), 422)
    assert error_fields(error) == ["base"]


def test_deleting_measurements_and_calibrations_keeps_what_was_priced_with_them(
    client: httpx.Client,
) -> None:
    profile, observed = measured_data()
    profile_id = post_profile(client, profile)["id"]
    observation_id = post_observation(client, observed[0])["id"]
    response = client.post("/v1/calibrations", json={"name": "gone", "profile_ids": [profile_id]})
    assert response.status_code == 201, response.text
    calibration = response.json()
    search = client.post("/v1/searches", json={**EXHAUSTIVE, "calibration": "gone@1"}).json()
    assert search["calibration_id"] == calibration["id"]

    # A bare name would mean "whichever version is latest": deletes need the version.
    error = assert_error(client.delete("/v1/calibrations/gone"), 422)
    assert error_fields(error) == ["key"]
    for path in (
        f"/v1/profiles/{profile_id}",
        f"/v1/observations/{observation_id}",
        "/v1/calibrations/gone@1",
    ):
        assert client.delete(path).status_code == 204, path
        assert_error(client.get(path), 404)
        assert_error(client.delete(path), 404)
    # The queued search forgets the link but keeps the parameters it will price with.
    kept = client.get(f"/v1/searches/{search['id']}").json()
    assert kept["calibration_id"] is None
    assert kept["request"]["params"] == calibration["params"]

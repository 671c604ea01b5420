"""``autopar profile --nccl-tests`` and ``autopar calibrate`` as users run them."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from app.cli import cli, register_commands
from app.cli.calibration_store import load_calibration
from costmodel.api import estimate
from costmodel.catalog import load_spec
from tests.support.paths import DATA_DIR

NCCL = DATA_DIR / "nccl"
runner = CliRunner()
register_commands()


def invoke(*args: str):
    return runner.invoke(cli, list(args))


@pytest.fixture
def nccl_profile(tmp_path: Path) -> Path:
    out = tmp_path / "a100.json"
    result = invoke(
        "profile", "--nccl-tests", str(NCCL / "all_gather_a100_2x8.txt"), "--op", "all_gather",
        "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "described as: A100-80GB" in result.output
    return out


def test_import_calibrate_store_and_load_versions(nccl_profile: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    profile = json.loads(nccl_profile.read_text())
    assert profile["gpu"]["name"] == "A100-80GB"
    assert len(profile["collectives"]) == 18
    for expected_version in (1, 2):
        result = invoke(
            "calibrate", "-p", str(nccl_profile), "--name", "a100", "--store", str(store)
        )
        assert result.exit_code == 0, result.output
        assert f"stored as a100@{expected_version}" in result.output
        assert "* inter_node_efficiency" in result.output
    assert sorted(p.name for p in (store / "a100").iterdir()) == ["v1.json", "v2.json"]
    latest = load_calibration("a100", store)
    assert latest.version == 2
    assert load_calibration("a100@1", store).version == 1
    assert load_calibration(str(store / "a100" / "v1.json")).ref == "a100@1"
    assert latest.params.inter_node_efficiency < 0.5
    with pytest.raises(ValueError, match=r"not found; known: a100@1, a100@2"):
        load_calibration("a100@7", store)
    with pytest.raises(ValueError, match="no calibration named 'b200'"):
        load_calibration("b200", store)
    # The stored parameters are what estimates consume.
    specs = {kind: load_spec(kind, name) for kind, name in (
        ("model", "gpt3-175b"), ("training", "gpt3-2k"), ("cluster", "dgx-h100-128n"),
        ("plan", "tp8-pp8-dp16"),
    )}  # fmt: skip
    default = estimate(**specs)
    calibrated = estimate(**specs, params=latest.params)
    assert calibrated.step_time_s > default.step_time_s  # slower links than the defaults assume


def test_observations_file_with_presets_and_inline_specs(tmp_path: Path) -> None:
    # GPT-3 steps 15% slower than the default parameters predict (any GEMM efficiency < 1 fits).
    observed = []
    for plan in ("tp8-pp8-dp16", "tp8-pp4-dp4"):
        for batch in (768, 1536, 3072):
            training = {"seq_length": 2048, "global_batch_size": batch}
            specs = {kind: load_spec(kind, name) for kind, name in (
                ("model", "gpt3-175b"), ("cluster", "dgx-h100-128n"), ("plan", plan),
            )}  # fmt: skip
            predicted = estimate(**specs, training=training).step_time_s
            observed.append(
                {
                    "name": f"gpt3 {plan} gbs{batch}",
                    "source": "cluster logs",
                    "model": "gpt3-175b",
                    "training": training,
                    "cluster": "dgx-h100-128n",
                    "plan": plan,
                    "step_time_s": 1.15 * predicted,
                }
            )
    path = tmp_path / "observed.yaml"
    path.write_text(yaml.safe_dump(observed))
    result = invoke(
        "calibrate", "-O", str(path), "--name", "gpt3", "--params", "gemm_efficiency_scale",
        "--folds", "3", "--store", str(tmp_path / "store"), "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    calibration = json.loads(result.output)
    assert calibration["inputs"]["observations"] == 6
    (held_out,) = calibration["result"]["held_out"]
    assert held_out["source"] == "cluster logs" and held_out["observed_runs"]
    assert held_out["mape_after"] < 0.05 < held_out["mape_before"]
    assert calibration["result"]["params"]["gemm_efficiency_scale"] < 1.0

    # Recalibrating on top of it: "before" is now its error, not the defaults'.
    result = invoke(
        "calibrate", "-O", str(path), "--name", "gpt3", "--params", "per_step_overhead_s",
        "--base", "gpt3", "--folds", "3", "--store", str(tmp_path / "store"), "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    again = json.loads(result.output)
    assert again["version"] == 2 and again["inputs"]["base"] == "gpt3@1"
    assert again["result"]["held_out"][0]["mape_before"] < 0.05 < held_out["mape_before"]
    result = invoke("calibrate", "-O", str(path), "--name", "x", "--base", "nope@3")
    assert result.exit_code == 2 and result.output.startswith("error: --base: ")


def test_refusals_print_one_line_and_store_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    noisy = tmp_path / "noisy.json"
    result = invoke(
        "profile", "--nccl-tests", str(NCCL / "alltoall_2x8_two_runs.txt"), "--gpu", "H100-80GB",
        "--out", str(noisy),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    result = invoke("calibrate", "-p", str(noisy), "--name", "noisy", "--store", str(store))
    assert result.exit_code == 2
    assert result.output.startswith("error: calibration refused: contradicting samples")
    assert result.output.count("\n") == 1
    assert not store.exists()

    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"device": {"name": "x"}, "gpu": "H100-80GB"}))
    result = invoke("calibrate", "-p", str(empty), "--name", "empty", "--store", str(store))
    assert result.exit_code == 2
    assert "profile has no samples" in result.output
    assert not store.exists()

    result = invoke("calibrate", "--name", "../escape", "--store", str(store))
    assert result.exit_code == 2 and "--name" in result.output


def test_nccl_import_errors_name_the_file(tmp_path: Path) -> None:
    table_only = NCCL / "all_reduce_nd96asr_table_only.txt"
    result = invoke("profile", "--nccl-tests", str(table_only), "--out", str(tmp_path / "p.json"))
    assert result.exit_code == 2
    assert "ranks_per_node" in result.output and "all_reduce_nd96asr" in result.output
    result = invoke(
        "profile", "--nccl-tests", str(table_only), "--ranks-per-node", "8",
        "--out", str(tmp_path / "p.json"),
    )  # fmt: skip
    assert result.exit_code == 2
    assert "give --gpu" in result.output
    result = invoke(
        "profile", "--nccl-tests", str(table_only), "--ranks-per-node", "8", "--gpu", "A100-80GB",
        "--out", str(tmp_path / "p.json"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output


def test_an_observed_run_the_cluster_cannot_hold_is_refused(tmp_path: Path) -> None:
    observed = {
        "model": "llama3-8b",
        "training": "llama3-8k",
        "cluster": "dgx-a100-1n",
        "plan": {"dp": 16, "tp": 1, "pp": 1, "micro_batch_size": 1},  # 16 GPUs on an 8-GPU node
        "step_time_s": 10.0,
    }
    path = tmp_path / "observed.yaml"
    path.write_text(yaml.safe_dump([observed]))
    store = tmp_path / "store"
    result = invoke("calibrate", "-O", str(path), "--name", "x", "--store", str(store))
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert (
        "item 0: this plan cannot have run here: plan needs dp*tp*pp*cp = 16 GPUs" in result.output
    )
    assert not store.exists()

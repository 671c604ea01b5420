"""The ``autopar`` CLI as users run it: a subprocess, its output and its exit status."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from app.cli.estimate_cmd import render_estimate
from costmodel.catalog import load_model_preset, load_spec
from costmodel.specs import Estimate, MemoryBreakdown, TimeBreakdown
from tests.support.paths import REPO_ROOT

# The shape-bearing keys of meta-llama/Meta-Llama-3-8B's config.json.
LLAMA3_8B = {
    "model_type": "llama",
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}
GPT3_ON_H100 = [
    "--model",
    "gpt3-175b",
    "--training",
    "gpt3-2k",
    "--cluster",
    "dgx-h100-128n",
    "--plan",
    "tp8-pp8-dp16",
]


def run_cli(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_bad_input(result: subprocess.CompletedProcess[str], expected_start: str) -> None:
    """Exit status 2, nothing on stdout, exactly one ``error: ...`` line on stderr."""
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {expected_start}"), lines[0]


def with_option(args: list[str], option: str, value: str) -> list[str]:
    replaced = list(args)
    replaced[replaced.index(option) + 1] = value
    return replaced


# estimate: happy path (needs costmodel.estimate) -----------------------------------------------
def test_estimate_prints_readable_report() -> None:
    result = run_cli("estimate", *GPT3_ON_H100)
    assert result.returncode == 0, result.stderr
    for label in ("feasible: yes", "step time", "tokens/s per GPU", "MFU", "HFU", "peak"):
        assert label in result.stdout
    for label in ("optimizer states", "activations", "Time per step", "$/M tokens"):
        assert label in result.stdout


def test_estimate_json_is_a_full_estimate() -> None:
    result = run_cli("estimate", *GPT3_ON_H100, "--json")
    assert result.returncode == 0, result.stderr
    estimate = Estimate.model_validate_json(result.stdout)
    assert estimate.num_gpus == 1024
    assert len(estimate.per_stage) == 8
    assert estimate.step_time_s > 0


def test_estimate_heterogeneous_preset_plan() -> None:
    result = run_cli(
        "estimate",
        *["--model", "llama3-70b", "--training", "llama3-8k"],
        *["--cluster", "mixed-h100-a100-2zone", "--plan", "mixed-2zone-pp4", "--json"],
    )
    assert result.returncode == 0, result.stderr
    estimate = Estimate.model_validate_json(result.stdout)
    assert estimate.num_gpus == 256
    assert [stage.group for stage in estimate.per_stage] == [
        "h100",
        "a100-80",
        "a100-80",
        "a100-40",
    ]


def test_estimate_accepts_spec_files(tmp_path: Path) -> None:
    model_file = tmp_path / "model.yaml"
    model_file.write_text(yaml.safe_dump(load_model_preset("gpt3-175b").model_dump()))
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"dp": 16, "tp": 8, "pp": 8, "micro_batch_size": 1}))
    args = with_option(
        with_option(GPT3_ON_H100, "--model", str(model_file)), "--plan", str(plan_file)
    )
    result = run_cli("estimate", *args, "--json")
    assert result.returncode == 0, result.stderr
    assert Estimate.model_validate_json(result.stdout).num_gpus == 1024


def test_estimate_value_error_is_one_line(tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text("dp: 16\ntp: 8\npp: 8\nmicro_batch_size: 1\ngroup: no-such-group\n")
    result = run_cli("estimate", *with_option(GPT3_ON_H100, "--plan", str(plan_file)))
    assert_bad_input(result, "")
    assert "no-such-group" in result.stderr


# estimate: bad input -------------------------------------------------------------------------
def test_unknown_preset_lists_choices() -> None:
    result = run_cli("estimate", *with_option(GPT3_ON_H100, "--model", "gpt5"))
    assert_bad_input(result, "unknown model 'gpt5': not a preset or an existing file;")
    assert "llama3-70b" in result.stderr


def test_missing_file() -> None:
    result = run_cli("estimate", *with_option(GPT3_ON_H100, "--cluster", "nowhere/c.yaml"))
    assert_bad_input(result, "cluster file 'nowhere/c.yaml' does not exist")


def test_invalid_yaml(tmp_path: Path) -> None:
    broken = tmp_path / "training.yaml"
    broken.write_text("seq_length: [2048\n")
    result = run_cli("estimate", *with_option(GPT3_ON_H100, "--training", str(broken)))
    assert_bad_input(result, f"training file '{broken}': invalid YAML at line")


def test_invalid_json(tmp_path: Path) -> None:
    broken = tmp_path / "plan.json"
    broken.write_text('{"dp": 16,}')
    result = run_cli("estimate", *with_option(GPT3_ON_H100, "--plan", str(broken)))
    assert_bad_input(result, f"plan file '{broken}': invalid JSON at line 1")


def test_validation_error_names_field(tmp_path: Path) -> None:
    model_file = tmp_path / "model.yaml"
    fields = load_model_preset("gpt3-175b").model_dump(exclude_none=True)
    model_file.write_text(yaml.safe_dump({**fields, "num_layers": 0}))
    result = run_cli("estimate", *with_option(GPT3_ON_H100, "--model", str(model_file)))
    assert_bad_input(
        result,
        f"model file '{model_file}': model.num_layers: Input should be greater than or equal to 1",
    )


def test_unknown_gpu_in_cluster_file(tmp_path: Path) -> None:
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text("groups:\n  - name: a\n    gpu: Z100\n    num_nodes: 1\n")
    result = run_cli("estimate", *with_option(GPT3_ON_H100, "--cluster", str(cluster_file)))
    assert_bad_input(result, f"cluster file '{cluster_file}': cluster.groups[0].gpu: unknown GPU")


def test_document_that_is_not_a_mapping(tmp_path: Path) -> None:
    listing = tmp_path / "plan.yaml"
    listing.write_text("- 1\n- 2\n")
    result = run_cli("estimate", *with_option(GPT3_ON_H100, "--plan", str(listing)))
    assert_bad_input(result, f"plan file '{listing}': expected a mapping of plan fields, got list")


# presets, gpus -------------------------------------------------------------------------------
def test_presets_lists_every_kind() -> None:
    result = run_cli("presets")
    assert result.returncode == 0, result.stderr
    for name in ("llama3-70b", "dgx-h100-128n", "llama3-8k", "tp8-pp8-dp16"):
        assert name in result.stdout


def test_presets_of_one_kind() -> None:
    result = run_cli("presets", "clusters")
    assert result.returncode == 0, result.stderr
    assert "mixed-h100-a100-2zone" in result.stdout
    assert "llama3-70b" not in result.stdout


def test_presets_unknown_kind() -> None:
    assert_bad_input(run_cli("presets", "gpus"), "unknown preset kind 'gpus'")


def test_presets_work_from_any_directory(tmp_path: Path) -> None:
    """Presets come from package data, not from files relative to the working directory."""
    autopar = Path(sys.executable).parent / "autopar"
    result = subprocess.run(
        [str(autopar), "presets", "models"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "deepseek-v3" in result.stdout


def test_gpus_table() -> None:
    result = run_cli("gpus")
    assert result.returncode == 0, result.stderr
    assert "H100-80GB" in result.stdout and "989" in result.stdout


# import-hf -----------------------------------------------------------------------------------
def test_import_hf_prints_a_loadable_model_spec(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA3_8B))
    result = run_cli("import-hf", str(config), "--name", "llama3-8b")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Imported by `autopar import-hf` from config.json")
    assert load_spec("model", yaml.safe_load(result.stdout)) == load_model_preset("llama3-8b")


def test_import_hf_writes_out_file(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA3_8B))
    out = tmp_path / "llama.yaml"
    result = run_cli("import-hf", str(config), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert load_spec("model", out).num_kv_heads == 8


@pytest.mark.parametrize(
    ("content", "expected_start"),
    [
        ('{"model_type": "bert"}', "{path}: unsupported model_type 'bert'"),
        ('{"model_type": "llama"}', "{path}: Hugging Face config (model_type 'llama') is missing"),
        ("not json", "'{path}' is not valid JSON"),
    ],
)
def test_import_hf_bad_config(tmp_path: Path, content: str, expected_start: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(content)
    assert_bad_input(run_cli("import-hf", str(config)), expected_start.format(path=config))


def test_import_hf_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.json"
    assert_bad_input(run_cli("import-hf", str(missing)), f"cannot read '{missing}'")


# rendering -----------------------------------------------------------------------------------
def test_render_infeasible_estimate_shows_reasons_verbatim() -> None:
    memory = MemoryBreakdown(parameters=60.0, gradients=30.0, activations=12.5)
    estimate = Estimate(
        feasible=False,
        reasons=["stage [0] needs 102.5 GiB of 80 GiB", "tp=3 does not divide heads=32"],
        num_gpus=8,
        step_time_s=float("inf"),
        tokens_per_s=0.0,
        tokens_per_s_per_gpu=0.0,
        model_tflops_per_gpu=0.0,
        mfu=0.0,
        hfu=0.0,
        peak_memory_gib=102.5,
        memory_gib=memory,
        per_stage=[],
        time_breakdown_s=TimeBreakdown(compute=1.5),
    )
    console = Console(record=True, width=100)
    console.print(render_estimate(estimate, title="custom run"))
    text = console.export_text()
    assert "feasible: NO" in text
    assert "stage [0] needs 102.5 GiB of 80 GiB" in text  # brackets are not rich markup
    assert "tp=3 does not divide heads=32" in text
    assert "$/hour" in text and "—" in text  # unknown cost is shown as a dash, not 'None'


def test_estimate_with_unknown_calibration_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-calibration.json"
    result = run_cli("estimate", *GPT3_ON_H100, "--calibration", str(missing))
    assert_bad_input(result, "--calibration:")


def test_an_infeasible_plan_exits_3_with_its_reasons() -> None:
    """A plan that does not fit is an answer, not a success: scripts must be able to tell."""
    result = run_cli(
        "estimate", "-m", "gpt3-175b", "-t", "gpt3-2k", "-c", "dgx-a100-1n",
        "-p", "tp8-pp8-dp16", "--json",
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert json.loads(result.stdout)["feasible"] is False
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: the plan does not fit: ")


def test_import_hf_prints_what_it_does_not_price_exactly(tmp_path: Path) -> None:
    """Gemma 2's GeGLU is priced as SwiGLU and its soft-capping not at all: the CLI says so on
    stderr and keeps stdout the YAML."""
    config = {
        "model_type": "gemma2",
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 3584,
        "intermediate_size": 14336,
        "num_attention_heads": 16,
        "num_hidden_layers": 42,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "vocab_size": 256000,
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
        "sliding_window": 4096,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = run_cli("import-hf", str(path))
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["num_layers"] == 42
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert any("soft-capping" in line for line in warnings)


def test_estimate_for_a_framework_names_what_it_cannot_launch() -> None:
    """--framework megatron on an FSDP (ZeRO-3) plan: infeasible, the setting named, exit 3."""
    result = run_cli(
        "estimate", "-m", "llama3-70b", "-t", "llama3-8k", "-c", "dgx-h100-16n",
        "-p", "fsdp-dp64", "--framework", "megatron", "--json",
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    estimate = json.loads(result.stdout)
    assert estimate["framework"] == "megatron" and "megatron" not in estimate["launchable_by"]
    assert "zero_stage: Megatron shards only the optimizer states" in result.stderr

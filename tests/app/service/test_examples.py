"""The scheduler examples (examples/): valid bash, the cluster they build for their allocation is
a valid ClusterSpec, and each runs end to end against a real service with fake ``srun``,
``scontrol`` and ``kubectl`` that record how they were called."""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from costmodel.specs import ClusterSpec
from tests.app.service.http_server import serve_app
from tests.support.paths import REPO_ROOT

# The examples run end to end against a live server.
pytestmark = pytest.mark.slow

EXAMPLES = REPO_ROOT / "examples"
SLURM = EXAMPLES / "slurm" / "plan_and_launch.sbatch"
KUBERNETES = EXAMPLES / "kubernetes" / "submit_and_apply.sh"
SCRIPTS = sorted([*EXAMPLES.rglob("*.sh"), *EXAMPLES.rglob("*.sbatch")])
SMALL = {"MODEL": "gpt-1.7b", "TRAINING": "gpt3-2k", "GPU": "A100-80GB"}


def run(script: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(script), *args],
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env},
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_every_example_is_valid_bash(script: Path) -> None:
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_the_slurm_job_describes_its_own_allocation() -> None:
    slurm = {"SLURM_JOB_NUM_NODES": "12", "SLURM_GPUS_ON_NODE": "4", "SLURM_JOB_ID": "4711"}
    printed = run(SLURM, "--print-cluster", env=slurm | {"GPU": "H100-80GB"})
    assert printed.returncode == 0, printed.stderr
    cluster = ClusterSpec.model_validate_json(printed.stdout)
    assert cluster.name == "slurm-4711"
    (group,) = cluster.groups
    assert (group.gpu, group.num_nodes, group.gpus_per_node) == ("H100-80GB", 12, 4)
    outside = run(SLURM, "--print-cluster", env={})
    assert outside.returncode != 0 and "SLURM_JOB_NUM_NODES" in outside.stderr


def test_the_kubernetes_example_describes_its_pool() -> None:
    printed = run(KUBERNETES, "--print-cluster", env={"NODES": "3", "GPUS_PER_NODE": "8"})
    assert printed.returncode == 0, printed.stderr
    (group,) = ClusterSpec.model_validate_json(printed.stdout).groups
    assert (group.num_nodes, group.gpus_per_node) == (3, 8)


# End to end -----------------------------------------------------------------------------------
@pytest.fixture
def served(worker_database_url: str) -> Iterator[str]:
    with serve_app(worker_database_url) as url:
        yield url


@pytest.fixture
def fake_tools(tmp_path: Path) -> tuple[Path, Path]:
    """A bin folder holding ``autopar`` (this checkout's) and recorders for the cluster tools;
    each recorder appends its arguments to ``calls``."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    (bin_dir / "autopar").write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "from app.cli import main; main()" "$@"\n'
    )
    recorder = f'#!/bin/sh\necho "$(basename "$0") $*" >> {calls}\n'
    master = f'echo "MASTER_ADDR=$MASTER_ADDR" >> {calls}\n'
    (bin_dir / "srun").write_text(recorder + master + '[ -f "$3" ] || exit 9\n')  # node script
    # A long node list, as on a large allocation: a reader that stops at the first line must not
    # kill scontrol with SIGPIPE (status 141 under pipefail).
    hosts = "echo node-001\nseq -f 'node-%05g' 2 20000\n"
    (bin_dir / "scontrol").write_text(recorder + hosts)
    (bin_dir / "kubectl").write_text(recorder + '[ -f "$3" ] || exit 9\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir, calls


def _env(served: str, bin_dir: Path) -> dict[str, str]:
    path = f"{bin_dir}:{os.environ['PATH']}"
    return {"PATH": path, "AUTOPAR_URL": served, "PYTHONPATH": str(REPO_ROOT)} | SMALL


def test_the_slurm_job_plans_and_launches(
    served: str, fake_tools: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_dir, calls = fake_tools
    slurm = {"SLURM_JOB_NUM_NODES": "1", "SLURM_GPUS_ON_NODE": "8", "SLURM_JOB_ID": "77"}
    slurm |= {"SLURM_JOB_NODELIST": "node-[001-002]", "RUN_DIR": str(tmp_path / "run")}
    result = run(SLURM, env=_env(served, bin_dir) | slurm | {"FRAMEWORK": "torchtitan"})
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "run"
    assert {"cluster.json", "autopar.sbatch", "launch_node.sh"} <= {
        path.name for path in run_dir.iterdir()
    }
    assert "torchtitan" in (run_dir / "launch_node.sh").read_text()
    assert "MASTER_ADDR=node-001" in calls.read_text().splitlines()
    srun = [line for line in calls.read_text().splitlines() if line.startswith("srun ")]
    assert srun == [
        f"srun --kill-on-bad-exit=1 bash {run_dir}/launch_node.sh --data-path "
        "/data/my-corpus_text_document --tokenizer-type HuggingFaceTokenizer --tokenizer-model "
        "/data/tokenizer --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --train-iters 1000"
    ]


def test_the_kubernetes_example_submits_and_applies(
    served: str, fake_tools: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_dir, calls = fake_tools
    out = tmp_path / "k8s"
    pool = {"NODES": "1", "GPUS_PER_NODE": "8", "OUT": str(out)}
    result = run(KUBERNETES, "pytorchjob", env=_env(served, bin_dir) | pool)
    assert result.returncode == 0, result.stderr
    assert calls.read_text().splitlines() == [f"kubectl apply -f {out}/pytorchjob.yaml"]
    assert "kind: PyTorchJob" in (out / "pytorchjob.yaml").read_text()

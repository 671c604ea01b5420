"""Where things are, for tests anywhere in the tree."""

from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = TESTS_DIR.parent
DATA_DIR = TESTS_DIR / "data"
NCCL_DIR = DATA_DIR / "nccl"

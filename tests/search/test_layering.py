"""Import layering of the search package: the plan space does not depend on the request (the
request validates against the space), so the request <-> space import cycle cannot come back."""

import subprocess
import sys


def _loaded_after(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def test_the_space_does_not_import_the_request() -> None:
    loaded = _loaded_after("search.space")
    assert "search.space" in loaded
    assert "search.request" not in loaded


def test_constraints_import_neither_the_request_nor_the_space() -> None:
    loaded = _loaded_after("search.constraints")
    assert "search.request" not in loaded
    assert "search.space" not in loaded

"""Every public function and class of ``costmodel`` and ``search`` says what it is.

Public: no leading underscore, in a module whose path has none, at module level or a method of a
public class (``@overload`` stubs aside: the implementation carries the docstring).
"""

import ast
from collections.abc import Iterator

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
PACKAGES = ("costmodel", "search")
Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _is_overload(node: Definition) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id == "overload")
        or (isinstance(d, ast.Attribute) and d.attr == "overload")
        for d in node.decorator_list
    )


def _public(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, Definition]]:
    for node in body:
        if isinstance(node, Definition) and not node.name.startswith("_"):
            if not _is_overload(node):
                yield prefix + node.name, node
            if isinstance(node, ast.ClassDef):
                yield from _public(node.body, f"{prefix}{node.name}.")


def public_definitions() -> Iterator[tuple[str, bool]]:
    """(``path:line name``, has a docstring) for each public definition of the packages."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if any(part.startswith("_") and part != "__init__.py" for part in relative.parts):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name, node in _public(tree.body, ""):
                yield f"{relative}:{node.lineno} {name}", ast.get_docstring(node) is not None


def test_every_public_function_and_class_has_a_docstring() -> None:
    found = list(public_definitions())
    missing = [where for where, documented in found if not documented]
    assert len(found) > 300  # the walk found the packages
    assert not missing, f"{len(missing)} of {len(found)} lack a docstring:\n" + "\n".join(missing)


if __name__ == "__main__":
    found = list(public_definitions())
    documented = sum(has for _, has in found)
    print(f"{documented}/{len(found)} public functions and classes have a docstring")

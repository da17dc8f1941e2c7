"""The README's and the guide's Python examples run as they are written."""

import pathlib
import re

import pytest


def _top() -> pathlib.Path:
    """The directory holding README.md and docs/ (the repository's top, or
    the copy the ARM tests make beside these tests)."""
    for d in pathlib.Path(__file__).resolve().parents:
        if (d / "README.md").is_file() and (d / "docs" / "README.md").is_file():
            return d
    raise FileNotFoundError("README.md and docs/ not found above the tests")


TOP = _top()
PAGES = [TOP / "README.md", *sorted((TOP / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
EXAMPLES = [
    pytest.param(code, id=f"{page.relative_to(TOP)}:{n}")
    for page in PAGES
    for n, code in enumerate(BLOCK.findall(page.read_text()), 1)
]


def test_the_readme_has_a_python_example():
    assert any("README.md" in p.id for p in EXAMPLES)


@pytest.mark.parametrize("code", EXAMPLES)
def test_python_example_runs(code, capsys):
    exec(compile(code, "<example>", "exec"), {"__name__": "__main__"})
    capsys.readouterr()

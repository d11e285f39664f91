"""What mkdocs --strict cannot see: the README's links (GitHub renders it outside the site) and the
troubleshooting page naming every error tritonkit raises."""

from __future__ import annotations

import inspect
import re

import tritonkit.errors
from tests.docs.doc_commands import DOCS
from tests.support.paths import ROOT


def test_every_link_of_the_readme_to_a_file_resolves() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = [t.split("#", 1)[0] for t in re.findall(r"\]\(([^)\s]+)\)", readme) if "://" not in t]
    assert any(t.startswith("docs/") for t in targets)
    missing = [t for t in targets if t and not (ROOT / t).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readme_stays_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    assert "scripts/demo" in readme.split("\n## ", 2)[1] and "scripts/test" in readme.split("\n## ", 2)[1]


def test_troubleshooting_names_every_error_class() -> None:
    page = (DOCS / "troubleshooting.md").read_text()
    classes = [name for name, value in vars(tritonkit.errors).items()
               if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == "tritonkit.errors"]
    assert len(classes) > 30
    missing = [name for name in classes if not re.search(rf"`{name}`", page)]
    assert not missing, f"docs/troubleshooting.md does not name {missing}"

"""The suite's markers: each declared with what it means, and the wheel-downloading tests opt-out-able offline."""

from __future__ import annotations

import re

import support

# What reaches the package index from a test: verl's wheels (tutorrl's own fetch, directly, through the
# importer's config cache, or through `tutorrl import`, which composes each launch it proves), and pip asked to
# download or install by name.
_DOWNLOADS = re.compile(r"fetch_wheel\(|config_root\(|run_tag\(|newest_composing\(|thirdparty\"|"
                        r"\"tutorrl\", \"import\"|\"pip\", \"download\"|\"pip\", \"install\"(?![^\n]*--no-index)")


def test_every_marker_is_declared_with_a_meaning(pytestconfig):
    declared = dict(line.split(":", 1) for line in pytestconfig.getini("markers"))
    assert {"slow", "wheels"} <= set(declared)
    assert all(meaning.strip() for meaning in declared.values()), declared
    assert "--strict-markers" in pytestconfig.getini("addopts")


def _code(text: str) -> str:
    """The text without its comments (a comment may name a downloading function)."""
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def test_a_test_file_that_downloads_carries_the_wheels_marker():
    texts = {path: path.read_text(encoding="utf-8") for path in sorted((support.REPO / "tests").rglob("test_*.py"))}
    downloading = [path for path, text in texts.items() if _DOWNLOADS.search(_code(text))]
    unmarked = [p.relative_to(support.REPO).as_posix() for p in downloading if "pytest.mark.wheels" not in texts[p]]
    assert len(downloading) >= 8, "the pattern no longer finds the known downloading tests"
    assert unmarked == [], f"these download at run time without @pytest.mark.wheels: {unmarked}"

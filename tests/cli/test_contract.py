"""tutorrl/contract.py is where the bundle's names are spelled: what is written and ignored follows it."""

from __future__ import annotations

import re

import support
from tutorrl import contract
from tutorrl.compiler import compile_bytes, write_bundle

SOURCE_DIRS = ("compiler", "runtime", "evidence", "export", "review", "importer", "plugins", "tutorrl")


def test_a_written_bundle_holds_exactly_the_contracts_files(tmp_path):
    spec = support.SPECS / "tiny_cpu_grpo.toml"
    path = write_bundle(compile_bytes(spec.read_bytes(), spec.name), tmp_path).path
    assert sorted(p.name for p in path.iterdir()) == sorted((*contract.CONTENT_FILES, contract.MANIFEST))
    assert len(path.name) == contract.ID_LENGTH


def test_gitignore_ignores_the_appended_folders_of_committed_bundles():
    ignored = set((support.REPO / ".gitignore").read_text().split())
    assert {f"bundles/*/{name}/" for name in contract.APPENDED_DIRS} <= ignored


def test_every_tutorrl_variable_in_the_source_is_the_contracts():
    """A `TUTORRL_*` name spelled anywhere but the contract would let two spellings drift apart."""
    named = set(contract.JOB_VARIABLES) | set(contract.USER_VARIABLES) | {contract.RESERVED_PREFIX}
    stray = {}
    for folder in SOURCE_DIRS:
        for path in (support.REPO / folder).glob("*.py"):
            if path.name == "contract.py":
                continue
            # (a heredoc's delimiter, <<'TUTORRL_SHA256', is no variable)
            for name in re.findall(r"(?<!<<)[\"'](TUTORRL_[A-Z0-9_]*)[\"']", path.read_text()):
                if name not in named:
                    stray.setdefault(name, []).append(path.name)
    assert stray == {}


def test_the_launch_template_reads_the_contracts_python_variable():
    template = (support.REPO / "templates" / "launch.sh.tmpl").read_text()
    assert "${" + contract.PYTHON_ENV + ":-python}" in template


def test_run_and_evidence_files_are_named_by_the_contract(tmp_path):
    """The metrics file status reads and the record names the chain writes are the contract's spellings."""
    from tutorrl.evidence import chain
    from tutorrl.runtime import metrics

    assert metrics.METRICS_FILE == contract.METRICS
    assert re.fullmatch(contract.RECORD_PATTERN, chain.record_name(1)).group(1) == "000001"
    assert chain.record_name(1234567) == "1234567.json"
    for name in (chain.record_name(7), chain.record_name(999999), chain.record_name(1000000)):
        (tmp_path / name).write_text("{}")
    (tmp_path / "00007.json").write_text("{}")  # five digits: no record
    (tmp_path / "0000007.json").write_text("{}")  # seven digits with a leading zero: not how 7 is named
    assert sorted(chain.record_files(tmp_path)) == [7, 999999, 1000000]

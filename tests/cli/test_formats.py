"""`--format json` is spelled the same on every command that prints data, and
what it prints is JSON (parsed here), through the real CLI."""

from __future__ import annotations

import argparse
import json
import shutil

import pytest

import support
from tutorrl import cli


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "specs").mkdir()
    for name in ("chess_tutor_grpo.toml", "chess_tutor_lora.toml"):
        shutil.copy(support.SPECS / name, tmp_path / "specs" / name)
    bundles = []
    for name in ("chess_tutor_grpo.toml", "chess_tutor_lora.toml"):
        done = support.cli("compile", f"specs/{name}", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        bundles.append(done.stdout.strip().splitlines()[-1])
    return tmp_path, bundles


def _json(result, rc: int = 0):
    assert result.returncode == rc, result.stdout + result.stderr
    return json.loads(result.stdout)


def _walk(parser: argparse.ArgumentParser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _walk(child, (*path, name))
    yield path, parser


def test_no_command_has_another_spelling_of_the_output_format():
    seen = {}
    for path, parser in _walk(cli.build_parser()):
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:
                continue
            # `-o/--output FILE` (where import writes its spec) names a file, not a format.
            names_a_file = action.metavar is not None and action.choices is None and action.nargs is None
            assert names_a_file or not {"--json", "--output", "--output-format", "-o"} & set(action.option_strings), path
            if "--format" in action.option_strings:
                seen[" ".join(path)] = tuple(action.choices)
                assert "json" in action.choices and action.dest == "format"
    for command in ("runs", "evidence", "diff", "migrate", "check", "verify", "schema", "keys list"):
        assert command in seen, f"tutorrl {command} has no --format"


def test_verify(tree):
    root, (bundle, _) = tree
    doc = _json(support.cli("verify", bundle, "--format", "json", cwd=root))
    assert doc["ok"] is True and doc["bundle"] == bundle and doc["digest"].startswith("sha256:")
    assert doc["evidence_records"] == 0 and doc["problems"] == []
    (root / bundle / "launch.sh").write_text("echo edited\n")
    doc = _json(support.cli("verify", bundle, "--format", "json", cwd=root), rc=2)
    assert doc["ok"] is False and "launch.sh was modified" in doc["problems"][0]


def test_runs(tree):
    root, (bundle, _) = tree
    assert _json(support.cli("runs", bundle, "--format", "json", cwd=root)) == []
    # A real run record, claimed and written by the runtime's own record code.
    from tutorrl.runtime import records

    attempt, run_dir = records.claim_run_dir(root / bundle, bundle.split("/")[-1])
    rec = records.RunRecord(schema=records.SCHEMA, run_id=run_dir.name, bundle="sha256:x",
                            submission_id=records.submission_id(bundle.split("/")[-1], attempt), attempt=attempt,
                            address_kind="embedded", address="embedded", dry_run=True,
                            versions=records.Versions(tutorrl="0", ray=None, python="3", verl=None),
                            started=records.utc_now(), status="succeeded", working_dir_upload=False, cwd=str(root))
    records.create_record(run_dir, rec)
    (doc,) = _json(support.cli("runs", bundle, "--format", "json", cwd=root))
    assert doc["run_id"] == run_dir.name and doc["status"] == "succeeded" and doc["dry_run"] is True
    # The first spelling still works, hidden from --help.
    assert _json(support.cli("runs", bundle, "--json", cwd=root)) == [doc]
    assert "--json" not in support.cli("runs", "--help").stdout


def test_diff_and_migrate_and_schema_and_keys(tree):
    root, (a, b) = tree
    doc = _json(support.cli("diff", a, b, "--format", "json", cwd=root), rc=1)
    assert doc["same"] is False and doc["old"]["label"] == a
    doc = _json(support.cli("migrate", "specs/chess_tutor_grpo.toml", "--to", "0.8.0", "--format", "json", cwd=root))
    assert doc["from"] == "0.9.1" and doc["to"] == "0.8.0" and isinstance(doc["settings"], list)
    doc = _json(support.cli("schema", "--format", "json"))
    assert doc["$schema"].startswith("https://json-schema.org/draft/2020-12")
    rows = _json(support.cli("keys", "list", "--format", "json"))
    assert any(r["release"] == "0.9.1" and r["variant"] == "fsdp" and r["keys"] > 100 for r in rows)


def test_check(tree):
    root, (a, b) = tree
    doc = _json(support.cli("check", "--format", "json", cwd=root))
    assert doc["ok"] is True and doc["exit_code"] == 0 and doc["fix"] == []
    assert sorted(s["bundle"] for s in doc["specs"]) == sorted([a, b]) and {s["state"] for s in doc["specs"]} == {"ok"}
    spec = root / "specs" / "chess_tutor_grpo.toml"
    text = spec.read_text()
    assert "\nlr = 1e-06\n" in text
    spec.write_text(text.replace("\nlr = 1e-06\n", "\nlr = 2e-06\n"))
    doc = _json(support.cli("check", "--format", "json", cwd=root), rc=1)
    (stale,) = [s for s in doc["specs"] if s["state"] != "ok"]
    assert stale["state"] == "stale" and stale["spec"] == "specs/chess_tutor_grpo.toml"
    assert any(c["setting"] == "actor.lr" for c in stale["diff"]["experiment"])
    assert doc["orphans"][0]["bundle"] == a

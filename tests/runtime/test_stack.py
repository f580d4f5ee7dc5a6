"""The training stack: the committed constraints (runtime/stacks/, written by
tools/stacks.py where the index is reachable) against pyproject's extras and
verl's own requirements, and the preflight check run for real in this test
environment's Python (verl 0.9.1 and TransferQueue on a CPU torch, no rollout
engine: what it lacks is what the check must name)."""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import msgspec
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from runtime_helpers import clean_env, run_tutorrl
from tutorrl.compiler.spec import Spec
from tutorrl.runtime import preflight
from tutorrl.runtime import stack as stacks

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
RECORDED = [(r, e) for r in stacks.releases() for e in stacks.engines(r)]


def _requirements(*groups: str) -> list[Requirement]:
    out = []
    for group in groups:
        reqs = PROJECT["dependencies"] if group == "core" else PROJECT["optional-dependencies"][group]
        out += [Requirement(r) for r in reqs]
    return out


def _unmet(requirements, pins: dict[str, str], *, absent_ok: bool = False) -> list[str]:
    """Requirements the pinned set does not satisfy; a name it lacks too,
    unless ``absent_ok`` (pip's -c leaves a name it does not list free)."""
    bad = []
    for req in requirements:
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        have = pins.get(canonicalize_name(req.name))
        if have is None and absent_ok:
            continue
        if have is None or (req.specifier and not req.specifier.contains(have, prereleases=True)):
            bad.append(f"{req} (pinned: {have})")
    return bad


def test_every_release_with_a_stack_has_both_engines_and_0_9_1_is_one():
    assert ("0.9.1", "sglang") in RECORDED and ("0.9.1", "vllm") in RECORDED
    for release, engine in RECORDED:
        path = stacks.constraints_file(release, engine)
        text = path.read_text()
        assert re.search(r"^# Written by tools/stacks.py on \d{4}-\d\d-\d\d \(pip ", text, re.M), path
        pins, python = stacks.read_constraints(path)
        assert python == "3.11" and pins["verl"] == release
        stack = stacks.stack_for(release, engine)
        assert [k for k in stack.key if canonicalize_name(k) not in pins] == []
        # The engine is in the set, and TransferQueue, which every v1 run imports.
        assert canonicalize_name(engine) in pins and "transferqueue" in pins


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_pyproject_extras_install_inside_the_recorded_set(engine):
    """`pip install 'tutorrl[ray,verl,<engine>]' -c verl-0.9.1-<engine>.txt` can
    only resolve if the extras admit every pin; what the stack resolved from
    must be pinned as asked."""
    pins, _ = stacks.read_constraints(stacks.constraints_file("0.9.1", engine))
    assert _unmet(_requirements("core", "ray", "verl", engine), pins, absent_ok=True) == []
    assert _unmet(_requirements("verl", engine), pins) == []  # the stack itself is in the set
    data = tomllib.loads((stacks.STACKS / "stacks.toml").read_text())
    resolved_from = [Requirement(r) for r in data["release"]["0.9.1"]["engine"][engine]["resolve"]]
    assert _unmet(resolved_from, pins) == []


@pytest.mark.parametrize("release,engine", RECORDED)
def test_recorded_set_meets_verls_own_requirements(release, engine):
    """verl 0.9.1's declared requirements (read from the installed wheel's
    metadata, here) hold for the pinned set: transformers inside
    >=5.5.3,!=5.6.0,<5.11 is why sglang 0.5.14 and not 0.5.12."""
    assert metadata.version("verl") == release
    pins, _ = stacks.read_constraints(stacks.constraints_file(release, engine))
    assert _unmet([Requirement(r) for r in metadata.requires("verl")], pins) == []
    assert pins["transformers"] != "5.6.0"


def test_extras_declared_but_unused_are_gone():
    extras = PROJECT["optional-dependencies"]
    assert "megatron" not in extras
    assert all(not r.startswith("torch") for group in ("verl", "sglang", "vllm") for r in extras[group])


def _venv_stack(engine: str) -> stacks.Stack:
    return stacks.stack_for("0.9.1", engine)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_check_names_exactly_what_this_python_lacks(engine):
    """Real probe of this test environment: verl's start modules import
    (transfer_queue among them); the rollout server does not, for want of the
    engine; and the versions that differ from the pins are named."""
    stack = _venv_stack(engine)
    found = stacks.probe(sys.executable, stack)
    assert found["modules"] == {m: None for m in stack.modules}  # main_ppo, transfer_queue, ppo.v1, workers
    # sglang's server module fails on `import sglang`; verl 0.9.1 reports a
    # missing vLLM as "vllm version None not supported" (compare names it).
    assert found["versions"][engine] is None and found["replica"] is not None
    (imports,) = stacks.compare(stack, found, sys.executable)
    (versions,) = stacks.differences(stack, found, sys.executable)
    assert f"the {engine} rollout server (needs '{engine}', not installed: {engine}=={stack.pins[engine]})" \
        in imports
    assert "transfer_queue" not in imports and "verl.trainer" not in imports
    assert f"-m pip install -r {stacks.constraints_file('0.9.1', engine)}" in imports
    differ = [k for k in stack.key if k != "verl" and _installed(k)
              and metadata.version(k).split("+")[0] != stack.pins[canonicalize_name(k)]]
    assert differ, "this CPU test environment differs from a GPU stack at least in torch"
    for name in differ:
        assert f"{name} {metadata.version(name)} (the stack pins {stack.pins[canonicalize_name(name)]})" in versions
    missing = [k for k in stack.key if not _installed(k) and k != engine]
    for name in missing:
        assert f"{name} is not installed" in versions
    # The engine itself is named once, in the import finding, not again as a version.
    assert f"{engine} is not installed" not in versions


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def test_compare_with_this_pythons_own_versions():
    """The comparison against real importlib.metadata answers: pins equal to
    what is installed give nothing; one pin moved is named alone."""
    key = ("torch", "transformers", "tensordict", "TransferQueue", "ray")
    versions = {k: metadata.version(k) for k in key}
    pins = {canonicalize_name(k): v.split("+")[0] for k, v in versions.items()}
    stack = stacks.Stack(release="0.9.1", engine="vllm", modules=("json",), replica="", key=key, pins=pins,
                         provides={}, constraints=None, resolved_for="3.11")
    found = {"versions": versions, "modules": {"json": None}, "replica": None}
    assert stacks.compare(stack, found, "/py") == [] and stacks.differences(stack, found, "/py") == []
    moved = dict(pins, transformers="5.8.1")
    stack = stacks.Stack(**{**stack.__dict__, "pins": moved})
    assert stacks.compare(stack, found, "/py") == []  # every module imports: nothing refuses the run
    (note,) = stacks.differences(stack, found, "/py")
    assert f"transformers {versions['transformers']} (the stack pins 5.8.1)" in note
    assert "torch" not in note.split("):", 1)[1].split(";")[0]
    assert "-m pip install 'tutorrl[verl]'" in note  # no constraints file given


def test_a_probe_that_cannot_run_is_a_finding(tmp_path):
    stack = _venv_stack("vllm")
    (problem,) = stacks.compare(stack, stacks.probe(str(tmp_path / "no-python"), stack), "x")
    assert "does not exist" in problem


def _spec(engine="vllm", verl="0.9.1", strategy=None):
    actor = {} if strategy is None else {"strategy": strategy}
    rollout = {} if engine is None else {"engine": engine}
    return msgspec.convert({"experiment": {"verl": verl}, "rollout": rollout, "actor": actor}, Spec)


def test_check_stack_notes_where_it_does_not_refuse(tmp_path, monkeypatch):
    monkeypatch.delenv("TUTORRL_PYTHON", raising=False)
    monkeypatch.setenv("TUTORRL_STACK_CHECK", "skip")
    f = preflight.Findings()
    preflight.check_stack(_spec(), {}, f, cwd=tmp_path)
    assert f.problems == [] and f.notes == ["training stack not checked (TUTORRL_STACK_CHECK=skip)"]
    monkeypatch.delenv("TUTORRL_STACK_CHECK")
    f = preflight.Findings()
    preflight.check_stack(_spec(), {}, f, cwd=tmp_path, cluster="http://head:8265")
    assert f.problems == [] and "the cluster's Python is not checked here" in f.notes[0]
    assert "verl-0.9.1-vllm.txt" in f.notes[0]
    f = preflight.Findings()
    preflight.check_stack(_spec(verl="0.8.0"), {}, f, cwd=tmp_path)
    assert f.problems == [] and "no training stack is recorded for verl 0.8.0" in f.notes[0]


@pytest.mark.slow
def test_check_stack_refuses_a_run_that_cannot_start_and_notes_the_rest(tmp_path, monkeypatch):
    monkeypatch.delenv("TUTORRL_PYTHON", raising=False)
    monkeypatch.delenv("TUTORRL_STACK_CHECK", raising=False)
    f = preflight.Findings()
    preflight.check_stack(_spec("sglang"), {}, f, cwd=tmp_path)
    assert len(f.problems) == 1 and "the sglang rollout server" in f.problems[0]
    # This CPU environment's torch is not the recorded CUDA build: said, not refused.
    assert any("differs from the recorded stack" in n and "torch" in n for n in f.notes)
    f = preflight.Findings()
    preflight.check_stack(_spec("sglang"), {}, f, cwd=tmp_path, dry_run=True)
    assert f.problems == [] and len(f.notes) == 1
    assert "checked on a real run, not a dry run" in f.notes[0] and "sglang rollout server" in f.notes[0]
    # Megatron: verl only warns when megatron.core is missing; the check names it.
    f = preflight.Findings()
    preflight.check_stack(_spec("vllm", strategy="megatron"), {}, f, cwd=tmp_path)
    assert "megatron.core (not installed: megatron-core)" in f.problems[0]
    # The "hf" engine has no recorded set: the start modules are still checked.
    f = preflight.Findings()
    preflight.check_stack(_spec("hf"), {}, f, cwd=tmp_path)
    assert any("rollout.engine hf: no constraints recorded" in n for n in f.notes)


@pytest.mark.slow
def test_run_is_refused_through_the_cli_naming_the_engine(make_bundle, workdir):
    bundle = make_bundle()  # rollout.engine = "vllm"
    env = clean_env()
    del env["TUTORRL_STACK_CHECK"]
    proc = run_tutorrl(["run", str(bundle)], workdir, env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "verl 0.9.1's training stack with vllm: the job's Python" in proc.stderr
    assert "the vllm rollout server" in proc.stderr and "vllm==0.24.0" in proc.stderr
    assert "refused by preflight (local checks); nothing was submitted." in proc.stderr
    assert not (bundle / "runs").exists()

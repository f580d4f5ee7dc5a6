"""The training stack: the committed constraints (runtime/stacks/, written by
tools/stacks.py where the index is reachable) against pyproject's extras and
each release's own declared requirements and source (its wheel, from the
shared wheel cache the key-set tests use), and the preflight check run for
real in this test environment's Python (verl 0.9.1 and TransferQueue on a CPU
torch, no rollout engine: what it lacks is what the check must name)."""

from __future__ import annotations

import email
import re
import sys
import tomllib
import zipfile
from functools import cache
from importlib import metadata
from pathlib import Path

import msgspec
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from runtime_helpers import clean_env, run_tutorrl
from tutorrl.compiler.release import keyset_import as ki
from tutorrl.compiler.release.keymap import load_keymap
from tutorrl.compiler.spec.structs import Spec
from tutorrl.runtime import preflight, stack as stacks

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
DATA = tomllib.loads((stacks.STACKS / "stacks.toml").read_text())
ALL = [(r, e) for r in stacks.releases() for e in stacks.engines(r)]
RECORDED = [(r, e) for r, e in ALL if "unresolvable" not in DATA["release"][r]["engine"][e]]
UNRESOLVABLE = [(r, e) for r, e in ALL if (r, e) not in RECORDED]


def _requirements(*groups: str) -> list[Requirement]:
    out = []
    for group in groups:
        reqs = PROJECT["dependencies"] if group == "core" else PROJECT["optional-dependencies"][group]
        out += [Requirement(r) for r in reqs]
    return out


def _unmet(requirements, pins: dict[str, str], *, absent_ok: bool = False, extra: str = "") -> list[str]:
    """Requirements the pinned set does not satisfy; a name it lacks too,
    unless ``absent_ok`` (pip's -c leaves a name it does not list free)."""
    bad = []
    for req in requirements:
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        have = pins.get(canonicalize_name(req.name))
        if have is None and absent_ok:
            continue
        if have is None or (req.specifier and not req.specifier.contains(have, prereleases=True)):
            bad.append(f"{req} (pinned: {have})")
    return bad


@cache
def _wheel(release: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(ki.fetch_wheel(release))
    except ki.KeysetImportError as exc:
        pytest.fail(f"verl {release} wheel unavailable (needs the package index or a cached wheel): {exc}")


def _wheel_requires(release: str) -> list[Requirement]:
    wheel = _wheel(release)
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return [Requirement(r) for r in email.message_from_bytes(wheel.read(name)).get_all("Requires-Dist", [])]


def _source(release: str, module: str) -> str | None:
    """The module's source in the release's wheel, or None when the wheel has no such module."""
    names = set(_wheel(release).namelist())
    for path in (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py"):
        if path in names:
            return _wheel(release).read(path).decode()
    return None


def _imports(source: str, module: str) -> bool:
    return re.search(rf"^\s*(from {re.escape(module)} import|import {re.escape(module)}\b)", source, re.M) is not None


def _imported_by(release: str, importer: str, module: str) -> bool:
    """``importer`` (or, for a package, a module directly in it) imports ``module``."""
    prefix = importer.replace(".", "/") + "/"
    names = [n for n in _wheel(release).namelist()
             if n.startswith(prefix) and n.endswith(".py") and "/" not in n[len(prefix):]]
    sources = [_source(release, importer) or ""] + [_wheel(release).read(n).decode() for n in names]
    return any(_imports(source, module) for source in sources)


def test_every_supported_release_has_a_record_for_both_engines():
    """The releases the key maps support are the releases with a stack; each
    has sglang and vLLM either resolved (a constraints file) or recorded
    unresolvable with a reason (and then no file)."""
    assert set(stacks.releases()) == set(load_keymap().releases)
    # The server engines for every release; the HF rollout (no engine package) where it trains on a CPU.
    assert set(ALL) == {(r, e) for r in stacks.releases() for e in ("sglang", "vllm")} | {("0.5.0", "hf")}
    for release, engine in ALL:
        path = stacks.constraints_file(release, engine)
        assert path.is_file() == ((release, engine) in RECORDED), path
    for release, engine in UNRESOLVABLE:
        assert len(DATA["release"][release]["engine"][engine]["unresolvable"].split()) > 5
        assert "resolve" not in DATA["release"][release]["engine"][engine]
    assert sorted(p.name for p in stacks.STACKS.glob("*.txt")) == sorted(
        stacks.constraints_file(r, e).name for r, e in RECORDED)


@pytest.mark.parametrize("release,engine", RECORDED)
def test_constraints_file_is_its_release_and_engine(release, engine):
    """Written by the tool for Python 3.11 from what stacks.toml says to
    resolve: verl pinned at the release, the engine in the set, every key
    package pinned, no local build (a `+cpu` torch is this machine's, not
    the index's), and each requirement it was resolved from met."""
    path = stacks.constraints_file(release, engine)
    text = path.read_text()
    assert re.search(r"^# Written by tools/stacks.py on \d{4}-\d\d-\d\d \(pip \S+, Linux x86_64\)", text, re.M), path
    pins, python = stacks.read_constraints(path)
    assert python == "3.11" and pins["verl"] == release
    spec = DATA["release"][release]["engine"][engine]
    for req in spec["resolve"]:
        assert f"#   {req}\n" in text
    assert _unmet([Requirement(r) for r in spec["resolve"]], pins) == []
    stack = stacks.stack_for(release, engine)
    assert stack.constraints == path and stack.unresolvable == ""
    assert [k for k in stack.key if canonicalize_name(k) not in pins] == []
    assert canonicalize_name(engine) in pins or engine == "hf"  # transformers' generate: no engine package
    assert [f"{n}=={v}" for n, v in pins.items() if "+" in v] == []
    if "transfer_queue" in stack.modules:
        assert "transferqueue" in pins
    install = "# Install: " + (f"pip install 'tutorrl[verl,{engine}]' -c " if release == "0.9.1" else "pip install -r ")
    assert install + f"runtime/stacks/{path.name}\n" in text


@pytest.mark.wheels
@pytest.mark.parametrize("release,engine", RECORDED)
def test_recorded_set_meets_the_releases_own_requirements(release, engine):
    """The release's declared requirements (its wheel's metadata) hold for
    the pinned set; where the set was resolved from verl's own engine extra,
    that extra's requirements hold too. Where it was not, the extra is
    recorded as refused (the reason is in stacks.toml)."""
    pins, _ = stacks.read_constraints(stacks.constraints_file(release, engine))
    requires = _wheel_requires(release)
    assert _unmet(requires, pins) == []
    spec = DATA["release"][release]["engine"][engine]
    extra = f"verl[{engine}]=={release}"
    extras = {e for r in requires if r.marker is not None for e in re.findall(r'extra == "([^"]+)"', str(r.marker))}
    if engine in extras and extra not in spec["resolve"]:
        assert spec["refused"] == [extra] and "ResolutionImpossible" in spec["why"]
    if extra in spec["resolve"]:
        assert _unmet(requires, pins, extra=engine) == []


@pytest.mark.wheels
@pytest.mark.parametrize("release", stacks.releases())
def test_start_modules_are_what_the_releases_trainer_imports(release):
    """Read from the release's own source: main_ppo exists, and every other
    start module is imported by one listed before it (transfer_queue by
    main_ppo on 0.9.x); each engine's module is imported by the worker that
    builds the rollout; the replica loader exists and registers both engines
    where one is recorded, and releases before it have engine modules instead."""
    rel = DATA["release"][release]
    modules = rel["modules"]
    assert modules[0] == "verl.trainer.main_ppo"
    for i, module in enumerate(modules[1:], 1):
        if module.startswith("verl."):
            assert _source(release, module) is not None, module
        assert any(_imported_by(release, m, module) for m in modules[:i] if m.startswith("verl.")), module
    for module in rel.get("variant", {}).get("megatron", {}).get("modules", []):
        if module.startswith("verl."):
            assert _imports(_source(release, "verl.trainer.main_ppo"), module), module
    workers = [m for m in modules if m.endswith("_workers")]
    for spec in rel["engine"].values():
        for module in spec.get("modules", []):
            assert not rel.get("replica")
            assert _source(release, module) is not None, module
            assert any(_imports(_source(release, w), module) for w in workers), module
    replica = rel.get("replica", "")
    if replica:
        where, _, function = replica.partition(":")
        source = _source(release, where)
        assert f"def {function}(" in source
        assert all(f'register("{e}"' in source for e in rel["engine"])
    else:
        assert _source(release, "verl.workers.rollout.replica") is None
        assert all(spec.get("modules") or spec.get("unresolvable") for spec in rel["engine"].values())


@pytest.mark.parametrize("release,engine", UNRESOLVABLE)
def test_an_unresolvable_stack_is_noted_with_its_reason(release, engine, tmp_path, monkeypatch):
    """Preflight says why there is no set for the release and engine (a note)
    and still checks the start modules; a cluster's note says it too."""
    monkeypatch.delenv("TUTORRL_PYTHON", raising=False)
    monkeypatch.delenv("TUTORRL_STACK_CHECK", raising=False)
    why = " ".join(DATA["release"][release]["engine"][engine]["unresolvable"].split())
    stack = stacks.stack_for(release, engine)
    assert stack.engine == engine and stack.unresolvable == why and stack.constraints is None
    f = preflight.PreflightReport()
    preflight.check_stack(_spec(engine, verl=release), {}, f, cwd=tmp_path, dry_run=True)
    assert f.notes[0] == f"verl {release} with {engine}: no installable stack is recorded " \
                         f"(runtime/stacks/stacks.toml): {why}"
    assert f.problems == []
    # A start module the job's Python lacks: the finding says there is no set
    # to install, and why, instead of a pip command.
    found = {"versions": {}, "modules": {stack.modules[-1]: {"kind": "missing", "name": "verl"}}, "replica": None}
    (problem,) = stacks.compare(stack, found, "/py")
    assert problem.endswith(f"; no installable stack is recorded for verl {release} with {engine} ({why})")
    assert "-m pip install" not in problem
    f = preflight.PreflightReport()
    preflight.check_stack(_spec(engine, verl=release), {}, f, cwd=tmp_path, cluster="http://head:8265")
    assert f.problems == [] and why in f.notes[0]


def test_pre_registry_engine_module_failing_without_the_engine_names_the_engine():
    """verl up to 0.5.0 imports the engine through its rollout package, which
    raises its own error (PackageNotFoundError) when vLLM is absent: the
    finding names vllm with its pin, not verl's words."""
    stack = stacks.stack_for("0.5.0", "vllm")
    assert stack.engine_modules == ("verl.workers.rollout.vllm_rollout",) and stack.replica == ""
    found = {"versions": {k: None if k == "vllm" else stack.pins[canonicalize_name(k)] for k in stack.key},
             "modules": {m: None for m in stack.modules}, "replica": None}
    found["modules"]["verl.workers.rollout.vllm_rollout"] = {
        "kind": "error", "error": "PackageNotFoundError: To use vllm rollout, please ...", "where": "x.py:1"}
    (problem,) = stacks.compare(stack, found, "/py")
    assert (f"verl.workers.rollout.vllm_rollout (needs 'vllm', not installed: vllm=={stack.pins['vllm']})"
            in problem)
    assert "PackageNotFoundError" not in problem and "pip install -r" in problem


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


def test_extras_declared_but_unused_are_gone():
    extras = PROJECT["optional-dependencies"]
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


@pytest.mark.needs_ray
@pytest.mark.needs_verl
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
    assert "-m pip install 'verl==0.9.1'" in note  # no constraints file given


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
    f = preflight.PreflightReport()
    preflight.check_stack(_spec(), {}, f, cwd=tmp_path)
    assert f.problems == [] and f.notes == ["training stack not checked (TUTORRL_STACK_CHECK=skip)"]
    monkeypatch.delenv("TUTORRL_STACK_CHECK")
    f = preflight.PreflightReport()
    preflight.check_stack(_spec(), {}, f, cwd=tmp_path, cluster="http://head:8265")
    assert f.problems == [] and "the cluster's Python is not checked here" in f.notes[0]
    assert "verl-0.9.1-vllm.txt" in f.notes[0]
    f = preflight.PreflightReport()
    preflight.check_stack(_spec(verl="0.1.0"), {}, f, cwd=tmp_path)
    assert f.problems == [] and "no training stack is recorded for verl 0.1.0" in f.notes[0]


@pytest.mark.slow
def test_check_stack_refuses_a_run_that_cannot_start_and_notes_the_rest(tmp_path, monkeypatch):
    monkeypatch.delenv("TUTORRL_PYTHON", raising=False)
    monkeypatch.delenv("TUTORRL_STACK_CHECK", raising=False)
    f = preflight.PreflightReport()
    preflight.check_stack(_spec("sglang"), {}, f, cwd=tmp_path)
    assert len(f.problems) == 1 and "the sglang rollout server" in f.problems[0]
    # This CPU environment's torch is not the recorded CUDA build: said, not refused.
    assert any("differs from the recorded stack" in n and "torch" in n for n in f.notes)
    f = preflight.PreflightReport()
    preflight.check_stack(_spec("sglang"), {}, f, cwd=tmp_path, dry_run=True)
    assert f.problems == [] and len(f.notes) == 1
    assert "checked on a real run, not a dry run" in f.notes[0] and "sglang rollout server" in f.notes[0]
    # Megatron: verl only warns when megatron.core is missing; the check names it.
    f = preflight.PreflightReport()
    preflight.check_stack(_spec("vllm", strategy="megatron"), {}, f, cwd=tmp_path)
    assert "megatron.core (not installed: megatron-core)" in f.problems[0]
    # The "hf" engine has no recorded set: the start modules are still checked.
    f = preflight.PreflightReport()
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

"""The raw-override screen (compiler/pipeline/raw_overrides.py), fed what a hostile spec author writes
(issue 43): Ray runtime_env keys that run code, config groups placed in Hydra's own package, resolver
interpolations that pull the launching environment in; and a property test over Hydra's override grammar."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import support
from tutorrl.compiler import compile_bytes
from tutorrl.compiler.pipeline import raw_overrides
from tutorrl.compiler.pipeline.raw_overrides import screen_override
from tutorrl.errors import SpecError

_RUNTIME_ENV = "ray_kwargs.ray_init.runtime_env"


def _spec(field: str, override: str, **verl) -> bytes:
    return support.spec_toml(experiment={"verl": "0.9.1"}, verl={field: [override], **verl}).encode()


def _refusal(raw: bytes):
    with pytest.raises(SpecError) as info:
        compile_bytes(raw, "spec.toml")
    (problem,) = info.value.problems
    return problem


@pytest.mark.parametrize("field", ["extra_overrides", "unread_overrides"])
@pytest.mark.parametrize("name", ["worker_process_setup_hook", "py_executable", "pip", "uv", "conda", "py_modules",
                                  "working_dir", "image_uri", "container", "plugins", "some_future_key"])
def test_every_runtime_env_key_but_env_vars_is_refused_by_name(field, name):
    problem = _refusal(_spec(field, f"+{_RUNTIME_ENV}.{name}=x"))
    assert problem.key == f"verl.{field}.0" and problem.file == "spec.toml" and problem.line is not None
    assert problem.message == (f"'{_RUNTIME_ENV}.{name}' sets Ray's runtime_env.{name}, which runs or installs "
                               "code in every Ray worker of the job")
    assert f'add "{name}" to [verl] allow_runtime_env' in problem.hint


def test_the_key_before_verl_0_6_is_screened_alike():
    assert screen_override("+ray_init.runtime_env.py_modules=[/x]") is not None
    assert screen_override("+ray_init.runtime_env.env_vars.NCCL_DEBUG=WARN") is None


def test_a_runtime_env_key_the_spec_names_compiles_into_the_bundle_and_its_hash():
    override = f"+{_RUNTIME_ENV}.working_dir=/opt/project"
    allowed = compile_bytes(_spec("extra_overrides", override, allow_runtime_env=["working_dir"]), "spec.toml")
    assert override in allowed.files["launch.sh"].decode()
    assert b'allow_runtime_env = [\n    "working_dir",\n]' in allowed.files["spec.toml"]
    # Naming another key does not let this one through.
    assert "runtime_env.working_dir" in _refusal(_spec("extra_overrides", override, allow_runtime_env=["pip"])).message
    # An empty list is no list: the bundles written before the field are the same bundles.
    plain = support.spec_toml(experiment={"verl": "0.9.1"})
    assert compile_bytes(plain.encode(), "s.toml").id == compile_bytes(
        support.spec_toml(experiment={"verl": "0.9.1"}, verl={"allow_runtime_env": []}).encode(), "s.toml").id


_BACKEND = "actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module"


@pytest.mark.parametrize("field", ["extra_overrides", "unread_overrides"])
def test_a_key_that_makes_every_worker_import_code_is_refused_unless_the_spec_names_it(field):
    override = f"{_BACKEND}=my_engine"
    problem = _refusal(_spec(field, override))
    assert problem.key == f"verl.{field}.0" and problem.line is not None
    assert problem.message == (f"'{_BACKEND}' names code verl runs in the job: every worker that syncs weights "
                               "(the actor's and the rollout's) imports the module it names")
    assert 'add "checkpoint_engine.custom_backend_module" to [verl] allow_worker_code' in problem.hint
    # Named on purpose: it compiles into the launch and into the bundle's spec (so its hash and a diff show it).
    allowed = compile_bytes(_spec("extra_overrides", override,
                                  allow_worker_code=["checkpoint_engine.custom_backend_module"]), "spec.toml")
    assert override in allowed.files["launch.sh"].decode()
    assert b'allow_worker_code = [\n    "checkpoint_engine.custom_backend_module",\n]' in allowed.files["spec.toml"]
    # Naming a runtime_env key does not let it through, and an empty list is no list.
    assert "names code verl runs" in _refusal(_spec("extra_overrides", override, allow_runtime_env=["pip"])).message
    plain = support.spec_toml(experiment={"verl": "0.9.1"})
    assert compile_bytes(plain.encode(), "s.toml").id == compile_bytes(
        support.spec_toml(experiment={"verl": "0.9.1"}, verl={"allow_worker_code": []}).encode(), "s.toml").id


def test_env_vars_cannot_be_named_in_allow_runtime_env():
    # env_vars is held to [env] set's rules (rules.py); naming it would read as a way around them.
    with pytest.raises(SpecError) as info:
        compile_bytes(_spec("extra_overrides", "+data.x=1", allow_runtime_env=["env_vars"]), "spec.toml")
    assert [p.key for p in info.value.problems] == ["verl.allow_runtime_env.0"]


def test_diff_shows_the_runtime_env_keys_a_spec_allows(tmp_path):
    import tutorrl

    override = f"+{_RUNTIME_ENV}.working_dir=/opt/project"
    old, new = tmp_path / "old.toml", tmp_path / "new.toml"
    old.write_text(support.spec_toml(experiment={"verl": "0.9.1"}))
    new.write_bytes(_spec("extra_overrides", override, allow_runtime_env=["working_dir"]))
    diff = tutorrl.diff(old, new)
    (said,) = [c for c in diff.spec_only if c.setting == "verl.allow_runtime_env"]
    assert said.new == ["working_dir"] and said.note == "the Ray runtime_env keys raw overrides may set"


@pytest.mark.parametrize("field", ["extra_overrides", "unread_overrides"])
@pytest.mark.parametrize("override,package", [("+actor@hydra.job.env_set=dp_actor", "hydra.job.env_set"),
                                              ("+ref@hydra.callbacks=dp_ref", "hydra.callbacks"),
                                              ("+rollout@hydra=rollout", "hydra"),
                                              ("+rollout@_global_.hydra.run=rollout", "_global_.hydra.run")])
def test_a_config_group_placed_in_hydras_package_is_refused(field, override, package):
    problem = _refusal(_spec(field, override))
    group = override[1:].split("@")[0]
    assert problem.key == f"verl.{field}.0"
    assert problem.message.startswith(f"'{override[1:].split('=')[0]}' places the config group '{group}' in "
                                      f"package '{package}', which is Hydra's own")


def test_a_config_group_placed_at_the_root_is_refused():
    (message, _) = screen_override("+rollout@_global_=rollout")
    assert "at the root of the config, where it can configure Hydra itself" in message


@pytest.mark.parametrize("field", ["extra_overrides", "unread_overrides"])
@pytest.mark.parametrize("override,shown", [
    ("+zz=${oc.env:HF_TOKEN}", "${oc.env:HF_TOKEN}"),
    (f"+{_RUNTIME_ENV}.env_vars.LOG_LEVEL=${{oc.env:HF_TOKEN}}", "${oc.env:HF_TOKEN}"),
    ("+zz='prefix ${oc.decode:${oc.env:X}}'", "${oc.decode:${oc.env:X}"),
    ("+zz=${my_resolver:1,2}", "${my_resolver:1,2}"),
])
def test_a_resolver_interpolation_is_refused_pointing_at_env_passthrough(field, override, shown):
    problem = _refusal(_spec(field, override))
    assert problem.message.startswith(f"'{shown}' is a resolver interpolation: verl would resolve it when the job "
                                      "runs, reading the launching environment")
    assert "env.passthrough" in problem.hint


def test_a_plain_interpolation_of_verls_config_passes_the_screen():
    assert screen_override("actor_rollout_ref.rollout.n=${data.train_batch_size}") is None
    assert screen_override("+trainer.x=${.sibling}") is None


def test_the_screen_loads_hydra_only_for_a_key_that_names_a_package():
    code = ("import sys; from tutorrl.compiler.pipeline.raw_overrides import screen_override as s; "
            "s('+zz=${oc.env:X}'); s('+ray_kwargs.ray_init.runtime_env.pip=[x]'); s('data.x=1'); "
            "print('hydra' in sys.modules); s('+a@hydra=b'); print('hydra' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


# -- the grammar, generated: every fragment Hydra's override grammar has, against what the screen must say ---------

_PLAIN_KEYS = ["data.train_batch_size", "trainer.x", "actor_rollout_ref.actor.optim.lr", "hydra_like.key",
               "ray_kwargs.ray_init.num_cpus", f"{_RUNTIME_ENV}.env_vars.NCCL_DEBUG"]
_HYDRA_KEYS = ["hydra", "hydra.run.dir", "hydra.job.chdir", "hydra/launcher", "hydra/job_logging"]
_RUNTIME_KEYS = [f"{_RUNTIME_ENV}.{n}" for n in ("pip", "working_dir", "py_executable", "worker_process_setup_hook")]
_WORKER_CODE_NAME = "checkpoint_engine.custom_backend_module"
_WORKER_CODE_KEYS = [f"actor_rollout_ref.rollout.{_WORKER_CODE_NAME}", _WORKER_CODE_NAME]
_GROUPS = ["actor", "ref", "rollout", "critic", "data", "model/llm"]
_SAFE_PACKAGES = ["actor_rollout_ref.actor", "actor_rollout_ref.rollout", "critic", "hydra_like"]
_HYDRA_PACKAGES = ["hydra", "hydra.job.env_set", "hydra.callbacks", "_global_.hydra", "_global_.hydra.run",
                   "_global_"]
_SAFE_VALUES = ["1", "x", "'a b'", '"quoted, with comma"', "[a,b]", "{a:1,b:[2,3]}", "${data.train_batch_size}",
                "'in ${trainer.x} quotes'", "null", "1e-6"]
_RESOLVER_VALUES = ["${oc.env:HF_TOKEN}", "${oc.decode:'1'}", "'${oc.env:X}'", "\\${oc.env:X}", "${my:1,2}",
                    "a${oc.env:X}b", "${${a}:b}", "[${oc.env:X}]", "{k:${oc.select:a,b}}", "${ oc.env : X }"]


@st.composite
def _override(draw):
    """(text, must it be refused, the runtime_env key it sets or None)."""
    prefix = draw(st.sampled_from(["", "+", "++"]))
    kind = draw(st.sampled_from(["plain", "hydra_key", "runtime", "worker_code", "group_safe", "group_hydra"]))
    if kind == "plain":
        key, refused = draw(st.sampled_from(_PLAIN_KEYS)), False
    elif kind == "hydra_key":
        key, refused = draw(st.sampled_from(_HYDRA_KEYS)), True
    elif kind == "runtime":
        key, refused = draw(st.sampled_from(_RUNTIME_KEYS)), True
    elif kind == "worker_code":
        key, refused = draw(st.sampled_from(_WORKER_CODE_KEYS)), True
    elif kind == "group_safe":
        key, refused = f"{draw(st.sampled_from(_GROUPS))}@{draw(st.sampled_from(_SAFE_PACKAGES))}", False
    else:
        key, refused = f"{draw(st.sampled_from(_GROUPS))}@{draw(st.sampled_from(_HYDRA_PACKAGES))}", True
    resolver = draw(st.booleans())
    value = draw(st.sampled_from(_RESOLVER_VALUES if resolver else _SAFE_VALUES))
    if kind.startswith("group") and value.startswith(("{", "[", "${")):
        value = "choice"  # a group takes a name; Hydra's reading of the rest is a value's, tested above
        resolver = False
    allow = {"runtime": key.rsplit(".", 1)[-1], "worker_code": _WORKER_CODE_NAME}.get(kind)
    return f"{prefix}{key}={value}", refused or resolver, allow


@settings(max_examples=400, deadline=None)
@given(_override(), st.booleans())
def test_the_screen_refuses_exactly_what_the_grammar_says_reaches_hydra_ray_or_the_environment(case, allow):
    text, refused, runtime_key = case
    allowed = frozenset({runtime_key}) if allow and runtime_key else frozenset()
    said = screen_override(text, allowed)
    if runtime_key and allow:
        # Named in allow_runtime_env (allow_worker_code): only a resolver in its value is left to refuse.
        refused = raw_overrides._resolver(text.partition("=")[2]) is not None
    assert (said is not None) == refused, (text, said)
    if said is not None:
        message, hint = said
        assert isinstance(message, str) and message and (hint is None or isinstance(hint, str))


@settings(max_examples=200, deadline=None)
@given(_override())
def test_hydras_parser_and_the_split_at_at_agree_on_every_group_key(case):
    text = case[0]
    with_hydra = screen_override(text)
    original = raw_overrides._hydra_key
    raw_overrides._hydra_key = lambda _text: None  # as on an install without Hydra
    try:
        without = screen_override(text)
    finally:
        raw_overrides._hydra_key = original
    assert with_hydra == without, text

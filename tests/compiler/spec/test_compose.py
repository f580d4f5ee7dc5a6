"""A spec that extends a base: merged key by key, every problem placed in the file that wrote the value."""

from __future__ import annotations

import tomllib

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

import support
from tutorrl.compiler import compile_bytes, verify_bundle, write_bundle
from tutorrl.compiler.pipeline.family import Source, compile_chain, compile_family
from tutorrl.compiler.spec.compose import Composed, Layer
from tutorrl.compiler.spec.toml_positions import key_positions
from tutorrl.errors import SpecError

BASE = (support.SPECS / "tiny_cpu_grpo.toml").read_bytes()
CONTENT = ("bundle.env", "launch.sh", "ray-job.json", "spec.toml")


def _line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(needle))


@pytest.fixture
def family(tmp_path):
    (tmp_path / "bases").mkdir()
    (tmp_path / "bases" / "base.toml").write_bytes(BASE)
    (tmp_path / "child.toml").write_text(
        '[experiment]\nextends = "bases/base.toml"\nname = "tiny-child"\n\n'
        '[data]\ntrain_batch_size = 8\n\n'
        '[trainer]\nloggers = ["console", "tensorboard"]\n\n'
        '[env]\nset = { EXTRA = "1" }\n')
    return tmp_path


def test_tables_merge_key_by_key_and_lists_replace(family):
    [launch] = compile_family(str(family / "child.toml"))
    merged = tomllib.loads(BASE.decode())
    merged["experiment"]["name"] = "tiny-child"
    merged["data"]["train_batch_size"] = 8
    merged["trainer"]["loggers"] = ["console", "tensorboard"]
    merged["env"]["set"]["EXTRA"] = "1"
    # The child's bundle is the bundle of the merged spec written as one file.
    alone = compile_bytes(tomli_w.dumps(merged).encode(), "merged.toml")
    assert {n: launch.bundle.files[n] for n in CONTENT} == {n: alone.files[n] for n in CONTENT}
    assert launch.bundle.id == alone.id
    spec = tomllib.loads(launch.bundle.files["spec.toml"].decode())
    assert spec["env"]["set"] == {"EXTRA": "1", "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
                                  "TRANSFORMERS_OFFLINE": "1"}
    assert "extends" not in spec["experiment"]


def test_the_manifest_records_each_source_and_verify_rederives_from_the_bundle_alone(family, tmp_path):
    import hashlib
    import json

    [launch] = compile_family(str(family / "child.toml"))
    manifest = json.loads(launch.bundle.files["manifest.json"])
    assert manifest["sources"] == {
        "child.toml": hashlib.sha256((family / "child.toml").read_bytes()).hexdigest(),
        "bases/base.toml": hashlib.sha256(BASE).hexdigest(),
    }
    folder = write_bundle(launch.bundle, tmp_path / "out").path
    # Moved away from its specs: the bundle proves itself from its own spec.toml.
    (family / "bases" / "base.toml").unlink()
    loaded = verify_bundle(folder)
    assert loaded.warnings == () and loaded.manifest.sources == manifest["sources"]


def test_a_plain_spec_keeps_its_manifest_without_provenance():
    [launch] = compile_family(str(support.SPECS / "tiny_cpu_grpo.toml"))
    assert b'"sources"' not in launch.bundle.files["manifest.json"]
    assert launch.bundle.files == compile_bytes(BASE, "x.toml").files


def test_a_value_overridden_is_placed_in_the_child_and_names_the_base(family):
    child = family / "child.toml"
    child.write_text(child.read_text().replace("train_batch_size = 8", "train_batch_size = 0"))
    with pytest.raises(SpecError) as caught:
        compile_family(str(child))
    [problem] = caught.value.problems
    base_line = _line_of(BASE.decode(), "train_batch_size")
    assert (problem.file, problem.line, problem.key) == (str(child), _line_of(child.read_text(), "train_batch_size"),
                                                         "data.train_batch_size")
    assert f"set in {family / 'bases' / 'base.toml'}:{base_line}, overridden in {child}:" in problem.message


def test_a_value_the_child_leaves_alone_is_placed_in_the_base(tmp_path):
    (tmp_path / "base.toml").write_bytes(BASE.replace(b"total_steps = 2", b"total_steps = -3"))
    (tmp_path / "child.toml").write_text('[experiment]\nextends = "base.toml"\n')
    with pytest.raises(SpecError) as caught:
        compile_family(str(tmp_path / "child.toml"))
    [problem] = caught.value.problems
    assert problem.file == str(tmp_path / "base.toml")
    assert problem.line == _line_of(BASE.decode(), "total_steps") and "overridden" not in problem.message


def test_chains_of_three(tmp_path):
    (tmp_path / "a.toml").write_bytes(BASE)
    (tmp_path / "b.toml").write_text('[experiment]\nextends = "a.toml"\n[rollout]\nn = 1\n[data]\ntrain_batch_size = 8\n')
    (tmp_path / "c.toml").write_text('[experiment]\nextends = "b.toml"\n[data]\ntrain_batch_size = 0\n')
    with pytest.raises(SpecError) as caught:
        compile_family(str(tmp_path / "c.toml"))
    [problem] = caught.value.problems
    assert problem.file == str(tmp_path / "c.toml")
    assert f"set in {tmp_path / 'a.toml'}:" in problem.message
    assert f"then {tmp_path / 'b.toml'}:6" in problem.message


@pytest.mark.parametrize("extends, words", [
    ('"c2.toml"', ["makes a cycle", "c1.toml -> ", "c2.toml -> ", "c1.toml"]),
    ('"nowhere.toml"', ["its base", "nowhere.toml", "no such file"]),
    ('"/etc/base.toml"', ["absolute path"]),
    ("3", ["expected the path of the base spec"]),
    # The OS refuses a NUL in a path with a ValueError: screened before any path use (issue 43).
    ('"c2\\u0000.toml"', ["a control character ('\\x00') in the path of the base spec"]),
    ('"c2\\u001b[2J.toml"', ["a control character ('\\x1b') in the path of the base spec"]),
])
def test_a_chain_that_cannot_be_read_is_refused_at_its_extends(tmp_path, extends, words):
    (tmp_path / "c1.toml").write_text(f'[experiment]\nextends = {extends}\n')
    (tmp_path / "c2.toml").write_text('[experiment]\nextends = "c1.toml"\n')
    with pytest.raises(SpecError) as caught:
        compile_family(str(tmp_path / "c1.toml"))
    [problem] = caught.value.problems
    assert problem.key == "experiment.extends" and problem.line == 2
    for word in words:
        assert word in problem.message


def test_a_self_extending_spec_is_a_cycle(tmp_path):
    (tmp_path / "s.toml").write_text('[experiment]\nextends = "./s.toml"\n')
    with pytest.raises(SpecError, match="cycle"):
        compile_family(str(tmp_path / "s.toml"))


def test_diff_of_a_base_and_its_child_shows_what_the_child_changes(family):
    base = family / "bases" / "base.toml"
    result = support.cli("diff", str(base), str(family / "child.toml"))
    assert result.returncode == 1, result.stderr
    for setting in ("data.train_batch_size", "trainer.loggers", "experiment.name"):
        assert setting in result.stdout
    assert "rollout.n" not in result.stdout


# --- Random chains: merge order and where each value is said to be written.

SETTINGS = {
    ("actor", "lr"): st.sampled_from([1e-6, 3e-6, 1e-5]),
    ("rollout", "n"): st.integers(1, 16),
    ("data", "train_batch_size"): st.integers(1, 64),
    ("trainer", "loggers"): st.lists(st.sampled_from(["console", "file", "wandb"]), max_size=3),
    ("env", "set", "A"): st.sampled_from(["1", "2"]),
    ("env", "set", "B"): st.sampled_from(["x", "y"]),
}


@st.composite
def layers(draw):
    out = []
    for _ in range(draw(st.integers(1, 5))):
        keys = draw(st.lists(st.sampled_from(list(SETTINGS)), unique=True, max_size=len(SETTINGS)))
        doc: dict = {}
        for key in keys:
            table = doc
            for part in key[:-1]:
                table = table.setdefault(part, {})
            table[key[-1]] = draw(SETTINGS[key])
        out.append(doc)
    return out


def _get(doc, key):
    for part in key:
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


@settings(max_examples=150, deadline=None)
@given(layers())
def test_the_last_layer_that_writes_a_key_decides_and_is_named(docs):
    texts = [tomli_w.dumps(doc) for doc in docs]
    composed = Composed([Layer(f"l{n}.toml", tomllib.loads(t), t) for n, t in enumerate(texts)])
    locate = composed.locator()
    for key in SETTINGS:
        writers = [n for n, doc in enumerate(docs) if _get(doc, key) is not None]
        assert _get(composed.data, key) == (_get(docs[writers[-1]], key) if writers else None)
        if not writers:
            continue
        problem = locate(key, "wrong")
        last = writers[-1]
        assert problem.file == f"l{last}.toml"
        assert (problem.line, problem.column) == key_positions(texts[last])[key]
        earlier = list(dict.fromkeys(writers[:-1]))
        if earlier:
            named = problem.message.split("(set in ", 1)[1]
            assert [w.split(":")[0] for w in named.split(", overridden in ")[0].split(", then ")] == [
                f"l{n}.toml" for n in earlier]
        else:
            assert problem.message == "wrong"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 16).map(lambda n: 4 * n), min_size=1, max_size=4))
def test_a_chain_compiles_to_the_bundle_of_its_merge(values):
    # Each layer sets train_batch_size; the last one's value is the launch's.
    chain = [Source(name="top.toml", rel="top.toml", raw=b'[experiment]\nextends = "l0.toml"\n'
                    + f"[data]\ntrain_batch_size = {values[-1]}\n".encode())]
    for n, v in enumerate(values[:-1]):
        extends = f'extends = "l{n + 1}.toml"\n' if n + 1 < len(values) - 1 else 'extends = "base.toml"\n'
        chain.append(Source(name=f"l{n}.toml", rel=f"l{n}.toml",
                            raw=f"[experiment]\n{extends}[data]\ntrain_batch_size = {v}\n".encode()))
    chain.append(Source(name="base.toml", rel="base.toml", raw=BASE))
    [launch] = compile_chain(chain)
    alone = compile_bytes(BASE.replace(b"train_batch_size = 4", f"train_batch_size = {values[-1]}".encode()), "x")
    assert launch.bundle.id == alone.id


def test_compile_spec_reads_the_chain_and_refuses_a_sweep(family, tmp_path):
    from tutorrl.compiler import compile_spec

    assert compile_spec(family / "child.toml").id == compile_family(str(family / "child.toml"))[0].bundle.id
    (tmp_path / "s.toml").write_text('[experiment]\nextends = "bases/base.toml"\n[sweep]\ngrid = { "rollout.n" = [1, 2] }\n')
    with pytest.raises(SpecError, match="is a sweep of 2 points, not one launch"):
        compile_spec(tmp_path / "s.toml")


def test_a_nul_in_extends_is_a_located_message_from_the_cli_never_a_traceback(tmp_path):
    (tmp_path / "s.toml").write_text('[experiment]\nextends = "base\\u0000.toml"\n')
    result = support.cli("compile", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{tmp_path / 's.toml'}:2:1: experiment.extends: a control character ('\\x00') in the path of the " \
        "base spec" in result.stderr
    assert not (tmp_path / "out").exists()

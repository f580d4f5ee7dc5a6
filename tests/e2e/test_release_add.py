"""A new verl release in one command, on a wheel install (issue 40): a copy of verl 0.9.1's wheel renamed
0.9.2 goes from "not supported" to `compile` and `run --dry-run` with `tutorrl keys add 0.9.2`.

tutorrl is built as a wheel and installed (not editable) into a fresh virtualenv; its dependencies come
from the test environment through a .pth line (the same packages a `pip install 'tutorrl[ray,keys]'` would
bring; nothing downloaded but verl's wheel when the wheel cache lacks it). Every file of the installed
package is hashed before and after: `keys add` writes only the data folder (the test runs as root, which
file modes do not stop, so the proof is the digests)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

import support

pytestmark = [pytest.mark.slow, pytest.mark.wheels, pytest.mark.needs_ray, pytest.mark.needs_verl]

SPEC = (support.SPECS / "chess_tutor_grpo.toml").read_text()


def _venv(where: Path, *wheels: Path, deps: bool) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                           "--no-index", "--disable-pip-version-check", *map(str, wheels)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    if deps:
        # The test environment's packages after the venv's own (a .pth line is appended to sys.path), and
        # Ray's console script beside the venv's Python, where the embedded head looks for it.
        paths = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
        (site / "zz_test_env.pth").write_text("\n".join(paths) + "\n")
        ray = where / "bin" / "ray"
        ray.write_text(f"#!{python}\nimport sys\nfrom ray.scripts.scripts import main\nsys.exit(main())\n")
        ray.chmod(0o755)
    return site


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from tutorrl.compiler.release import fetch_wheel

    root = tmp_path_factory.mktemp("release-add")
    verl = support.renamed_wheel(fetch_wheel("0.9.1"), "0.9.2", root)
    src = root / "src"
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(support.REPO / name, src / name)
    import tomllib

    dirs = tomllib.loads((support.REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for folder in sorted({d.split("/")[0] for d in dirs.values()}):
        shutil.copytree(support.REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-cache-dir", "-w", str(root / "dist"), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = (root / "dist").glob("tutorrl-*.whl")
    site = _venv(root / "venv", wheel, verl, deps=True)
    bare = root / "bare"  # verl 0.9.2 alone: a job's Python whose training stack is incomplete
    _venv(bare, verl, deps=False)
    work = root / "work"
    work.mkdir()
    (work / "spec.toml").write_text(SPEC.replace('verl = "0.9.1"', 'verl = "0.9.2"'))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TUTORRL_", "RAY_", "PYTHON"))}
    env.update(TUTORRL_DATA_DIR=str(root / "data"), PYTHONDONTWRITEBYTECODE="1",
               PATH=os.pathsep.join([str(root / "venv" / "bin"), env.get("PATH", "")]))
    return {"root": root, "verl": verl, "site": site, "bare": bare, "work": work, "env": env,
            "tutorrl": str(root / "venv" / "bin" / "tutorrl")}


def _tutorrl(world, *args, timeout=300, **env):
    return subprocess.run([world["tutorrl"], *args], cwd=world["work"], env={**world["env"], **env},
                          capture_output=True, text=True, timeout=timeout)


def test_a_renamed_release_goes_from_unsupported_to_compile_and_dry_run_in_one_command(world):
    where = subprocess.run([str(world["root"] / "venv" / "bin" / "python"), "-c",
                            "import tutorrl, verl, importlib.metadata as m; print(tutorrl.__file__); "
                            "print(m.version('verl'))"], cwd=world["work"], env=world["env"], capture_output=True,
                           text=True)
    installed, verl = where.stdout.split()
    assert Path(installed).is_relative_to(world["site"]) and verl == "0.9.2", where.stderr
    package = world["site"] / "tutorrl"
    before = _digests(package)

    refused = _tutorrl(world, "compile", "spec.toml", "--out", "bundles")
    assert refused.returncode == 2 and "verl 0.9.2 is not supported" in refused.stderr, refused.stderr
    assert "`tutorrl keys add 0.9.2`" in refused.stderr

    started = time.monotonic()
    added = _tutorrl(world, "keys", "add", "0.9.2", "--wheel", str(world["verl"]))
    took = time.monotonic() - started
    print(f"\ntutorrl keys add 0.9.2 (wheel install, 2 shared cores): {took:.1f} s")
    assert added.returncode == 0, added.stdout + added.stderr
    assert "verl 0.9.2 against verl 0.9.1:" in added.stdout and "keys moved: 0" in added.stdout
    assert "spec settings that need a timeline entry: none" in added.stdout
    folder = world["root"] / "data" / "verl" / "0.9.2"
    assert sorted(p.name for p in folder.iterdir()) == ["built", "diff.txt", "keysets", "lock", "release.toml",
                                                        "stacks"]
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert {oct(p.stat().st_mode & 0o777) for p in folder.rglob("*") if p.is_file()} == {"0o644"}
    # The added data is the packaged 0.9.1's under the new name: the release changed nothing.
    for kind, packaged in (("keysets", "keysets"), ("built", "built"), ("lock", "keymap/lock")):
        for variant in ("fsdp", "megatron"):
            mine = (folder / kind / f"verl-0.9.2-{variant}.json").read_bytes()
            theirs = (support.REPO / "compiler" / "release" / packaged / f"verl-0.9.1-{variant}.json").read_bytes()
            assert mine.replace(b'"release": "0.9.2"', b'"release": "0.9.1"') == theirs, (kind, variant)

    compiled = _tutorrl(world, "compile", "spec.toml", "--out", "bundles")
    assert compiled.returncode == 0, compiled.stderr
    bundle = world["work"] / compiled.stdout.strip().splitlines()[-1]

    # The dataclass check is active for 0.9.2: FSDPActorConfig refuses a field it does not declare.
    (world["work"] / "bad.toml").write_text((world["work"] / "spec.toml").read_text()
                                            + '\n[verl]\nextra_overrides = ["+actor_rollout_ref.actor.ppo_epochz=2"]\n')
    bad = _tutorrl(world, "compile", "bad.toml", "--out", "bundles")
    assert bad.returncode == 2
    assert "verl 0.9.2 (fsdp) builds FSDPActorConfig" in bad.stderr and "would stop verl" in bad.stderr, bad.stderr

    # The stack check is active: a real run's preflight imports the recorded start modules in the job's
    # Python (here verl 0.9.2 alone) and names the derived constraints file; the run is refused before any head.
    run = _tutorrl(world, "run", str(bundle), TUTORRL_PYTHON=str(world["bare"] / "bin" / "python"))
    assert run.returncode != 0
    assert "verl 0.9.2's training stack with sglang" in run.stderr and "cannot import" in run.stderr, run.stderr
    assert str(folder / "stacks" / "verl-0.9.2-sglang.txt") in run.stderr
    assert not list(bundle.glob("runs/*/run.json")) or all(
        json.loads(p.read_text()).get("status") != "succeeded" for p in bundle.glob("runs/*/run.json"))

    # A real dry run: an embedded Ray head, verl 0.9.2 (the renamed wheel) composing the config.
    started = time.monotonic()
    dry = _tutorrl(world, "run", str(bundle), "--dry-run", timeout=500)
    print(f"tutorrl run --dry-run (embedded head): {time.monotonic() - started:.1f} s")
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    assert "dry run succeeded: verl 0.9.2" in dry.stderr
    assert "verl 0.9.2's training stack: checked on a real run" in dry.stderr

    assert _digests(package) == before  # nothing under the installed package was written

    listed = _tutorrl(world, "keys", "list")
    assert any(line.startswith("0.9.2") and "(added: " in line for line in listed.stdout.splitlines())
    removed = _tutorrl(world, "keys", "remove", "0.9.2")
    assert removed.returncode == 0 and not folder.exists()
    again = _tutorrl(world, "compile", "spec.toml", "--out", "bundles2")
    assert again.returncode == 2 and "`tutorrl keys add 0.9.2`" in again.stderr


def test_a_failed_add_leaves_nothing(world, tmp_path):
    """A wheel whose trainer config does not compose: the add fails, and neither the release nor a
    staged folder is left (everything is derived before the stage is written and renamed into place)."""
    import zipfile

    broken = tmp_path / "verl-0.9.3-py3-none-any.whl"
    renamed = support.renamed_wheel(world["verl"], "0.9.3", tmp_path)
    with zipfile.ZipFile(renamed) as src, zipfile.ZipFile(broken.with_suffix(".tmp"), "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "verl/trainer/config/ppo_trainer.yaml":
                data = data.replace(b"defaults:", b"defaults:\n  - no_such_group: nothing", 1)
            dst.writestr(item, data)
    broken.with_suffix(".tmp").replace(broken)
    data_dir = tmp_path / "data"
    failed = _tutorrl(world, "keys", "add", "0.9.3", "--wheel", str(broken), TUTORRL_DATA_DIR=str(data_dir))
    assert failed.returncode != 0 and "Traceback" not in failed.stderr, failed.stderr
    assert "composing verl 0.9.3" in failed.stderr
    assert not (data_dir / "verl").exists() or list((data_dir / "verl").iterdir()) == []


def test_a_failure_while_publishing_leaves_no_stage(world, tmp_path, monkeypatch):
    """The last step fails (the rename that publishes the staged folder, as on a full disk): the stage is
    removed and the release is not added. In-process, with the checkout's tutorrl."""
    from tutorrl import release_add
    from tutorrl.compiler.release import forget_user_releases
    from tutorrl.compiler.release.keymap import supported_releases
    from tutorrl.errors import InputError

    data = tmp_path / "data"
    monkeypatch.setenv("TUTORRL_DATA_DIR", str(data))
    forget_user_releases()

    def full_disk(src, dst):
        raise OSError(28, "No space left on device", str(dst))

    monkeypatch.setattr(release_add.os, "rename", full_disk)
    try:
        with pytest.raises(InputError, match="No space left") as err:
            release_add.add_release("0.9.2", world["verl"])
        assert "verl 0.9.2 was not added" in err.value.render() and "nothing of it was left" in err.value.render()
        assert list((data / "verl").iterdir()) == []
        forget_user_releases()
        assert "0.9.2" not in supported_releases()
    finally:
        monkeypatch.undo()
        forget_user_releases()

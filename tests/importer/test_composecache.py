"""The kept base config (importer/composecache.py) gives what Hydra's whole compose gives,
against verl 0.9.1's real config: the same config for real launches, the same error where
Hydra refuses one, a fresh base when a config file changes, and libyaml read as OmegaConf reads."""

from __future__ import annotations

import os
import pickle
import shutil
import stat
import threading
from pathlib import Path

import pytest
import yaml

import support
from tutorrl.importer import composecache
from tutorrl.importer.roundtrip import _compose, compose

pytestmark = pytest.mark.needs_verl


def _config() -> Path:
    """The installed verl's config folder, asked for by each test (at import, a core environment's collection fails)."""
    return Path(support.verl_config_dir())


def _root() -> Path:
    return _config().parents[2]  # holds verl/trainer/config, as config_root() does


LAUNCHES = [
    # tests/importer/scripts/ppo_critic_rm.sh, as verl would get it.
    ["algorithm.adv_estimator=gae", "data.train_files=/data/gsm8k/train.parquet", "data.train_batch_size=256",
     "data.return_raw_chat=True", "actor_rollout_ref.model.path=deepseek-ai/deepseek-llm-7b-chat",
     "actor_rollout_ref.actor.optim.lr=1e-6", "actor_rollout_ref.rollout.name=vllm", "critic.optim.lr=1e-5",
     "critic.model.enable_gradient_checkpointing=True", "algorithm.use_kl_in_reward=False",
     "trainer.logger=['console','wandb']", "trainer.n_gpus_per_node=8", "trainer.total_epochs=15"],
    # Lists, new keys, forced keys, deletion, interpolation, quoting.
    ["data.train_files=[/a.parquet,/b.parquet]", "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
     "++trainer.project_name=x", "~trainer.experiment_name",
     "actor_rollout_ref.rollout.n=${data.train_batch_size}", "trainer.default_local_dir='a b/${trainer.project_name}'",
     "+new.nested.key={a:1,b:[2,3]}", "trainer.val_before_train=null"],
    ["trainer=replaced-by-a-string"],  # Hydra takes it: a dict overwritten by a value
    [],
]


def _whole(overrides):
    return _compose(_root(), _config(), "ppo_trainer", overrides)


@pytest.mark.parametrize("overrides", LAUNCHES, ids=["ppo_critic_rm", "edge_cases", "dict_to_value", "none"])
def test_a_launch_on_the_kept_base_is_the_whole_compose(overrides, tmp_path):
    whole = _whole(overrides)
    assert whole.error is None, whole.error
    assert compose(_root(), "ppo_trainer", overrides, cache=tmp_path) == whole
    assert list(tmp_path.glob("*/ppo_trainer.msgpack")), "no base kept"
    (kept,) = [data for path, data in composecache._KEPT.items() if tmp_path in path.parents]
    assert composecache.apply(kept, overrides) == whole.config  # the short path itself, not a fallback
    composecache._KEPT.clear()  # read back from disk this time
    assert compose(_root(), "ppo_trainer", overrides, cache=tmp_path) == whole


@pytest.mark.parametrize("bad", ["trainer.no_such_key=1", "+trainer.total_epochs=1", "data.train_batch_size=[1,",
                                 "a=1,2"])
def test_a_refused_launch_gets_hydras_own_error(bad, tmp_path):
    whole = _whole([bad])
    assert whole.error is not None
    assert compose(_root(), "ppo_trainer", [bad], cache=tmp_path) == whole
    (kept,) = [data for path, data in composecache._KEPT.items() if tmp_path in path.parents]
    assert composecache.apply(kept, [bad]) is None


def test_a_group_choice_goes_the_whole_way(tmp_path):
    folders = [_config()]
    assert composecache.names_a_group("actor@actor_rollout_ref.actor=megatron_actor", folders)
    assert composecache.names_a_group("data=legacy_data", folders)
    assert composecache.names_a_group("+hydra.job.chdir=true", folders)
    assert not composecache.names_a_group("data.train_batch_size=8", folders)
    choice = ["critic=megatron_critic"]
    assert compose(_root(), "ppo_trainer", choice, cache=tmp_path) == _whole(choice)
    assert not list(tmp_path.iterdir()), "a base was composed for a launch that cannot use it"


def test_an_edited_config_gets_a_fresh_base(tmp_path):
    root = tmp_path / "root"
    shutil.copytree(_config(), root / "verl" / "trainer" / "config")
    cache = tmp_path / "cache"
    before = compose(root, "ppo_trainer", [], cache=cache)
    trainer = root / "verl" / "trainer" / "config" / "ppo_trainer.yaml"
    text = trainer.read_text()
    assert "  total_epochs: 30\n" in text
    trainer.write_text(text.replace("  total_epochs: 30\n", "  total_epochs: 31\n"))
    after = compose(root, "ppo_trainer", [], cache=cache)
    assert (before.config["trainer"]["total_epochs"], after.config["trainer"]["total_epochs"]) == (30, 31)
    assert len(list(cache.iterdir())) == 2


def test_an_unwritable_cache_costs_only_time(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the cache folder would be: nothing can be written under it
    overrides = LAUNCHES[0]
    assert compose(_root(), "ppo_trainer", overrides, cache=blocked / "cache") == _whole(overrides)


def _entry(cache: Path) -> Path:
    (entry,) = cache.glob("*/ppo_trainer.msgpack")
    return entry


def test_the_cache_is_data_in_folders_and_files_only_the_user_may_open(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert composecache.default_cache() == tmp_path / "xdg" / "tutorrl" / "composed"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec: a relative path is ignored
    assert composecache.default_cache() == Path.home() / ".cache" / "tutorrl" / "composed"
    cache = tmp_path / "xdg" / "tutorrl" / "composed"
    assert compose(_root(), "ppo_trainer", LAUNCHES[0], cache=cache) == _whole(LAUNCHES[0])
    entry = _entry(cache)
    for folder in (tmp_path / "xdg" / "tutorrl", cache, entry.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    raw = entry.read_bytes()
    assert raw.startswith(b"tutorrl composed base 3\n") and b"\x80" not in raw[:2]  # no pickle's protocol mark


def test_an_existing_cache_folder_others_may_enter_is_made_private(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    os.chmod(cache, 0o755)
    compose(_root(), "ppo_trainer", [], cache=cache)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700


@pytest.mark.parametrize("spoil, why", [
    (lambda e: e.write_bytes(e.read_bytes()[:-3] + b"xyz"), "does not match its digest"),
    (lambda e: e.write_bytes(pickle.dumps(os.system)), "is not a kept config of this tutorrl"),
    (lambda e: os.chmod(e, 0o644), "is not this user's alone (mode 644)"),
    (lambda e: (e.unlink(), os.mkfifo(e, 0o600)), "is not a regular file"),
    (lambda e: (e.unlink(), os.symlink("/dev/zero", e)), "is a symlink; not followed"),
])
def test_a_bad_entry_is_composed_again_and_said(tmp_path, spoil, why):
    cache = tmp_path / "cache"
    compose(_root(), "ppo_trainer", [], cache=cache)
    entry = _entry(cache)
    spoil(entry)
    composecache._KEPT.clear()
    composecache.SAID.clear()
    done: list = []
    thread = threading.Thread(target=lambda: done.append(compose(_root(), "ppo_trainer", LAUNCHES[0], cache=cache)),
                              daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "reading the cache entry blocked"
    assert done == [_whole(LAUNCHES[0])]
    assert composecache.SAID == [f"the compose cache entry {entry} {why}; composed again"]
    composecache.SAID.clear()


def test_a_pickle_in_the_cache_is_never_unpickled(tmp_path):
    ran = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {ran}",))

    payload = pickle.dumps(Evil())
    # Even with a header and a digest that match, the data is read as msgpack: no code is named by it.
    entry = composecache._FORMAT + composecache.hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    cache = tmp_path / "cache"
    compose(_root(), "ppo_trainer", [], cache=cache)
    target = _entry(cache)
    target.write_bytes(entry)
    composecache._KEPT.clear()
    assert compose(_root(), "ppo_trainer", ["trainer.total_epochs=2"], cache=cache) == _whole(["trainer.total_epochs=2"])
    assert composecache.apply(payload, ["a=1"]) is None
    assert not ran.exists()


def test_libyaml_reads_every_config_file_as_omegaconf_does():
    from omegaconf import _utils

    loader = composecache._c_loader()
    assert loader is not None, "PyYAML without libyaml: the test extras install it with"
    files = sorted(_config().rglob("*.yaml"))
    assert len(files) > 20
    for path in files:
        text = path.read_text()
        assert yaml.load(text, Loader=loader) == yaml.load(text, Loader=_utils.get_yaml_loader()), path
    for text in ("a: 1\na: 2\n", "x: 1e-6\ny: 2022-01-01\nz: .inf\n"):
        try:
            expected = yaml.load(text, Loader=_utils.get_yaml_loader())
        except yaml.constructor.ConstructorError as exc:
            with pytest.raises(yaml.constructor.ConstructorError, match="found duplicate key"):
                yaml.load(text, Loader=loader)
            assert "duplicate key" in str(exc)
        else:
            assert yaml.load(text, Loader=loader) == expected
    with composecache.c_yaml():
        assert _utils.get_yaml_loader() is loader
    assert _utils.get_yaml_loader() is not loader


def test_a_config_folder_too_big_to_digest_composes_the_whole_way(tmp_path, monkeypatch):
    monkeypatch.setattr(composecache, "MAX_FILES", 5)  # verl's config folder holds more than 5 files
    overrides = LAUNCHES[0]
    assert compose(_root(), "ppo_trainer", overrides, cache=tmp_path) == _whole(overrides)
    assert not list(tmp_path.iterdir()), "a base was kept for a folder it did not digest"

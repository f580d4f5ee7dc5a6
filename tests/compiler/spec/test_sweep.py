"""``[sweep]``: one bundle per point, each the bundle of that point written out as its own spec."""

from __future__ import annotations

import json
import tomllib

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

import support
from tutorrl import cli
from tutorrl.compiler import compile_bytes
from tutorrl.compiler.pipeline.family import Source, compile_chain, compile_family
from tutorrl.compiler.spec.sweep import MAX_POINTS
from tutorrl.errors import SpecError

BASE = (support.SPECS / "tiny_cpu_grpo.toml").read_bytes()
CONTENT = ("bundle.env", "launch.sh", "ray-job.json", "spec.toml")


def _sweep(table: str, extra: str = "") -> list[Source]:
    child = f'[experiment]\nextends = "base.toml"\n{extra}\n[sweep]\n{table}\n'.encode()
    return [Source(name="sweep.toml", rel="sweep.toml", raw=child), Source(name="base.toml", rel="base.toml", raw=BASE)]


def _point_spec(values: dict, name: str) -> bytes:
    """The point written out as its own spec: the base with the point's values and name."""
    doc = support.spec_doc(tomllib.loads(BASE.decode()), **support.nested(values))
    return support.spec_toml(doc, experiment={"name": name}).encode()


def test_grid_takes_every_combination_and_zip_takes_values_together():
    launches = compile_chain(_sweep('grid = { "actor.lr" = [1e-6, 3e-6], "rollout.n" = [1, 2] }\n'
                                    'zip = { "data.max_prompt_length" = [64, 128], '
                                    '"data.max_response_length" = [16, 32] }'))
    assert len(launches) == 8
    points = [launch.point.as_dict() for launch in launches]
    assert points[0] == {"data.max_prompt_length": 64, "data.max_response_length": 16, "actor.lr": 1e-6,
                         "rollout.n": 1}
    # The last grid setting varies fastest; zip's values go together.
    assert [p["rollout.n"] for p in points[:4]] == [1, 2, 1, 2]
    assert all((p["data.max_prompt_length"], p["data.max_response_length"]) in ((64, 16), (128, 32)) for p in points)
    assert len({launch.bundle.id for launch in launches}) == 8
    names = [launch.bundle.manifest.experiment for launch in launches]
    assert names[1] == "tiny-cpu-grpo-max_prompt_length_64-max_response_length_16-lr_1e-06-n_2"
    for launch in launches:
        manifest = json.loads(launch.bundle.files["manifest.json"])
        assert manifest["point"] == launch.point.as_dict()
        assert set(manifest["sources"]) == {"sweep.toml", "base.toml"}


def test_a_point_is_named_the_same_in_any_sweep_that_holds_it():
    small = compile_chain(_sweep('grid = { "actor.lr" = [1e-6] , "rollout.n" = [2] }'))
    large = compile_chain(_sweep('grid = { "actor.lr" = [3e-6, 1e-6], "rollout.n" = [1, 2, 4] }'))
    assert small[0].bundle.id in {launch.bundle.id for launch in large}


def test_values_without_a_short_spelling_are_named_by_their_place():
    launches = compile_chain(_sweep('grid = { "env.set.MODE" = ["a b", "a_b"] }'))
    assert [launch.bundle.manifest.experiment for launch in launches] == ["tiny-cpu-grpo-MODE_1", "tiny-cpu-grpo-MODE_2"]


# Values a sweep over these settings can take where the base spec stays valid.
GRIDS = st.fixed_dictionaries({}, optional={
    "actor.lr": st.lists(st.sampled_from([1e-6, 3e-6, 1e-5, 5e-7, 0.001]), min_size=1, max_size=3, unique=True),
    "rollout.n": st.lists(st.integers(1, 4), min_size=1, max_size=2, unique=True),
    "trainer.total_steps": st.lists(st.integers(1, 10**6), min_size=1, max_size=2, unique=True),
    "env.set.TAG": st.lists(st.text("abc-_. /", min_size=1, max_size=6), min_size=1, max_size=2, unique=True),
}).filter(bool)


@st.composite
def zips(draw):
    n = draw(st.integers(0, 3))
    if not n:
        return {}
    return {"data.seed": draw(st.lists(st.integers(0, 2**31), min_size=n, max_size=n, unique=True)),
            "trainer.save_freq": draw(st.lists(st.integers(1, 50), min_size=n, max_size=n))}


@settings(max_examples=25, deadline=None)
@given(GRIDS, zips())
def test_a_sweeps_bundles_are_the_bundles_of_its_points_written_out(grid, zipped):
    sweep = {"grid": grid, **({"zip": zipped} if zipped else {})}
    child = tomli_w.dumps({"experiment": {"extends": "base.toml"}, "sweep": sweep}).encode()
    launches = compile_chain([Source(name="sweep.toml", rel="sweep.toml", raw=child),
                              Source(name="base.toml", rel="base.toml", raw=BASE)])
    count = len(next(iter(zipped.values()))) if zipped else 1
    for values in grid.values():
        count *= len(values)
    assert len(launches) == count
    for launch in launches:
        alone = compile_bytes(_point_spec(launch.point.as_dict(), launch.bundle.manifest.experiment), "point.toml")
        assert launch.bundle.id == alone.id
        assert {n: launch.bundle.files[n] for n in CONTENT} == {n: alone.files[n] for n in CONTENT}


def test_a_problem_of_some_points_names_each_and_one_of_all_is_said_once():
    with pytest.raises(SpecError) as caught:
        compile_chain(_sweep('grid = { "rollout.n" = [1, -1], "data.train_batch_size" = [4, 0] }',
                             extra="[trainer]\ntotal_steps = 0\n"))
    problems = caught.value.problems
    shared = [p for p in problems if p.key == "trainer.total_steps"]
    assert len(shared) == 1 and "in point" not in shared[0].message and shared[0].file == "sweep.toml"
    negative = [p for p in problems if p.key == "rollout.n"]
    assert sorted(p.message.split(":")[0] for p in negative) == [
        "in point rollout.n=-1, data.train_batch_size=0", "in point rollout.n=-1, data.train_batch_size=4"]
    # Placed at the value in the sweep, naming the base's value it overrides.
    assert all(p.file == "sweep.toml" and p.line == 7 and "set in base.toml:" in p.message for p in negative)
    assert "points of the sweep have problems" in caught.value.render()


@pytest.mark.parametrize("table, words", [
    ('grid = { "actor.lrr" = [1e-6] }', ["no setting 'lrr' in [actor]", "did you mean 'actor.lr'"]),
    ('grid = { "actor.lr" = [] }', ["non-empty array"]),
    ('grid = { "actor.lr" = 1e-6 }', ["non-empty array"]),
    ('grid = { "rollout.n" = [1, 1] }', ["given twice"]),
    ('zip = { "rollout.n" = [1, 2, 1], "actor.lr" = [1e-6, 1e-6, 1e-6] }', ["repeat an earlier combination"]),
    ('zip = { "rollout.n" = [1, 2], "actor.lr" = [1e-6] }', ["equal lengths", "rollout.n has 2", "actor.lr has 1"]),
    ('grid = { "rollout.n" = [1] }\nzip = { "rollout.n" = [2] }', ["swept in both"]),
    ('grid = { "experiment.extends" = ["a.toml"] }', ["not a setting"]),
    ('grid = { "actor.lr.x" = [1] }', ["actor.lr is a setting, not a table"]),
    ('grids = { }', ["unknown key in [sweep]"]),
    ('grid = { "experiment.name" = ["a", "b"] }', ["named after experiment.name and the point"]),
    ('', ["a sweep with no settings"]),
])
def test_a_sweep_that_names_no_points_is_refused_where_it_is_written(table, words):
    with pytest.raises(SpecError) as caught:
        compile_chain(_sweep(table))
    text = caught.value.render()
    assert all(p.file == "sweep.toml" and p.line is not None for p in caught.value.problems)
    for word in words:
        assert word in text


def test_a_bad_sweep_and_a_bad_base_are_told_in_one_round():
    with pytest.raises(SpecError) as caught:
        compile_chain(_sweep('grid = { "actor.lrr" = [1e-6], "rollout.n" = [0, 1] }',
                             extra="[trainer]\ntotal_steps = 0\n[rollout]\nn = -5\n"))
    keys = sorted(p.key for p in caught.value.problems)
    # rollout.n is swept: what the spec says of it alone is no problem of any point.
    assert keys == ["sweep.grid.actor.lrr", "trainer.total_steps"]


def test_a_sweep_past_the_cap_is_refused_with_its_size():
    values = ", ".join(str(n) for n in range(1, 101))
    with pytest.raises(SpecError) as caught:
        compile_chain(_sweep(f'grid = {{ "trainer.total_steps" = [{values}], "rollout.n" = [1, 2, 3, 4, 5, 6, 7, 8, '
                             '9, 10, 11] }'))
    [problem] = caught.value.problems
    assert f"1100 points (100 x 11); at most {MAX_POINTS}" in problem.message


def test_a_sweep_needs_an_experiment_name():
    base = BASE.replace(b'name = "tiny-cpu-grpo"\n', b"")
    chain = [Source(name="s.toml", rel="s.toml", raw=b'[sweep]\ngrid = { "rollout.n" = [1, 2] }\n' + base)]
    with pytest.raises(SpecError, match="set experiment.name"):
        compile_chain(chain)


def test_compile_writes_a_bundle_per_point_and_prints_the_table(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.toml").write_bytes(BASE)
    (tmp_path / "sweep.toml").write_text('[experiment]\nextends = "base.toml"\n'
                                         '[sweep]\ngrid = { "actor.lr" = [1e-6, 3e-6], "rollout.n" = [1, 2] }\n')
    assert cli.main(["compile", "sweep.toml", "--out", "out"]) == 0
    captured = capsys.readouterr()
    paths = captured.out.splitlines()
    launches = compile_family("sweep.toml")
    assert paths == [f"out/{launch.bundle.id}" for launch in launches]
    for launch, path in zip(launches, paths):
        assert (tmp_path / path / "manifest.json").read_bytes() == launch.bundle.files["manifest.json"]
    table = captured.err[captured.err.index("a sweep of 4 points"):].splitlines()
    assert table[1].split() == ["point", "actor.lr", "rollout.n", "bundle"]
    assert table[3].split() == ["2", "1e-06", "2", paths[1]]
    # A base and its sweep given together: a base that compiles is a spec like any other ...
    assert cli.main(["compile", "base.toml", "sweep.toml", "--out", "out2"]) == 0
    captured = capsys.readouterr()
    [base] = compile_family("base.toml")
    assert captured.out.splitlines() == [f"out2/{base.bundle.id}"] + [p.replace("out/", "out2/") for p in paths]
    # ... and a partial one (it leaves its release to the sweep) is compiled only through it.
    (tmp_path / "base.toml").write_bytes(BASE.replace(b'verl = "0.5.0"\n', b""))
    (tmp_path / "sweep.toml").write_text((tmp_path / "sweep.toml").read_text().replace(
        'extends = "base.toml"\n', 'extends = "base.toml"\nverl = "0.5.0"\n'))
    assert cli.main(["compile", "base.toml", "sweep.toml", "--out", "out3"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [p.replace("out/", "out3/") for p in paths]
    assert "base.toml: a base that does not compile on its own; compiled through the 1 spec given" in captured.err


def test_a_failing_point_writes_no_bundle(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.toml").write_bytes(BASE)
    (tmp_path / "sweep.toml").write_text('[experiment]\nextends = "base.toml"\n[sweep]\ngrid = { "rollout.n" = [1, 0] }\n')
    result = support.cli("compile", "sweep.toml", "--out", "out", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "in point rollout.n=0" in result.stderr and "1 of 2 points" in result.stderr
    assert not (tmp_path / "out").exists()

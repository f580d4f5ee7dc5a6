"""Measure every recipe and experimental launch of one verl release tag against tutorrl.

    python tools/corpus_recipes.py --verl-git GITDIR --recipe-git RECIPEGITDIR [--tag v0.9.0]
                                   [--out docs/corpus] [--timeout 30] [--dry-run-python PY [--dry-run-path DIR]]

``GITDIR`` is a bare git directory of verl (verl-project/verl; the tag must be
in it), ``RECIPEGITDIR`` one of verl-recipe holding the commit the tag's
``recipe`` submodule pins. The tool exports the tag's ``verl/experimental/``,
``verl/trainer/`` and ``examples/`` and the pinned recipe commit (as
``recipe/``, where verl's tree keeps it) into a temporary folder standing for
the checkout, and for every ``*.sh`` under ``recipe/`` and
``verl/experimental/``:

1. captures it (:func:`tutorrl.importer.capture.capture`, real bash in the
   jail, run from the checkout's root) with every *trainer* launch counted: a
   known entry point (entries.toml), or a python module or file whose last name
   has ``main`` as a word (``main_dapo``, ``fully_async_main``, ``main_spin``),
   less verl's generation and evaluation mains;
2. imports each launch as ``tutorrl import --recipe <the exported recipe/>``
   does (:func:`import_launch`): verl's own entry points with ``--verl <tag's
   release>``; a recipe's at the release the import picks, where its module
   starts (its code is written for one verl: entries.toml), recording the round
   trip (exact, or why not);
3. compiles the imported spec into a bundle (placeholders filled with the
   stand-ins the round trip used) and reads which module its ``launch.sh``
   starts: the same as the script's, or not.

A launch of a module tutorrl does not know is counted refused. With
``--dry-run-python PY`` (a Python with verl's dependencies; ``--dry-run-path
DIR`` and each ``--start-check DIR``: a verl release installed with ``pip
install --no-deps --target DIR``), the first launch of each entry point other than main_ppo that
imports exact (or exact once carried to the keys the release reads) and
compiles, at a release one of those folders holds, is run with ``tutorrl run
--dry-run``: its launch.sh starts the real ``python -m <module> --cfg all`` with
the recipe on its import path; the answer is recorded. Each ``--start-check
DIR`` also starts every recipe entry's module with ``--cfg job`` there: whether
the module starts at that release (entries.toml's ``stops``).

Derived numbers only (counts, scripts, grouped reasons) go to
``docs/corpus/recipes.json`` and the corpus README; never the scripts.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import msgspec

from tutorrl.compiler.spec import PLACEHOLDER

_SPEC = importlib.util.spec_from_file_location("corpus_tool", Path(__file__).resolve().parent / "corpus.py")
corpus = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("corpus_tool", corpus)
_SPEC.loader.exec_module(corpus)

#: Mains that generate or evaluate, not train: not launches of a trainer.
NOT_TRAINERS = re.compile(r"(^|\.)(main_generation(_server)?|main_eval|data_process)$")
_MAIN_WORD = re.compile(r"(^|_)main(_|$)")
_NOT_COMPOSED = "not checked: the original launch does not compose"
_CARRIED = "exact once"  # composed with moved or retired keys carried: the launch as written does not compose
_PLACEHOLDERS = re.compile(PLACEHOLDER + r" = ([^,]+)")


def module_of(call) -> str:
    """The module a launch starts, dotted (a file as its path's dotted form without ``.py``)."""
    if call.entry_kind == "module":
        return call.entry
    return call.entry.lstrip("./").removesuffix(".py").replace("/", ".")


def is_trainer_launch(call) -> bool:
    """A known entry point, or a module or file whose last name has ``main`` as a word (a trainer's main)."""
    from tutorrl.importer.capture import entry_of

    if call.entry_kind not in ("module", "script"):
        return False
    if entry_of(call.entry_kind, call.entry) is not None:
        return True
    module = module_of(call)
    return bool(_MAIN_WORD.search(module.rsplit(".", 1)[-1])) and not NOT_TRAINERS.search(module)


def standins(notes: list[str]) -> dict[str, str]:
    """The stand-ins the round trip put for the script's unset variables (its report's note)."""
    for note in notes:
        if note.startswith("placeholders stood in"):
            return {name: value.strip() for name, value in _PLACEHOLDERS.findall(note)}
    return {}


def compile_and_read(spec_text: str, tmp: Path) -> tuple[str | None, str, Path | None]:
    """(the module the compiled spec's launch.sh starts, why not where it does not compile, the bundle)."""
    from tutorrl.compiler import compile_spec, write_bundle
    from tutorrl.errors import TutorrlError

    path = tmp / "spec.toml"
    path.write_text(spec_text)
    try:
        bundle = write_bundle(compile_spec(path), tmp / "bundles")
    except TutorrlError as exc:
        return None, corpus.reason_group(corpus.first_line(str(exc))), None
    found = re.search(r'exec "\$python_bin" -m (\S+)', (bundle.path / "launch.sh").read_text())
    return (found.group(1) if found else None), "", bundle.path


def measure(gitdir: Path, recipe_git: Path, tag: str, timeout: float, progress=print,
            dry_run_python: str | None = None, dry_run_path: str | None = None,
            start_checks: tuple[str, ...] = ()) -> dict:
    from tutorrl.compiler.release import load_entries, not_entry
    from tutorrl.errors import TutorrlError
    from tutorrl.importer.capture import capture, entry_of
    from tutorrl.importer.launch import _fill, _spec_text, import_launch, prepare

    release = corpus.tag_release(tag)
    pinned = corpus.git(gitdir, "ls-tree", tag, "recipe").decode().split()
    if len(pinned) < 3 or pinned[1] != "commit":
        raise SystemExit(f"error: {tag} pins no recipe submodule")
    recipe_commit = pinned[2]
    rows: list[dict] = []
    failed: list[dict] = []
    dry_runs: dict[str, dict] = {}  # entry -> the real dry run of its first launch that imports and compiles
    # Each folder's verl release, read once: the start checks name it, the dry runs pick a folder by it.
    release_of = {p: _version(dry_run_python, p) for p in (dry_run_path, *start_checks) if p} if dry_run_python else {}
    installed = {r: p for p, r in release_of.items()}
    with tempfile.TemporaryDirectory(prefix="tutorrl-recipes-") as tmp:
        root = Path(os.path.realpath(tmp)) / "verl"
        root.mkdir()
        data = corpus.git(gitdir, "archive", "--format=tar", tag, "examples", "verl/experimental", "verl/trainer")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(root, filter="data")
        (root / "recipe").mkdir()
        data = corpus.git(recipe_git, "archive", "--format=tar", recipe_commit)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(root / "recipe", filter="data")
        starts = [module_starts(dry_run_python, path, release_of[path], root, entry) for path in start_checks
                  for entry in load_entries().values() if entry.source == "recipe"] if dry_run_python else []
        scripts = sorted(p for p in [*(root / "recipe").rglob("*.sh"), *(root / "verl" / "experimental").rglob("*.sh")]
                         if p.is_file())
        for i, path in enumerate(scripts, 1):
            rel = str(path.relative_to(root))
            try:
                cap = capture(path, vars={}, timeout=timeout, verl_checkout=root, is_launch=is_trainer_launch)
            except TutorrlError as exc:
                failed.append({"script": rel, "reason": corpus.first_line(str(exc))})
                continue
            if not cap.launches:
                continue
            preps = prepare(cap, rel, root, home=corpus.CORPUS_HOME, workdir_root="VERL_CHECKOUT")
            for launch, prep in zip(cap.launches, preps):
                module = module_of(launch)
                known = entry_of(launch.entry_kind, launch.entry)
                row = {"script": rel, "module": module, "entry": known.name if known else "", "release": "",
                       "imported": False, "verl_accepts": True,
                       "trip": "", "compiles": False, "same_module": False, "why": ""}
                rows.append(row)
                if known is None:
                    why = not_entry(module)
                    row["why"] = ("refused: not an entry point: " + why.why if why
                                  else "refused: a module tutorrl does not know")
                    # Does verl itself take the launch as written: its code starts at some release?
                    row["verl_accepts"] = bool(why and why.starts)
                    continue
                # A recipe's code is written for one verl: the import picks the release where its module starts
                # (entries.toml); verl's own entry points are imported at the tag's release.
                verl = None if known.source == "recipe" else release
                try:
                    text, report = import_launch(prep, verl, recipe=str(root / "recipe"))
                except TutorrlError as exc:
                    row["why"] = "refused: " + corpus.reason_group(corpus.first_line(str(exc)))
                    row["verl_accepts"] = known.source == "wheel" or any(known.runs_at(r) for r in known.releases)
                    continue
                row["imported"] = True
                row["release"] = report.release
                row["trip"] = corpus.trip_reason(report)
                # verl takes it as written where its module starts at some release and composes the script's
                # config (the round trip composes the original launch with verl's own Hydra).
                row["verl_accepts"] = (any(known.runs_at(r) for r in known.releases) or known.source == "wheel") \
                    and not row["trip"].startswith(_NOT_COMPOSED) and not report.carried
                if report.does_not_compile:
                    row["why"] = "the compiler refuses the spec: " + corpus.refusal_group(report)
                these = standins(report.notes)
                if these:
                    # The spec with the stand-ins the round trip used, translated as the round trip did (typed).
                    filled = msgspec.structs.replace(prep, recipe=str(root / "recipe") if known.source == "recipe"
                                                     else "")
                    text = _spec_text([_fill(o, these) for o in prep.overrides], report.release, report.variant,
                                      filled)[1]
                with tempfile.TemporaryDirectory(prefix="tutorrl-recipes-spec-") as spec_tmp:
                    started, why, bundle = compile_and_read(text, Path(spec_tmp))
                    row["compiles"] = started is not None
                    row["same_module"] = started == (known.module if not known.default else "verl.trainer.main_ppo")
                    if started is None and not row["why"]:
                        row["why"] = "the compiler refuses the spec: " + why
                    if (not known.default and known.name not in dry_runs and report.release in installed
                            and row["trip"].startswith("exact") and row["same_module"] and bundle is not None):
                        dry_runs[known.name] = {"entry": known.name, "verl": report.release, **real_dry_run(
                            dry_run_python, installed[report.release], bundle, rel, Path(spec_tmp))}
            if i % 10 == 0:
                progress(f"  {tag}: {i}/{len(scripts)} scripts")
    summary = summarise(tag, release, recipe_commit, len(scripts), rows, [dry_runs[e] for e in sorted(dry_runs)])
    summary["scripts_not_captured"] = failed
    summary["recipe_modules_start"] = starts
    return summary


def real_dry_run(python: str, extra_path: str | None, bundle: Path, rel: str, cwd: Path) -> dict:
    """``tutorrl run --dry-run`` of the bundle: launch.sh runs the real ``python -m recipe.dapo.main_dapo --cfg
    all`` in ``python`` (``extra_path`` first on its PYTHONPATH: e.g. the chosen verl release installed with
    ``pip install --no-deps --target``), with the recipe checkout on its import path as launch.sh puts it."""
    tutorrl_root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, TUTORRL_PYTHON=python,
               PYTHONPATH=os.pathsep.join(p for p in (tutorrl_root, extra_path) if p))
    proc = subprocess.run([sys.executable, "-m", "tutorrl", "run", "--dry-run", str(bundle)], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)
    said = [line for line in proc.stderr.splitlines() if line.startswith("tutorrl: dry run")]
    return {"script": rel, "command": "tutorrl run --dry-run", "exit": proc.returncode,
            "said": corpus.first_line(said[-1]) if said else corpus.first_line(proc.stderr.strip()[-300:])}


def _version(python: str, extra_path: str) -> str:
    """The verl release installed in ``extra_path`` (``pip install --no-deps --target``)."""
    proc = subprocess.run([python, "-c", "import verl; print(verl.__version__)"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=extra_path), check=True)
    return proc.stdout.strip()


def module_starts(python: str, extra_path: str, version: str, root: Path, entry) -> dict:
    """The real ``python -m <module> --cfg job`` of a recipe entry with ``extra_path`` (a verl release installed
    with ``pip install --no-deps --target``) first on the path and its import root after it (the checkout's root
    for ``recipe.*``, ``recipe/`` itself for a top-level package in it: entries.toml's import_root), the installed
    verl's trainer config on Hydra's search path (as launch.sh sets it): does the module start?"""
    checkout = root / "recipe"
    import_root = checkout.parent if entry.checkout_is_package else checkout
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([extra_path, str(import_root)]))
    # An entry reading verl's own trainer config gets the installed release's, as launch.sh gives it.
    config = ["--config-path", os.path.join(extra_path, "verl", "trainer", "config")] if entry.trainer_config else []
    proc = subprocess.run([python, "-m", entry.module, *config, "--cfg", "job", *entry.hydra_args()], capture_output=True,
                          text=True, env=env, cwd=root, timeout=600)
    last = (proc.stderr.strip().splitlines() or [""])[-1]
    return {"entry": entry.name, "module": entry.module, "verl": version, "exit": proc.returncode,
            "config_lines": len(proc.stdout.splitlines()),
            # The install's folder is this machine's: named by what it is.
            "said": "" if proc.returncode == 0 else corpus.first_line(last).replace(extra_path, "<verl install>")}


def _not_entry(module: str):
    from tutorrl.compiler.release import not_entry

    return not_entry(module)


def summarise(tag, release, recipe_commit, scripts, rows, dry_runs) -> dict:
    others = [r for r in rows if r["module"] != "verl.trainer.main_ppo"]
    good = [r for r in others if r["imported"] and r["compiles"] and r["same_module"]]
    accepted = [r for r in others if r["verl_accepts"]]
    by_module = collections.Counter(r["module"] for r in others)
    per = {}
    for module, n in by_module.most_common():
        mine = [r for r in others if r["module"] == module]
        per[module] = {"launches": n, "entry": mine[0]["entry"], "imported": sum(r["imported"] for r in mine),
                       "exact": sum(r["trip"] == "exact" for r in mine),
                       "verl_composes": sum(r["imported"] and not r["trip"].startswith((_NOT_COMPOSED, _CARRIED))
                                            for r in mine),
                       "verl_accepts": sum(r["verl_accepts"] for r in mine),
                       "compile_and_start_it": sum(r in good for r in mine),
                       "releases": sorted({r["release"] for r in mine if r["release"]}),
                       "not_entry": why.why if (why := _not_entry(module)) else ""}
    ppo = [r for r in rows if r["module"] == "verl.trainer.main_ppo"]
    return {"schema": corpus.SCHEMA, "tag": tag, "release": release, "recipe_commit": recipe_commit,
            "scripts": scripts, "launches": len(rows), "main_ppo_launches": len(ppo),
            "main_ppo_import_compile_same_module": sum(r["imported"] and r["compiles"] and r["same_module"]
                                                       for r in ppo),
            "other_launches": len(others), "other_import_compile_same_module": len(good),
            # The honest measure of tutorrl's part: of the launches verl itself takes as written (the module's code
            # starts at some release and verl composes the script's config), those tutorrl imports, compiles, starts.
            "other_verl_accepts": len(accepted), "other_verl_accepts_import_compile_same_module":
                sum(r in good for r in accepted),
            "other_exact": sum(r["trip"] == "exact" for r in others),
            "by_module": per,
            "not_met": [{"script": r["script"], "module": r["module"], "reason": r["why"] or r["trip"]}
                        for r in others if r not in good],
            "not_exact": [{"script": r["script"], "module": r["module"], "reason": r["trip"]}
                          for r in others if r["imported"] and r["trip"] != "exact"],
            "real_dry_runs": dry_runs}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verl-git", type=Path, required=True)
    parser.add_argument("--recipe-git", type=Path, required=True)
    parser.add_argument("--tag", default="v0.9.0")
    parser.add_argument("--out", type=Path, default=corpus.DOCS)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per script capture")
    parser.add_argument("--dry-run-python", help="a Python with verl's dependencies, for real dry runs")
    parser.add_argument("--dry-run-path", help="a folder put first on that Python's path (a release, installed "
                                               "with pip install --no-deps --target)")
    parser.add_argument("--start-check", action="append", default=[], metavar="DIR",
                        help="with --dry-run-python: a verl release installed in DIR (pip install --no-deps --target); "
                             "each recipe entry's module is started there with --cfg job (repeatable)")
    args = parser.parse_args(argv)
    summary = measure(args.verl_git, args.recipe_git, args.tag, args.timeout,
                      progress=lambda m: print(m, file=sys.stderr), dry_run_python=args.dry_run_python,
                      dry_run_path=args.dry_run_path, start_checks=tuple(args.start_check))
    corpus.write_json(args.out / "recipes.json", summary)
    corpus.write_readme(args.out)
    print(f"{args.tag}: {summary['other_import_compile_same_module']}/{summary['other_launches']} other-entry launches "
          f"import, compile and start the same module ({summary['other_verl_accepts_import_compile_same_module']}/"
          f"{summary['other_verl_accepts']} of those verl takes as written); {summary['launches']} launches",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``tutorrl compile``'s work: spec files (and quoted globs) compiled, then written, all or nothing.

:func:`compile_files` is what ``tutorrl.api.compile_files`` calls and what the command prints
(compiler/text.py). Nothing is imported here at module level beyond msgspec: a cold compile of one
spec loads only what compiling it needs.
"""

from __future__ import annotations

from typing import Any

import msgspec


class WrittenLaunch(msgspec.Struct, frozen=True):
    """One bundle written (or found already there) for one launch of a spec."""

    #: The spec file as given (a pattern's match for a quoted glob).
    spec: str
    experiment: str
    verl: str
    variant: str
    #: ``<out>/<id>`` as written; ``created`` false where an identical bundle was already there.
    folder: str
    created: bool
    #: A sweep's point: its swept settings and their values, in the sweep's order; None for a spec without one.
    point: list[tuple[str, Any]] | None = None


class SpecLaunches(msgspec.Struct, frozen=True):
    """A spec as given and its launches' bundles (one; a sweep's points in its order)."""

    spec: str
    launches: list[WrittenLaunch]

    @property
    def sweep(self) -> bool:
        return self.launches[0].point is not None


class CompiledFiles(msgspec.Struct, frozen=True):
    """What ``tutorrl compile`` did: each spec in the order given (one named twice is there twice) with its
    bundles, the rules verl itself does not enforce (said, never refused), and the bases given beside the
    specs that extend them that compile only through those (with how many extend each)."""

    specs: list[SpecLaunches]
    warnings: list[str]
    partial_bases: list[tuple[str, int]]


def compile_files(specs: list[str], out: str = "bundles", *, sets: list[str] | tuple[str, ...] = (),
                  rerecord: bool = False) -> CompiledFiles:
    """Each spec compiled in memory, then its bundles written under ``out``; with several specs (or a
    pattern), nothing is written unless every one compiles (:class:`~tutorrl.errors.SpecError` with every
    problem of every spec)."""
    if len(specs) > 1 or _is_pattern(specs[0]):
        return _compile_many(specs, out, list(sets), rerecord)
    import os

    from tutorrl.compiler.bundle import write_bundle
    from tutorrl.compiler.spec import read_spec_bytes
    from tutorrl.compiler.spec.compose import might_compose

    path = specs[0]
    raw = read_spec_bytes(path, path)
    if sets or might_compose(raw):
        # Only a spec that may extend a base or sweep loads the composition (a cold compile's time).
        from tutorrl.compiler.pipeline.family import compile_raw

        family = compile_raw(path, path, raw, sets=list(sets))
        if len(family) > 1:
            return _compile_many(specs, out, list(sets), rerecord, {path: family})
        compiled = family[0].bundle
    else:
        from tutorrl.compiler.pipeline.compile import compile_bytes

        compiled = compile_bytes(raw, path)
    result = write_bundle(compiled, out, spec_dir=os.path.dirname(path), rerecord=rerecord)
    return CompiledFiles([SpecLaunches(path, [_launch(path, compiled, result, None)])],
                         [w.render() for w in compiled.warnings], [])


def _launch(path: str, compiled, result, point) -> WrittenLaunch:
    m = compiled.manifest
    return WrittenLaunch(path, m.experiment, m.verl, m.variant, str(result.folder), bool(result.created),
                         None if point is None else list(point.values))


def _is_pattern(word: str) -> bool:
    """A glob to expand (the shell did not, it was quoted), unless a file has that very name."""
    import os

    return any(c in word for c in "*?[") and not os.path.exists(word)


def _spec_paths(words: list[str]) -> tuple[list[str], list]:
    """The spec files named by ``words``, in the order given, each pattern's
    matches sorted in its place; and a problem for each pattern matching none."""
    import glob
    import os

    from tutorrl.errors import Problem

    paths: list[str] = []
    problems = []
    for word in words:
        if not _is_pattern(word):
            paths.append(word)
            continue
        matches = sorted(p for p in glob.glob(word, recursive=True) if not os.path.isdir(p))
        if not matches:
            problems.append(Problem("no spec file matches this pattern", file=word))
        paths += matches
    return paths, problems


def _compile_many(specs: list[str], out: str, sets: list[str], rerecord: bool,
                  done: dict | None = None) -> CompiledFiles:
    """Every spec compiled in memory first; bundles are written only when all compile.

    All or nothing for the whole set, not only per spec: the output is one
    bundle path per launch in the order given, which a failed spec would leave
    without a line, and a set compiled together (a sweep, a folder of specs)
    is reviewed and committed together -- half of it in bundles/ would be a
    state no one asked for. Writing a bundle that is already there costs
    nothing, so compiling the set again once it is fixed redoes no work.

    A sweep is one spec of many launches: each of its points is a launch. A
    spec that another spec of the set extends is a base: compiled like any
    spec where it compiles on its own, and otherwise (a partial base, which
    leaves what its children give) only through the specs built on it.
    """
    import os

    from tutorrl.compiler.bundle import write_bundle
    from tutorrl.compiler.pipeline.family import bases_of, compile_family
    from tutorrl.errors import InputError, Problem, SpecError, TutorrlError

    paths, problems = _spec_paths(specs)
    families = dict(done or {})  # path -> its launches: a spec named twice is compiled once
    based = _bases_in(paths, bases_of) if len(paths) > 1 else {}
    partial: list[tuple[str, int]] = []  # bases that do not compile on their own: compiled through those that extend them
    failed = len(problems)  # a pattern that matches nothing counts as a failed spec
    for path in dict.fromkeys(paths):
        if path in families:
            continue
        try:
            family = compile_family(path, sets=sets)
        except InputError as exc:
            count = based.get(os.path.realpath(path))
            if count:
                partial.append((path, count))
                continue
            problems += exc.problems
            failed += 1
            continue
        except TutorrlError as exc:
            problems.append(Problem(exc.render().removeprefix("error: "), file=path))
            failed += 1
            continue
        families[path] = family
    warnings = [w.render() for family in families.values() for launch in family for w in launch.bundle.warnings]
    if problems:
        given = len(families) + failed
        raise SpecError(problems, summary=f"{failed} of {given} {'spec' if given == 1 else 'specs'} "
                                          f"{'has' if failed == 1 else 'have'} problems; no bundle was written.")
    # Bundles already there first: write_bundle only compares those, and one
    # that differs is refused before any new bundle is written.
    skipped = {p for p, _ in partial}
    paths = [p for p in paths if p not in skipped]
    launches = [(launch, os.path.dirname(path)) for path in dict.fromkeys(paths) for launch in families[path]]
    written = {}
    fresh, again = [], []
    new_ids = set()
    rerecorded = set()
    for launch, spec_dir in launches:
        if os.path.exists(os.path.join(out, launch.bundle.id)):
            # Re-recorded by the first spec that names it, as a new bundle is written.
            first = launch.bundle.id not in rerecorded
            rerecorded.add(launch.bundle.id)
            written[id(launch)] = write_bundle(launch.bundle, out, spec_dir=spec_dir, rerecord=rerecord and first)
        elif launch.bundle.id in new_ids:
            # A launch two specs of the set hold (a point two sweeps share): written once, by the
            # first that names it, whose sources its manifest then records (store._refresh_provenance).
            again.append((launch, spec_dir))
        else:
            new_ids.add(launch.bundle.id)
            fresh.append((launch, spec_dir))
    if len(fresh) > 1:
        # Creating a file waits on the disk without using the CPU (a 100-point
        # sweep creates 500): four writers overlap those waits. Each bundle is still written atomically,
        # and every one was compiled, and every existing one compared, before
        # the first was written; the order new ones land in is no promise.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=4) as pool:
            for (launch, _), result in zip(fresh, pool.map(
                    lambda c: write_bundle(c[0].bundle, out, spec_dir=c[1]), fresh)):
                written[id(launch)] = result
    else:
        for launch, spec_dir in fresh:
            written[id(launch)] = write_bundle(launch.bundle, out, spec_dir=spec_dir)
    for launch, spec_dir in again:
        written[id(launch)] = write_bundle(launch.bundle, out, spec_dir=spec_dir)
    compiled_specs = [SpecLaunches(path, [_launch(path, launch.bundle, written[id(launch)], launch.point)
                                          for launch in families[path]]) for path in paths]
    return CompiledFiles(compiled_specs, warnings, partial)


def _bases_in(paths: list[str], bases_of) -> dict[str, int]:
    """The specs of ``paths`` that others of them extend (by real path), and how many extend each."""
    import os

    given = {os.path.realpath(p) for p in paths}
    counts: dict[str, int] = {}
    for path in paths:
        try:
            with open(path, "rb") as fh:
                raw = fh.read(1 << 20)
        except OSError:
            continue  # compiling it says why
        for base in bases_of(path, raw):
            real = os.path.realpath(base)
            if real in given:
                counts[real] = counts.get(real, 0) + 1
    return counts

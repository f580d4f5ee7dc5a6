"""Spec bytes -> :class:`CompiledBundle`: the whole compiler as one pure function (a spec file,
with its bases and sweep, is compiler/pipeline/family.py's)."""

from __future__ import annotations

from tutorrl.compiler.bundle import CompiledBundle
from tutorrl.compiler.pipeline import roots
from tutorrl.compiler.pipeline.assemble import assemble
from tutorrl.compiler.pipeline.resolve import resolve
from tutorrl.compiler.pipeline.rules import check_rules
from tutorrl.compiler.release import load_lock
from tutorrl.compiler.spec import parse_spec, variant_of
from tutorrl.compiler.spec.normal_form import normalize
from tutorrl.errors import Finding, SpecError


def compile_bytes(raw: bytes, name: str) -> CompiledBundle:
    """Compile spec bytes; ``name`` only labels error messages (never hashed).

    Every problem is reported in one round: rule findings, the plug-in's
    findings, settings the release lacks and bad ``extra_overrides`` together.
    """
    spec, lock, resolved, warnings = resolve_bytes(raw, name)
    return assemble(spec, resolved, lock, warnings=warnings)


def resolve_bytes(raw: bytes, name: str, *, refusals: list | None = None):
    """(normalised spec, lock, resolved overrides, warnings) of spec bytes: the launch without the bundle.

    With ``refusals`` (a list), what the compiler refuses in a well-formed spec
    (its rules, overrides the release would refuse) is appended there instead
    of raised, and the launch is the spec's as written, refused overrides
    included: what ``tutorrl import`` proves a spec against before saying what
    to change (verl refuses the same at start). Never for a bundle."""
    return resolve_parsed(*parse_spec(raw, name), refusals=refusals)


def resolve_parsed(spec, locate, *, refusals: list | None = None):
    """:func:`resolve_bytes` from the spec as parsed (not yet normalised) and its locator:
    what ``tutorrl migrate`` asks of a spec it retargets in memory."""
    try:
        lock = load_lock(spec.experiment.verl, variant_of(spec), spec.experiment.entry)
    except SpecError as exc:
        raise SpecError([locate(tuple((p.key or "experiment.verl").split(".")), p.message, p.hint)
                         for p in exc.problems]) from None
    # main_ppo with no recipe (most specs) reads no entries data and hashes nothing: the cold compile's path.
    if spec.experiment.entry is not None or spec.experiment.recipe is not None:
        try:
            from tutorrl.compiler.pipeline.recipe_code import pin
            from tutorrl.compiler.release import find_entry

            spec = pin(spec, find_entry(spec.experiment.entry))
        except SpecError as exc:
            raise SpecError([locate(tuple(p.key.split(".")), p.message, p.hint) for p in exc.problems]) from None
    try:
        spec = normalize(spec)
        findings: list[Finding] = check_rules(spec, lock)
        if spec.reward.plugin is not None:
            from tutorrl.compiler.spec import plugin_of
            from tutorrl.compiler.spec.rewards import plugin_rules

            plugin, options = plugin_of(spec)
            findings += plugin_rules(plugin, spec, options)
    except SpecError as exc:
        # The plug-in's problems (what it filled, or its own failure) name no
        # file: each is placed at the user's reward.plugin, keeping its key.
        raise SpecError([p if p.file is not None else _at_plugin(locate, p) for p in exc.problems]) from None
    keyset = None
    if spec.verl.extra_overrides or spec.verl.unread_overrides:
        from tutorrl.compiler.release import load_keyset

        keyset = load_keyset(lock.release, lock.variant, lock.entry)
    resolved, problems = resolve(spec, lock, keyset, keep_refused=refusals is not None)
    findings += problems
    findings += _argument_limits(spec, resolved)
    findings += roots.findings(spec, resolved, lock)
    errors = [locate(f.key.split("."), f.message, f.hint) for f in findings if f.severity == "error"]
    if errors and refusals is None:
        raise SpecError(errors)
    if errors:
        refusals += errors
    warnings = tuple(locate(f.key.split("."), f.message, f.hint) for f in findings if f.severity == "warning")
    return spec, lock, resolved, warnings


def _at_plugin(locate, problem):
    import msgspec

    placed = locate(("reward", "plugin"), problem.message, problem.hint)
    return msgspec.structs.replace(placed, key=problem.key or placed.key)


# Linux refuses one argument over 128 KiB (MAX_ARG_STRLEN) and an argv plus
# environment over ARG_MAX (2 MiB by default): the launch would die at `exec`
# with "Argument list too long". A quarter of ARG_MAX leaves room for the
# environment a job inherits.
MAX_ARG = 128 * 1024 - 1
MAX_ARGV = 512 * 1024


def _utf8_len(text: str) -> int:
    # Nearly every override is ASCII, whose length is its byte count: no encoded copy.
    return len(text) if text.isascii() else len(text.encode())


def _argument_limits(spec, resolved) -> list[Finding]:
    out = []
    total = 0
    for o in resolved.overrides:
        if o.runtime:
            continue
        size = _utf8_len(o.text)
        total += size + 1
        if size > MAX_ARG:
            out.append(Finding(o.setting, f"the override for {o.key} is {size} bytes; Linux passes at most "
                               f"{MAX_ARG + 1} bytes in one argument",
                               "shorten the value, or put it in a file verl reads"))
    for name, value in spec.env.set.items():
        # The kernel holds each "NAME=value" of the environment to the same 128 KiB as an argument.
        size = _utf8_len(name) + 1 + _utf8_len(value)
        total += size + 1
        if size > MAX_ARG:
            out.append(Finding(f"env.set.{name}", f"{name}=... is {size} bytes; Linux passes at most "
                               f"{MAX_ARG + 1} bytes in one environment entry", "shorten the value, or put it in "
                               "a file the job reads"))
    if total > MAX_ARGV:
        out.append(Finding("verl", f"the launch's arguments and environment take {total} bytes; more than "
                           f"{MAX_ARGV} risks \"Argument list too long\" at launch", None))
    return out



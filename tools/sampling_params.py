"""Print passthrough.toml's [[undeclared]] entries for the rollout engines' sampling parameters (verl 0.2 to 0.5).

    python tools/sampling_params.py ENGINE_WHEEL [ENGINE_WHEEL ...]

Up to 0.5.0 verl's vLLM rollout copies every rollout key that names an
attribute of vLLM's ``SamplingParams`` into the sampling parameters
(``vllm_rollout_spmd.py``: ``for k in config.keys(): if hasattr(SamplingParams(),
str(k))``), and from 0.3.0 the SGLang rollout does the same with SGLang's, so
such a key is read although no yaml declares it (from 0.6.0 the rollout table
is a dataclass first, which refuses such keys). For each supported release
whose wheel has that loop, this takes the engine version its extra allows
(``Requires-Dist: vllm<=X`` / ``sglang[...]==X``), reads the sampling fields
from that engine's wheel with ``ast`` -- vLLM's ``SamplingParams`` struct
fields (private ``_`` ones left out, and ``seed`` where the loop skips it);
SGLang's ``__init__`` arguments that ``__init__`` also stores as attributes
(the loop copies attributes, SGLang builds the params from the arguments) --
drops the keys the release's yaml declares, and prints one entry per key,
engine and release range. Each entry names its engine (``engines``): the
other engines' rollouts, and the HF rollout, never read that key, so a field
both engines have gets one entry for each, each citing its own rollout file. The wheels are pip's (``pip download --no-deps``);
none is committed.
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile

from tutorrl.compiler.release import fetch_wheel, load_built, load_keyset
from tutorrl.compiler.release.keymap import supported_releases

LOOP = "if hasattr(SamplingParams(), str(k))"
PREFIX = "actor_rollout_ref.rollout."
# engine -> (verl's rollout file, the engine's sampling file, the pin in verl's METADATA)
ENGINES = {
    "vllm": ("verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", "vllm/sampling_params.py",
             r"Requires-Dist: vllm\s*\(?[^;\n]*?<=\s*([0-9.]+)"),
    "sglang": ("verl/workers/rollout/sglang_rollout/sglang_rollout.py", "sglang/srt/sampling/sampling_params.py",
               r"Requires-Dist: sglang\[[^\]]*\]\s*==\s*([0-9a-z.]+)"),
}


def engine_fields(wheel: str) -> tuple[str, str, list[str]]:
    engine, version = wheel.rsplit("/", 1)[-1].split("-")[:2]
    with zipfile.ZipFile(wheel) as zf:
        tree = ast.parse(zf.read(ENGINES[engine][1]).decode())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SamplingParams")
    if engine == "vllm":
        names = [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                 and "ClassVar" not in ast.unparse(s.annotation)]
    else:
        init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        stored = {n.attr for n in ast.walk(init) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                  and isinstance(n.value, ast.Name) and n.value.id == "self"}
        names = [a.arg for a in init.args.args[1:] + init.args.kwonlyargs if a.arg in stored]
    return engine, version, [n for n in names if not n.startswith("_")]


def _loop_function(code: str) -> str | None:
    """The function of verl's rollout file that holds the copying loop."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.FunctionDef) and LOOP in (ast.get_source_segment(code, node) or ""):
            inner = [n for n in ast.walk(node) if isinstance(n, ast.FunctionDef) and n is not node
                     and LOOP in (ast.get_source_segment(code, n) or "")]
            if not inner:
                return node.name
    return None


def main(argv: list[str]) -> int:
    fields = {(e, v): names for e, v, names in map(engine_fields, argv)}
    releases = supported_releases()
    reads: dict[tuple, set[str]] = {}  # (key, engine, function, variant) -> releases
    pins: dict[tuple[str, str], str] = {}
    for release in releases:
        # From 0.6.0 the loop runs over RolloutConfig's fields: a '+' key stops verl before it
        # (compiler/release/built/), so only releases that keep the rollout table a dict count.
        if "actor_rollout_ref.rollout" in load_built(release, "fsdp").sections:
            continue
        with zipfile.ZipFile(fetch_wheel(release)) as zf:
            files = {n: zf.read(n).decode() for n in zf.namelist()
                     if n.endswith(".dist-info/METADATA") or n in {r for r, _, _ in ENGINES.values()}}
        meta = next(t for n, t in files.items() if n.endswith("METADATA"))
        for engine, (reader, _, pin_re) in ENGINES.items():
            code = files.get(reader, "")
            function = _loop_function(code) if LOOP in code else None
            found = re.search(pin_re, meta)
            if function is None or found is None:
                continue
            pin = found.group(1)
            if (engine, pin) not in fields:
                sys.exit(f"verl {release} allows {engine} {pin}: give that {engine} wheel")
            pins[(release, engine)] = pin
            skip_seed = 'and k != "seed"' in code
            for variant in ("fsdp", "megatron"):
                keyset = load_keyset(release, variant)
                for name in fields[(engine, pin)]:
                    key = PREFIX + name
                    if (name == "seed" and skip_seed) or keyset.has(key) or keyset.is_prefix(key):
                        continue
                    reads.setdefault((key, engine, function, variant), set()).add(release)
    out = []
    for key, engine, function in sorted({k[:3] for k in reads}):
        spans = {v: _spans(sorted(reads.get((key, engine, function, v), ()), key=releases.index), releases)
                 for v in ("fsdp", "megatron")}
        both = spans["fsdp"] == spans["megatron"]
        for variant in (("",) if both else ("fsdp", "megatron")):
            for span in spans[variant or "fsdp"]:
                versions = ", ".join(sorted({pins[(r, engine)] for r in span}))
                label = "vLLM" if engine == "vllm" else "SGLang"
                allows = "the highest the release allows" if engine == "vllm" else "the one the release pins"
                out.append("[[undeclared]]\n"
                           f'key = "{key}"\n'
                           f'releases = "{span[0]}..{span[-1]}"\n'
                           + (f'variants = ["{variant}"]\n' if variant else "")
                           + f'engines = ["{engine}"]\n'
                           + f'read_by = "{ENGINES[engine][0]}: {function}: {LOOP}"\n'
                           + f'note = "a sampling field of {label} {versions} ({allows})"\n')
    print("\n".join(out), end="")
    return 0


def _spans(found: list[str], order: list[str]) -> list[list[str]]:
    runs: list[list[str]] = []
    for release in found:
        if runs and order.index(runs[-1][-1]) == order.index(release) - 1:
            runs[-1].append(release)
        else:
            runs.append([release])
    return runs


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

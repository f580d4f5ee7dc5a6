"""Print passthrough.toml's [[undeclared]] entries for vLLM's sampling parameters (verl 0.2 to 0.5).

    python tools/sampling_params.py VLLM_WHEEL [VLLM_WHEEL ...]

Up to 0.5.0 verl's vLLM rollout copies every rollout key that names an
attribute of vLLM's ``SamplingParams`` into the sampling parameters
(``vllm_rollout_spmd.py``: ``for k in config.keys(): if hasattr(SamplingParams(),
str(k))``), so such a key is read although no yaml declares it (from 0.6.0 the
rollout table is a dataclass first, which refuses such keys). For each
supported release whose wheel has that loop, this takes the highest vLLM its
``vllm`` extra allows (``Requires-Dist: vllm<=X``), reads ``SamplingParams``'s
fields from that vLLM wheel's ``vllm/sampling_params.py`` (``ast``; private
``_`` fields left out, and ``seed`` where the loop skips it), drops the keys the
release's yaml declares, and prints one entry per key and release range. The
wheels are pip's (``pip download --no-deps vllm==X``); none is committed.
"""

from __future__ import annotations

import ast
import re
import sys
import zipfile

from tutorrl.compiler.release import fetch_wheel, load_built, load_keyset, supported_releases

READER = "verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py"
LOOP = "if hasattr(SamplingParams(), str(k))"
PREFIX = "actor_rollout_ref.rollout."


def vllm_fields(wheel: str) -> tuple[str, list[str]]:
    version = wheel.rsplit("/", 1)[-1].split("-")[1]
    with zipfile.ZipFile(wheel) as zf:
        tree = ast.parse(zf.read("vllm/sampling_params.py").decode())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SamplingParams")
    return version, [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                     and "ClassVar" not in ast.unparse(s.annotation) and not s.target.id.startswith("_")]


def main(argv: list[str]) -> int:
    fields = dict(vllm_fields(w) for w in argv)
    releases = supported_releases()
    reads: dict[tuple[str, str], set[str]] = {}  # (key, variant) -> releases
    pins = {}
    for release in releases:
        with zipfile.ZipFile(fetch_wheel(release)) as zf:
            code = zf.read(READER).decode() if READER in zf.namelist() else ""
            meta = next(zf.read(n).decode() for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        # From 0.6.0 the loop runs over RolloutConfig's fields: a '+' key stops verl before it
        # (compiler/release/built/), so only releases that keep the rollout table a dict count.
        if LOOP not in code or "actor_rollout_ref.rollout" in load_built(release, "fsdp").sections:
            continue
        pin = re.search(r"Requires-Dist: vllm\s*\(?[^;\n]*?<=\s*([0-9.]+)", meta).group(1)
        if pin not in fields:
            sys.exit(f"verl {release} allows vLLM up to {pin}: give that vLLM's wheel")
        pins[release] = pin
        skip_seed = 'and k != "seed"' in code
        for variant in ("fsdp", "megatron"):
            keyset = load_keyset(release, variant)
            for name in fields[pin]:
                key = PREFIX + name
                if (name == "seed" and skip_seed) or keyset.has(key) or keyset.is_prefix(key):
                    continue
                reads.setdefault((key, variant), set()).add(release)
    out = []
    for key in sorted({k for k, _ in reads}):
        spans = {v: _spans(sorted(reads.get((key, v), ()), key=releases.index), releases) for v in ("fsdp", "megatron")}
        both = spans["fsdp"] == spans["megatron"]
        for variant in (("",) if both else ("fsdp", "megatron")):
            for span in spans[variant or "fsdp"]:
                first, last = span[0], span[-1]
                vllm = ", ".join(sorted({pins[r] for r in span}))
                out.append("[[undeclared]]\n"
                           f'key = "{key}"\n'
                           f'releases = "{first}..{last}"\n'
                           + (f'variants = ["{variant}"]\n' if variant else "")
                           + f'read_by = "{READER}: __init__: {LOOP}"\n'
                           + f'note = "a field of vLLM {vllm}\'s SamplingParams (the highest vLLM the release allows); '
                             'read with rollout.name=vllm"\n')
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

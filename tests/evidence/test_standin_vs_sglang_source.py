"""The stand-in sglang server is sglang's behaviour, release by release -- read from sglang's own source.

The publication checks are tested against `evidence_contract_server.ContractServer`
(no GPU, no sglang here). This test downloads the sglang wheels of the releases
that matter (0.5.12: verl 0.9.1's `[sglang]` pin; 0.5.14: tutorrl's stack pin;
0.5.21: the first whose `compare` frees its snapshot), reads the modules the
stand-in copies -- `srt/entrypoints/http_server.py`, `srt/managers/io_struct.py`,
`srt/utils/weight_checker.py`, `srt/layers/multimodal.py` -- with `ast`, and
holds both sides to them:

* the stand-in, driven over HTTP in the shape tutorrl assigns that release,
  does what the source does (methods, the required `action`, the fields it
  honours, whether `compare` frees the snapshot, `selector`'s default, the
  0.5.12 kernel's 2-D failure, `/get_weight_version`);
* tutorrl's own knowledge (`evidence.sglang.snapshot_is_freed`, `SELECTOR`)
  agrees with the source.

A release whose source changes any of these fails here, naming the fact.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from functools import cache

import pytest

from evidence_contract_server import ContractServer
from tutorrl.compiler.release.keyset_import import default_wheel_cache
from tutorrl.evidence import sglang

pytestmark = [pytest.mark.slow, pytest.mark.wheels]

RELEASES = ("0.5.12", "0.5.14", "0.5.21")
# Where each module is; the checksum kernel moved in 0.5.21 (the first path that exists is read).
MODULES = {
    "http": ("sglang/srt/entrypoints/http_server.py",),
    "io": ("sglang/srt/managers/io_struct.py",),
    "checker": ("sglang/srt/utils/weight_checker.py",),
    "kernel": ("sglang/srt/layers/multimodal.py", "sglang/kernels/ops/memory/gpu_tensor_hash.py"),
}


def shape_of(release: str) -> str:
    """The response shape tutorrl expects from a release (evidence/sglang.py's three)."""
    v = tuple(int(p) for p in release.split("."))
    return "0.5.12" if v < (0, 5, 13) else "0.5.13-0.5.20" if v < (0, 5, 21) else ">=0.5.21"


@cache
def _sources(release: str) -> dict[str, ast.Module]:
    cache_dir = default_wheel_cache() / "sglang"
    wheels = sorted(cache_dir.glob(f"sglang-{release}-*.whl"))
    if not wheels:
        cache_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "--disable-pip-version-check", "-q", f"sglang=={release}", "-d", str(cache_dir)],
                              capture_output=True, text=True, check=False)
        wheels = sorted(cache_dir.glob(f"sglang-{release}-*.whl"))
        if not wheels:
            pytest.fail(f"sglang {release} wheel unavailable (needs the package index or a cached wheel): "
                        f"{proc.stderr.strip()[-500:]}")
    with zipfile.ZipFile(wheels[0]) as zf:
        names = set(zf.namelist())
        paths = {k: next(p for p in candidates if p in names) for k, candidates in MODULES.items()}
        return {k: ast.parse(zf.read(path).decode(), path) for k, path in paths.items()}


def _function(tree: ast.AST, name: str, cls: str | None = None) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and cls is not None and node.name == cls:
            return _function(node, name)
        if cls is None and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    raise AssertionError(f"no {cls + '.' if cls else ''}{name}")


def _route(tree: ast.Module, path: str) -> set[str] | None:
    """The HTTP methods http_server.py routes `path` with; None when it has no such route."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.args):
                continue
            first = deco.args[0]
            if not (isinstance(first, ast.Constant) and first.value == path):
                continue
            if deco.func.attr in ("get", "post", "put"):
                return {deco.func.attr.upper()}
            if deco.func.attr == "api_route":
                methods = next(k.value for k in deco.keywords if k.arg == "methods")
                return {e.value for e in methods.elts}
    return None


def _request_fields(tree: ast.Module) -> dict[str, object]:
    """CheckWeightsReqInput's fields: name -> default (`REQUIRED` when it has none)."""
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "CheckWeightsReqInput")
    out = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = ast.literal_eval(node.value) if node.value is not None else "REQUIRED"
    return out


def facts(release: str) -> dict[str, object]:
    """What the release's source says, for each behaviour the stand-in models."""
    src = _sources(release)
    compare = _function(src["checker"], "_compare", cls="WeightChecker")
    frees = any(isinstance(n, ast.Assign) and any(ast.unparse(t) == "self._snapshot_tensors" for t in n.targets)
                and isinstance(n.value, ast.Constant) and n.value.value is None for n in ast.walk(compare))
    words = ast.unparse(_function(src["kernel"], "_as_uint32_words"))
    fields = _request_fields(src["io"])
    return {
        "methods": _route(src["http"], "/weights_checker"),
        "action_required": fields.get("action") == "REQUIRED",
        "fields": set(fields),
        "selector_default": fields.get("selector"),
        "compare_frees": frees,
        "kernel_flattens": "reshape(-1)" in words,
        "weight_version_route": _route(src["http"], "/get_weight_version") is not None,
    }


def _ask(url: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:  # noqa: S310 - loopback stand-in
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def observed(release: str) -> dict[str, object]:
    """What the stand-in does as `release` (in the shape tutorrl expects of it), asked over HTTP as tutorrl asks."""
    tensors = {"model.a.weight": b"\x01" * 16, "model.odd.weight": b"\x02" * 15}
    out: dict[str, object] = {}
    with ContractServer(dict(tensors), shape=shape_of(release), release=release, dims={"model.odd.weight": (5, 3)},
                        draft={"model.mtp.weight": b"\x03" * 8}) as server:
        get, _ = _ask(server.url, "GET", "/weights_checker")
        out["methods"] = {"POST"} | ({"GET"} if get != 405 else set())
        no_action, _ = _ask(server.url, "POST", "/weights_checker", {})
        out["action_required"] = no_action >= 400 and not server.requests
        sent = {"action": "snapshot", "allow_quant_error": False, "skip_tensor_list": [], "selector": "target",
                "not_a_field": 1}
        _ask(server.url, "POST", "/weights_checker", sent)
        out["fields"] = set(server.bodies[-1])
        status, _ = _ask(server.url, "POST", "/weights_checker", {"action": "compare", "selector": "target"})
        assert status == 200
        out["compare_frees"] = not server.snapshot_held
        status, body = _ask(server.url, "POST", "/weights_checker", {"action": "checksum"})
        out["kernel_flattens"] = status == 200
        if status == 200:
            names = {n for rank in body.get("ranks", []) for n in rank.get("checksums", {})}
            out["selector_default"] = "all" if any(n.startswith("draft.") for n in names) else None
        version, _ = _ask(server.url, "GET", "/get_weight_version")
        out["weight_version_404"] = version == 404
    return out


@pytest.mark.parametrize("release", RELEASES)
def test_the_stand_in_does_what_the_release_source_does(release):
    fact, seen = facts(release), observed(release)
    assert seen["methods"] == fact["methods"], "methods of /weights_checker"
    assert seen["action_required"] == fact["action_required"], "whether `action` is required"
    # The stand-in keeps exactly the sent fields the release declares (pydantic/msgspec ignore the rest).
    sent = {"action", "allow_quant_error", "skip_tensor_list", "selector", "not_a_field"}
    assert seen["fields"] == sent & fact["fields"], "fields the release honours"
    assert seen["compare_frees"] == fact["compare_frees"], "whether compare frees the snapshot"
    assert seen["kernel_flattens"] == fact["kernel_flattens"], "the kernel's handling of a 2-D odd-width tensor"
    if seen["kernel_flattens"]:
        assert seen["selector_default"] == fact["selector_default"], "which runners a request without selector means"
    # Deprecated (an HTTPException 404) or gone: either way a 404, and tutorrl does not rely on it.
    assert seen["weight_version_404"]


@pytest.mark.parametrize("release", RELEASES)
def test_tutorrls_own_knowledge_matches_the_release_source(release):
    fact = facts(release)
    assert sglang.snapshot_is_freed(shape_of(release)) == fact["compare_frees"]
    # tutorrl asks for the target runner only: a field that exists from 0.5.21, ignored before.
    assert set(sglang.SELECTOR) <= fact["fields"] or "selector" not in fact["fields"]
    assert ("selector" in fact["fields"]) == (shape_of(release) == ">=0.5.21")
    assert fact["kernel_flattens"] == (release != "0.5.12")
    assert fact["weight_version_route"] == (shape_of(release) != ">=0.5.21")

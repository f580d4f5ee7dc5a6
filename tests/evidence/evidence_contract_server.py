"""A loopback HTTP server that behaves as sglang's /model_info and /weights_checker do, release by release.

It is NOT sglang: it says so in /model_info (`server_kind`), and records made
against it are marked "contract-test-server". What it copies, from the wheels
(`srt/entrypoints/http_server.py`, `srt/managers/io_struct.py`,
`srt/utils/weight_checker.py`, `srt/layers/multimodal.py`, `srt/lora/`):

| behaviour | 0.5.12 | 0.5.13-0.5.20 | 0.5.21+ |
|---|---|---|---|
| `/weights_checker` methods | POST, `action` required | GET or POST, `action` defaults to "checksum" | same |
| request fields | `action` (others ignored: pydantic dataclass) | + `allow_quant_error` from 0.5.15 (others ignored) | + `skip_tensor_list`, `selector` ("all" when absent: target and draft) |
| rank entry | `{checksums, parallelism_info: {..}}`, the replying TP rank only | + `per_gpu_checksum`, every TP rank, `per_engine_checksum` | `parallelism_info` a list of role entries; draft names prefixed "draft." |
| `compare` frees the snapshot | no (nothing does) | no | yes |
| 2+-D tensor whose last dimension is not a multiple of 4 bytes | the whole checksum call fails (HTTP 400) | hashed (`reshape(-1)`, 0.5.13) | hashed |
| `/get_weight_version` | 404 ("deprecated, use /model_info") | 404 | no such route (404) |
| `/server_info` `device` | the server's `--device`; its checksums are sha256[:8] on "cpu", the GPU kernel otherwise | same | same |

LoRA: `POST /load_lora_adapter_from_tensor` stores the adapter beside the
served tensors, never in them: sglang keeps adapter weights as plain tensor
attributes (no `nn.Parameter`, no `register_buffer`), and `/weights_checker`
hashes parameters and buffers only. So a checksum never shows the adapter,
and `reset_tensors` randomises the base and leaves the adapter.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tutorrl.evidence.sglang import CONTRACT_TEST_SERVER
from tutorrl.evidence.tensorhash import sglang_cpu_hash, sglang_gpu_hash

SHAPES = ("0.5.12", "0.5.13-0.5.20", ">=0.5.21")


class ContractServer:
    def __init__(self, tensors: dict[str, bytes], *, shape: str = ">=0.5.21", dp_size: int = 1,
                 weight_version: str = "default", honest: bool = True, corrupt_dp: int | None = None,
                 tp_size: int = 1, blind_reset: bool = False, shards: list[dict[str, bytes]] | None = None,
                 draft: dict[str, bytes] | None = None, dims: dict[str, tuple[int, ...]] | None = None,
                 release: str | None = None, device: str = "cuda"):
        assert shape in SHAPES, shape
        # sglang's --device: "cpu" hashes every tensor with sha256 (its CPU branch), any other the GPU kernel.
        self.device = device
        self.hash = sglang_cpu_hash if device == "cpu" else sglang_gpu_hash
        # A release inside the shape, where it matters: 0.5.13 and 0.5.14 (tutorrl's pin) know no
        # `allow_quant_error`, 0.5.15-0.5.20 do; without one, the shape's newest is played.
        self.release = tuple(int(p) for p in release.split(".")) if release else None
        self.tensors, self.shape, self.dp_size = dict(tensors), shape, dp_size
        self.weight_version, self.honest, self.corrupt_dp = weight_version, honest, corrupt_dp
        # TP sharding: with `shards`, rank t serves shards[t] (what sglang's
        # loaders put on that rank, built by the test); without, every TP rank
        # reports the same map (only the coverage of ranks is looked at).
        # 0.5.12 replies with rank 0 only.
        self.shards = [dict(m) for m in shards] if shards is not None else None
        self.tp_size = len(shards) if shards is not None else tp_size
        # A broken checker: `reset_tensors` says success and changes nothing.
        self.blind_reset = blind_reset
        # A speculative-decoding draft (MTP) runner: answered for selector "draft"/"all" (0.5.21+ only).
        self.draft = dict(draft) if draft is not None else None
        # Tensor shapes (a tensor not named is 1-D): only 0.5.12's kernel cares.
        self.dims = dict(dims or {})
        self.snapshot: dict[str, bytes] | None = None
        self.adapter: dict[str, str] | None = None  # the loaded LoRA adapter (name -> hex of its bytes)
        self.requests: list[str] = []  # /weights_checker actions, in order
        self.paths: list[tuple[str, str]] = []  # every (method, path) asked
        self.bodies: list[dict] = []  # every /weights_checker request body
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, obj):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _body(self):
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n)) if n else None

            def do_GET(self):
                server.paths.append(("GET", self.path))
                if self.path in ("/model_info", "/get_model_info"):
                    info = {"model_path": "test", "weight_version": server.weight_version, "is_generation": True}
                    if server.honest:
                        info["server_kind"] = CONTRACT_TEST_SERVER
                    return self._send(200, info)
                if self.path == "/server_info":
                    return self._send(200, {"device": server.device, "tp_size": server.tp_size})
                if self.path == "/get_weight_version" and server.shape != ">=0.5.21":
                    return self._send(404, {"detail": "/get_weight_version is deprecated. Please use '/model_info'"})
                if self.path == "/weights_checker":
                    if server.shape == "0.5.12":
                        return self._send(405, {"detail": "Method Not Allowed"})
                    return self._checker(self._body())
                self._send(404, {"detail": "Not Found"})

            def do_POST(self):
                server.paths.append(("POST", self.path))
                if self.path == "/load_lora_adapter_from_tensor":
                    req = self._body()
                    with server.lock:
                        server.adapter = dict(req["tensors"])
                    return self._send(200, {"success": True, "message": "adapter loaded"})
                if self.path != "/weights_checker":
                    return self._send(404, {"detail": "Not Found"})
                self._checker(self._body())

            def _checker(self, req):
                req = dict(req or {})
                if "action" not in req:
                    if server.shape == "0.5.12":  # a required dataclass field
                        return self._send(422, {"detail": [{"loc": ["body", "action"], "msg": "Field required"}]})
                    req["action"] = "checksum"
                action = req["action"]
                # Fields a release does not know are ignored, as pydantic does.
                quant = server.shape != "0.5.12" and (server.release is None or server.release >= (0, 5, 15))
                known = {"action"} | ({"allow_quant_error"} if quant else set()) | (
                    {"skip_tensor_list", "selector"} if server.shape == ">=0.5.21" else set())
                req = {k: v for k, v in req.items() if k in known}
                with server.lock:
                    server.requests.append(action)
                    server.bodies.append(req)
                    if action == "checksum":
                        return self._send(*server.checksum(req))
                    if action in ("snapshot", "reset_tensors", "compare"):
                        return self._send(*server.act(action, req))
                self._send(400, {"success": False, "message": f"Unsupported action={action!r}"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def load(self, tensors: dict[str, bytes]) -> None:
        """What a full-weight push (update_weights_from_tensor) does to the served tensors."""
        with self.lock:
            self.tensors = dict(tensors)

    @property
    def snapshot_held(self) -> bool:
        return self.snapshot is not None

    def _runners(self, req: dict) -> list[tuple[str, dict[str, bytes]]]:
        selector = req.get("selector", "all") if self.shape == ">=0.5.21" else "target"
        out = []
        if selector in ("target", "all"):
            out.append(("target", self.tensors))
        if selector in ("draft", "all") and self.draft is not None:
            out.append(("draft", self.draft))
        return out

    def _skipped(self, name: str, req: dict) -> bool:
        return any(s in name for s in (req.get("skip_tensor_list") or ()))

    def act(self, action: str, req: dict | None = None) -> tuple[int, dict]:
        # As sglang's WeightChecker: snapshot copies, reset writes random
        # values in place, compare is bitwise -- and frees the snapshot only
        # from 0.5.21 (weight_checker.py:202; before, `_snapshot_tensors` stays set).
        req = req or {}
        runners = self._runners(req)
        if action == "snapshot":
            self.snapshot = {f"{role}\0{n}": b for role, m in runners for n, b in m.items()}
            return 200, {"success": True, "message": "Success."}
        if action == "reset_tensors":
            if not self.blind_reset:
                for _, m in runners:
                    for n in list(m):
                        if not self._skipped(n, req):
                            m[n] = os.urandom(len(m[n]))
            return 200, {"success": True, "message": "Success."}
        if self.snapshot is None:
            return 400, {"success": False, "message": "AssertionError: _snapshot_tensors is None"}
        now = {f"{role}\0{n}": b for role, m in runners for n, b in m.items()}
        bad = sorted(n.split("\0")[1] for n in self.snapshot
                     if now.get(n) != self.snapshot[n] and not self._skipped(n.split("\0")[1], req))
        if bad or self.snapshot.keys() != now.keys():
            return 400, {"success": False, "message": f"check tensor equality failed:\nname={bad[:5]}"}
        if self.shape == ">=0.5.21":
            self.snapshot = None
        return 200, {"success": True, "message": "Success."}

    def _kernel_0_5_12(self, name: str, data: bytes) -> str | None:
        dims = self.dims.get(name)
        if not dims or len(dims) < 2:
            return None
        itemsize = len(data) // max(1, math.prod(dims))
        row = dims[-1] * itemsize
        if row % 4 == 0:
            return None
        if len(data) % 4:
            return f"The size of tensor a ({len(data)}) must match the size of tensor b ({row}) at non-singleton dimension 1"
        return f"self.size(-1) must be divisible by 4 to view Byte as UInt32 (different element sizes), but got {row}"

    def checksum(self, req: dict | None = None) -> tuple[int, dict]:
        req = req or {}
        runners = self._runners(req)
        if self.shape == "0.5.12":
            for _, m in runners:
                for n, b in sorted(m.items()):
                    err = self._kernel_0_5_12(n, b)
                    if err:
                        return 400, {"success": False, "message": err}
        return 200, self.checksum_body(req)

    def checksum_body(self, req: dict | None = None) -> dict:
        req = req or {}
        ranks = []
        tp_ranks = [0] if self.shape == "0.5.12" else range(self.tp_size)
        for dp, tp in ((d, t) for d in range(self.dp_size) for t in tp_ranks):
            sums, roles = {}, []
            for role, m in self._runners(req):
                served = self.shards[tp] if (self.shards is not None and role == "target") else m
                for n, b in served.items():
                    if not self._skipped(n, req):
                        # 0.5.21's _merge_checksum_payloads: only draft names are prefixed.
                        sums[n if role == "target" else f"{role}.{n}"] = self.hash(b)
                roles.append(role)
            if dp == self.corrupt_dp:
                name = sorted(sums)[0]
                sums[name] = "0123456789abcdef"
            info = {"tp_rank": tp, "tp_size": self.tp_size, "dp_rank": dp, "dp_size": self.dp_size, "pp_rank": 0,
                    "pp_size": 1, "rank": dp * self.tp_size + tp, "size": self.dp_size * self.tp_size}
            entry = {"checksums": sums}
            per_gpu = hashlib.sha256("".join(n + sums[n] for n in sorted(sums)).encode()).hexdigest()
            if self.shape == "0.5.12":
                entry["parallelism_info"] = info
            elif self.shape == "0.5.13-0.5.20":
                entry.update(parallelism_info=info, per_gpu_checksum=per_gpu)
            else:
                entry.update(parallelism_info=[{"role": role, **info} for role in roles], per_gpu_checksum=per_gpu)
            ranks.append(entry)
        body = {"success": True, "message": "Success.", "ranks": ranks}
        if self.shape != "0.5.12":
            body["per_engine_checksum"] = hashlib.sha256("".join(r["per_gpu_checksum"] for r in ranks).encode()).hexdigest()
        return body

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

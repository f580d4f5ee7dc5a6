"""A loopback HTTP server following sglang's documented /model_info and
/weights_checker contract (0.5.12, 0.5.13-0.5.20 and 0.5.21+ shapes), with
the `snapshot` / `reset_tensors` / `compare` actions (sglang >= 0.5.6).

It is NOT sglang: it says so in /model_info (`server_kind`), and records made
against it are marked "contract-test-server".
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tutorrl.evidence.sglang import CONTRACT_TEST_SERVER
from tutorrl.evidence.tensorhash import sglang_gpu_hash


class ContractServer:
    def __init__(self, tensors: dict[str, bytes], *, shape: str = ">=0.5.21", dp_size: int = 1,
                 weight_version: str = "default", honest: bool = True, corrupt_dp: int | None = None,
                 tp_size: int = 1, blind_reset: bool = False, shards: list[dict[str, bytes]] | None = None):
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
        self.snapshot: dict[str, bytes] | None = None
        self.requests: list[str] = []
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

            def do_GET(self):
                if self.path == "/model_info":
                    info = {"model_path": "test", "weight_version": server.weight_version, "is_generation": True}
                    if server.honest:
                        info["server_kind"] = CONTRACT_TEST_SERVER
                    return self._send(200, info)
                self._send(404, {"detail": "Not Found"})

            def do_POST(self):
                if self.path != "/weights_checker":
                    return self._send(404, {"detail": "Not Found"})
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                action = req.get("action")
                with server.lock:
                    server.requests.append(action)
                    if action == "checksum":
                        return self._send(200, server.checksum_body())
                    if action in ("snapshot", "reset_tensors", "compare"):
                        return self._send(*server.act(action))
                self._send(400, {"success": False, "message": f"unsupported action {action!r}"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def load(self, tensors: dict[str, bytes]) -> None:
        """What a push does to the served tensors."""
        with self.lock:
            self.tensors = dict(tensors)

    def act(self, action: str) -> tuple[int, dict]:
        # As sglang's weight_checker: snapshot copies, reset writes random
        # values in place, compare is bitwise and frees the snapshot.
        if action == "snapshot":
            self.snapshot = dict(self.tensors)
            return 200, {"success": True, "message": "snapshot taken"}
        if action == "reset_tensors":
            if not self.blind_reset:
                self.tensors = {n: os.urandom(len(b)) for n, b in self.tensors.items()}
            return 200, {"success": True, "message": "tensors reset"}
        if self.snapshot is None:
            return 400, {"success": False, "message": "compare needs a snapshot"}
        bad = sorted(n for n in self.snapshot if self.tensors.get(n) != self.snapshot[n])
        if bad or self.snapshot.keys() != self.tensors.keys():
            return 400, {"success": False, "message": f"mismatch: {bad[:5]}"}
        self.snapshot = None
        return 200, {"success": True, "message": "compare ok"}

    def checksum_body(self) -> dict:
        ranks = []
        tp_ranks = [0] if self.shape == "0.5.12" else range(self.tp_size)
        for dp, tp in ((d, t) for d in range(self.dp_size) for t in tp_ranks):
            served = self.shards[tp] if self.shards is not None else self.tensors
            sums = {n: sglang_gpu_hash(b) for n, b in served.items()}
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
                entry.update(parallelism_info=[{"role": "target", **info}], per_gpu_checksum=per_gpu)
            ranks.append(entry)
        body = {"success": True, "message": "ok", "ranks": ranks}
        if self.shape != "0.5.12":
            body["per_engine_checksum"] = hashlib.sha256("".join(r["per_gpu_checksum"] for r in ranks).encode()).hexdigest()
        return body

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

"""A loopback HTTP server following sglang's documented /model_info and
/weights_checker contract (0.5.12, 0.5.13-0.5.20 and 0.5.21+ shapes).

It is NOT sglang: it says so in /model_info (`server_kind`), and records made
against it are marked "contract-test-server".
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tutorrl.evidence.sglang import CONTRACT_TEST_SERVER
from tutorrl.evidence.tensorhash import sglang_gpu_hash


class ContractServer:
    def __init__(self, tensors: dict[str, bytes], *, shape: str = ">=0.5.21", dp_size: int = 1,
                 weight_version: str = "default", honest: bool = True, corrupt_dp: int | None = None):
        self.tensors, self.shape, self.dp_size = tensors, shape, dp_size
        self.weight_version, self.honest, self.corrupt_dp = weight_version, honest, corrupt_dp
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
                if req.get("action") != "checksum":
                    return self._send(400, {"success": False, "message": "unsupported action"})
                self._send(200, server.checksum_body())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def checksum_body(self) -> dict:
        ranks = []
        for dp in range(self.dp_size):
            sums = {n: sglang_gpu_hash(b) for n, b in self.tensors.items()}
            if dp == self.corrupt_dp:
                name = sorted(sums)[0]
                sums[name] = "0123456789abcdef"
            info = {"tp_rank": 0, "tp_size": 1, "dp_rank": dp, "dp_size": self.dp_size, "pp_rank": 0,
                    "pp_size": 1, "rank": dp, "size": self.dp_size}
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

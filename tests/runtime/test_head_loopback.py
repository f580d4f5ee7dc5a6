"""The embedded head is loopback only: it advertises 127.0.0.1 and nothing of it listens elsewhere."""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.request

import pytest

from runtime_helpers import procs_with_env
from tutorrl.runtime import jobs_api, submit
from tutorrl.runtime.head import EmbeddedHead

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray]


def _listening() -> dict[str, str]:
    """Socket inode -> local address, of every TCP socket in LISTEN state on this machine."""
    out = {}
    for name, family in (("tcp", 4), ("tcp6", 6)):
        try:
            with open(f"/proc/net/{name}") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A":
                continue
            raw = bytes.fromhex(local.split(":")[0])
            # /proc/net/tcp* prints each 32-bit word of the address in host (little-endian) order.
            words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            address = ipaddress.IPv4Address(words) if family == 4 else ipaddress.IPv6Address(words)
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            out[inode] = f"{address}:{int(local.split(':')[1], 16)}"
    return out


def _sockets_of(pids: set[int]) -> dict[int, list[str]]:
    """pid -> the local addresses its listening TCP sockets are bound to."""
    listening, found = _listening(), {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in listening:
                found.setdefault(pid, []).append(listening[target[8:-1]])
    return found


def _group(pgid: int) -> set[int]:
    pids = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.getpgid(int(name)) == pgid:
                    pids.add(int(name))
            except OSError:
                continue
    return pids


@pytest.mark.parametrize("lean", [False, True], ids=["run", "dry-run"])
def test_the_embedded_head_advertises_and_listens_on_loopback_only(tmp_path, lean):
    run_id = f"tutorrl-loopback-{int(lean)}"
    head = EmbeddedHead(run_id=run_id, num_gpus=0, workdir=tmp_path, lean=lean)
    try:
        head.start()
        if lean:  # no State API: the node table its program wrote from the GCS, in the API's shape
            nodes = json.loads((head.run_dir / "started").read_bytes())["data"]["result"]["result"]
        else:
            req = urllib.request.Request(f"{head.url}/api/v0/nodes?detail=1", headers=head.headers)
            with urllib.request.urlopen(req, timeout=10) as resp:
                nodes = json.load(resp)["data"]["result"]["result"]
        assert [n["node_ip"] for n in nodes] == ["127.0.0.1"], nodes
        # A driver in a job (verl's main_ppo calls ray.init) finds the node at the address it advertises.
        client = jobs_api.client(head.url, head.headers)
        sid = client.submit_job(
            entrypoint="python -c \"import ray; ray.init(); print('driver-node', ray.nodes()[0]['NodeManagerAddress'])\"",
            submission_id=f"{run_id}-job", entrypoint_num_cpus=1)
        assert submit.wait_terminal(client, sid) == "SUCCEEDED", client.get_job_logs(sid)
        assert "driver-node 127.0.0.1" in client.get_job_logs(sid)
        # Every process of the head: its process group (the GCS, raylet, dashboard, agents, workers)
        # and whatever carries its run id outside that group (the job's own processes).
        pids = _group(head.proc.pid) | set(procs_with_env("TUTORRL_RUN_ID", run_id))
        sockets = _sockets_of(pids)
        assert len(sockets) >= 3, sockets  # the GCS, the raylet, the dashboard at least
        elsewhere = {pid: addrs for pid, addrs in sockets.items()
                     if any(not ipaddress.ip_address(a.rsplit(":", 1)[0]).is_loopback for a in addrs)}
        assert elsewhere == {}, elsewhere
    finally:
        head.stop()

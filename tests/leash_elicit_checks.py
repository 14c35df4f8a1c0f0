#!/usr/bin/env python3
"""Leash approvals asked in the MCP client (docs/leash.md, docs/protocol.md §5) through the Python
SDK 2.x high-level Client: a token principal whose policy asks a human
(`opaque = "ask"`) plans `sh { ... }`; shoal_cap_request asks the user with
`elicitation/create`: in the handshake era as a server-to-client request, at
2026-07-28 as an input_required round. Accept approves (the apply runs),
decline denies (the apply is refused), cancel leaves the plan pending, and a
client without the capability gets the pending result unasked.

Usage: leash_elicit_checks.py SHOAL_BIN SOCKET WORKDIR
(with SHOAL_HTTP_URL set, over the daemon's Streamable HTTP endpoint instead of the shim)

Each check prints one JSON line {"check": name, "ok": bool, ...}; exit 0 when
all passed.
"""
import asyncio
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_sdk_checks import emit, is_err, sc  # noqa: E402

POLICY = """
[policy.principal."agent:e"]
opaque = "ask"
auto_apply = "in-grant"
approve_via = ["elicitation", "cli"]

[policy.principal."agent:e".fs]
read = ["/**"]
write = ["{w}/**"]
delete = ["{w}/**"]
"""


class Run:
    def __init__(self, shoal, socket, workdir):
        self.shoal, self.socket, self.workdir = shoal, socket, workdir
        self.failed = []
        self.asked = []

    def expect(self, name, cond, **info):
        emit(check=name, ok=bool(cond), **info)
        if not cond:
            self.failed.append(name)

    def token(self, principal):
        out = subprocess.run([self.shoal, "token", "create", principal], capture_output=True, text=True, check=True)
        return out.stdout.strip().splitlines()[-1]

    def client(self, mode, token, answer):
        from mcp import Client, StdioServerParameters
        import mcp.types as t

        params = StdioServerParameters(
            command=self.shoal,
            args=["mcp", "--socket", self.socket, "--session", f"elicit-{mode}"],
            env={**os.environ, "SHOAL_TOKEN": token},
        )
        url = os.environ.get("SHOAL_HTTP_URL")
        if url:
            # The daemon's own Streamable HTTP endpoint instead of the shim (tests/it/http_sdk.rs).
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client
            http = create_mcp_http_client(headers={"Authorization": "Bearer " + token})
            params = streamable_http_client(f"{url}?session=elicit-{mode}", http_client=http)
        if answer is None:
            return Client(params, mode=mode)

        async def callback(context, p):
            self.asked.append(p.message)
            if answer == "accept":
                return t.ElicitResult(action="accept", content={"approve": True})
            if answer == "error":
                return t.ErrorData(code=-32603, message="no user here")
            return t.ElicitResult(action=answer)

        return Client(params, mode=mode, elicitation_callback=callback)

    async def plan(self, c, text):
        r = await c.call_tool("shoal_plan", {"src": f"sh {{ echo {text} > {self.workdir}/w/{text}.txt }}"})
        p = sc(r)
        return p["plan_ref"], p

    async def case(self, mode, tok, answer):
        name = f"{mode}_{answer or 'no_capability'}"
        self.asked.clear()
        async with self.client(mode, tok, answer) as c:
            ref, p = await self.plan(c, name)
            self.expect(f"{name}_planned", p["verdict"] == "approval_required" and p["approval_pending"], plan=p)
            r = await c.call_tool("shoal_cap_request", {"plan_ref": ref})
            g = sc(r)
            a = await c.call_tool("shoal_apply", {"plan_ref": ref})
            written = os.path.exists(f"{self.workdir}/w/{name}.txt")
            asked = bool(self.asked) and ref in self.asked[0] and "opaque" in self.asked[0]
            if answer == "accept":
                ok = (g["grant"] == "approved" and g["elicitation"]["outcome"] == "accept"
                      and asked and not is_err(a) and written)
            elif answer == "decline":
                ok = g["grant"] == "denied" and asked and is_err(a) and sc(a)["code"] == -32010 and not written
            elif answer in ("cancel", "error"):
                ok = (g["grant"] == "approval_pending" and g["elicitation"]["outcome"] == "pending"
                      and asked and is_err(a) and sc(a)["code"] == -32011 and not written)
            else:
                ok = (g["grant"] == "approval_pending" and "elicitation" not in g and not self.asked
                      and g["uncovered_effects"] == ["opaque"] and is_err(a) and not written)
            self.expect(name, ok, grant=g, apply=sc(a), asked=self.asked[:1], version=c.protocol_version)

    async def main(self):
        os.makedirs(f"{self.workdir}/w", exist_ok=True)
        cfg = os.path.join(os.environ["XDG_CONFIG_HOME"], "shoal")
        os.makedirs(cfg, exist_ok=True)
        with open(os.path.join(cfg, "shoal.toml"), "w") as f:
            f.write(POLICY.format(w=f"{self.workdir}/w"))
        tok = self.token("agent:e")
        for mode, answer in [("legacy", "accept"), ("legacy", "decline"), ("legacy", "cancel"),
                             ("legacy", "error"), ("legacy", None), ("auto", "accept"),
                             ("auto", "decline"), ("auto", None)]:
            try:
                await asyncio.wait_for(self.case(mode, tok, answer), 60)
            except Exception as e:  # noqa: BLE001
                self.expect(f"{mode}_{answer or 'no_capability'}", False, error=repr(e))
        # The durable journal channel says who decided and how.
        r, w = await asyncio.open_unix_connection(self.socket)
        out = []
        for i, (m, p) in enumerate([("session.attach", {"session": "elicit-kernel"}),
                                    ("events.read", {"channel": "journal", "limit": 100})]):
            w.write((json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": m, "params": p}) + "\n").encode())
            await w.drain()
            out.append(json.loads(await r.readline()))
        w.close()
        text = json.dumps(out[1])
        self.expect("journal_records_decisions", "MCP elicitation/create via" in text and '"approved"' in text
                    and '"denied"' in text and "agent:e" in text, events=out[1])
        return not self.failed


if __name__ == "__main__":
    from importlib.metadata import version
    emit(sdk=version("mcp"))
    shoal, socket, workdir = sys.argv[1], sys.argv[2], sys.argv[3]
    sys.exit(0 if asyncio.run(Run(shoal, socket, workdir).main()) else 1)

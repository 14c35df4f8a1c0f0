#!/usr/bin/env python3
"""The legacy suite's tool, resource, subscription, progress and cancellation
checks (mcp_sdk_checks.py) through the Python SDK 2.x high-level `Client`, in
either era: `auto` (probes server/discover and must settle on 2026-07-28) or
`legacy` (the initialize handshake, pinned to 2025-11-25).

Usage: mcp_era_checks.py SHOAL_BIN SOCKET WORKDIR auto|legacy

Each check prints one JSON line {"check": name, "ok": bool, ...}; exit 0 when
all passed.
"""
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_sdk_checks import Checks, emit, is_err, sc  # noqa: E402

MODERN = "2026-07-28"


class EraChecks(Checks):
    def __init__(self, client, mode, *args):
        super().__init__(client, *args)
        self.mode = mode

    async def subscriptions(self):
        if self.mode == "legacy":
            return await super().subscriptions()
        async with self.s.listen(resource_subscriptions=["shoal://events/user.sdk"]) as sub:
            honored = list(sub.honored.resource_subscriptions or [])
            self.expect("listen_acknowledged", honored == ["shoal://events/user.sdk"], honored=honored)
            await self.kernel(("events.publish", {"channel": "user.sdk", "payload": {"n": 1}}))
            try:
                got = await asyncio.wait_for(sub.__anext__(), 10)
            except asyncio.TimeoutError:
                got = None
            self.expect("subscription_update", got is not None and got.uri.startswith("shoal://events/user.sdk"), got=got)
        async with self.s.listen(resource_subscriptions=["shoal://events/user.sdk2"]) as sub:
            await self.kernel(("events.publish", {"channel": "user.sdk", "payload": {"n": 2}}),
                              ("events.publish", {"channel": "user.sdk2", "payload": {"n": 3}}))
            try:
                got = await asyncio.wait_for(sub.__anext__(), 10)
            except asyncio.TimeoutError:
                got = None
            self.expect("unsubscribed_stops", got is not None and got.uri == "shoal://events/user.sdk2", got=got)

    async def era(self):
        want = MODERN if self.mode == "auto" else "2025-11-25"
        self.expect("era", self.s.protocol_version == want, version=self.s.protocol_version)
        # An unknown resource: -32602 with data.uri at 2026-07-28, the kernel's code before.
        try:
            await self.s.read_resource("shoal://out/9999")
            self.expect("resource_not_found", False)
        except Exception as e:  # noqa: BLE001
            err = getattr(e, "error", None)
            code = getattr(err, "code", None)
            data = getattr(err, "data", None) or {}
            ok = (code == -32602 and data.get("uri") == "shoal://out/9999") if self.mode == "auto" else code == -32004
            self.expect("resource_not_found", ok, code=code, data=data)
        if self.mode == "auto":
            # The session is explicit: _meta names it, the shim's stays untouched.
            meta = {"shoal/session": "era-other"}
            await self.s.call_tool("shoal_exec", {"src": "let only_there = 5"}, meta=meta)
            r = await self.s.call_tool("shoal_exec", {"src": "only_there"}, meta=meta)
            d = await self.s.call_tool("shoal_exec", {"src": "only_there"})
            self.expect("explicit_session", not is_err(r) and sc(r)["value"] == {"$": "int", "v": 5} and is_err(d),
                        named=sc(r), default=sc(d))


async def main():
    from mcp import Client, StdioServerParameters

    shoal, socket, workdir, mode = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    params = StdioServerParameters(command=shoal, args=["mcp", "--socket", socket], env=dict(os.environ))
    updates = asyncio.Queue()
    progress = []

    async def handler(msg):
        root = getattr(msg, "root", msg)
        if type(root).__name__ == "ResourceUpdatedNotification":
            await updates.put(str(root.params.uri))

    async with Client(params, mode=mode, message_handler=handler) as client:
        emit(check="connected", ok=True, version=client.protocol_version)
        c = EraChecks(client, mode, socket, workdir, updates, progress)
        return await c.run(c.era, c.tools, c.resources, c.subscriptions, c.cancellation)


if __name__ == "__main__":
    from importlib.metadata import version
    emit(sdk=version("mcp"))
    sys.exit(0 if asyncio.run(main()) else 1)

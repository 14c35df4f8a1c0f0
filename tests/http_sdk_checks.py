#!/usr/bin/env python3
"""The SDK checks of mcp_sdk_checks.py (classic ClientSession) and
mcp_era_checks.py (the 2.x Client in either era) over Streamable HTTP, against the
daemon's own endpoint with a bearer token, instead of through the stdio shim.

Usage: http_sdk_checks.py URL TOKEN SOCKET WORKDIR classic|auto|legacy

Each check prints one JSON line {"check": name, "ok": bool, ...}; exit 0 when
all passed.
"""
import asyncio
import sys
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mcp_sdk_checks import Checks, emit, f  # noqa: E402


def handler_for(updates):
    async def handler(msg):
        root = getattr(msg, "root", msg)
        if type(root).__name__ == "ResourceUpdatedNotification":
            await updates.put(str(root.params.uri))
    return handler


async def classic(url, token, socket, workdir):
    from mcp import ClientSession
    from importlib.metadata import version
    updates, progress = asyncio.Queue(), []
    headers = {"Authorization": "Bearer " + token}
    if int(version("mcp").split(".")[0]) >= 2:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client
        transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    else:
        from mcp.client.streamable_http import streamablehttp_client
        transport = streamablehttp_client(url, headers=headers)
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write, message_handler=handler_for(updates)) as session:
            init = await session.initialize()
            res = f(f(init, "capabilities"), "resources")
            emit(check="initialize", ok=bool(res and res.subscribe), version=f(init, "protocol_version", "protocolVersion"))
            c = Checks(session, socket, workdir, updates, progress)
            return await c.run(c.tools, c.resources, c.subscriptions, c.cancellation)


async def era(url, token, socket, workdir, mode):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp_era_checks import EraChecks
    updates, progress = asyncio.Queue(), []
    http = create_mcp_http_client(headers={"Authorization": "Bearer " + token})
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, mode=mode, message_handler=handler_for(updates)) as client:
        emit(check="connected", ok=True, version=client.protocol_version)
        c = EraChecks(client, mode, socket, workdir, updates, progress)
        return await c.run(c.era, c.tools, c.resources, c.subscriptions, c.cancellation)


def main():
    url, token, socket, workdir, mode = sys.argv[1:6]
    from importlib.metadata import version
    emit(sdk=version("mcp"), mode=mode)
    if mode == "classic":
        return asyncio.run(classic(url, token, socket, workdir))
    return asyncio.run(era(url, token, socket, workdir, mode))


if __name__ == "__main__":
    sys.exit(0 if main() else 1)

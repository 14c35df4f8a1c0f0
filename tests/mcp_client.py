#!/usr/bin/env python3
"""Drive `shoal mcp` with the official MCP Python SDK (no pytest needed).

Usage: mcp_client.py SHOAL_BIN SOCKET

Checks, each printed as one JSON line:
  classic   ClientSession + stdio_client: initialize, tools/list, shoal_exec 6 * 7
  auto      mcp>=2 high-level Client in its default mode, which probes
            server/discover first: must not wait on its 10 s timeout
Exit 0 when every check passed, 1 otherwise.
"""
import asyncio
import json
import os
import sys
import time


def emit(**kv):
    print(json.dumps(kv, default=str), flush=True)


def field(obj, *names):
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    raise AttributeError(names)


def check_result(result):
    is_error = field(result, "is_error", "isError")
    sc = field(result, "structured_content", "structuredContent")
    want = {"$": "int", "v": 42}
    ok = (not is_error) and isinstance(sc, dict) and sc.get("value") == want and sc.get("ref", "").startswith("out:")
    return ok, sc


async def classic(params):
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    t0 = time.perf_counter()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            version = field(init, "protocol_version", "protocolVersion")
            tools = await session.list_tools()
            names = [t.name for t in tools.tools]
            result = await session.call_tool("shoal_exec", {"src": "6 * 7"})
            ok, sc = check_result(result)
            ok = ok and names[:2] == ["shoal_exec", "shoal_get"]
            emit(check="classic", ok=ok, version=version, tools=names, structured=sc,
                 ms=round((time.perf_counter() - t0) * 1000, 1))
            return ok


async def auto(params):
    try:
        from mcp import Client
    except ImportError:
        emit(check="auto", ok=True, skipped="mcp 1.x has no high-level Client")
        return True
    t0 = time.perf_counter()
    async with Client(params) as client:
        connect_ms = (time.perf_counter() - t0) * 1000
        result = await client.call_tool("shoal_exec", {"src": "6 * 7"})
        ok, sc = check_result(result)
        ok = ok and connect_ms < 5000
        emit(check="auto", ok=ok, connect_ms=round(connect_ms, 1), version=client.protocol_version, structured=sc)
        return ok


async def main():
    from mcp import StdioServerParameters

    shoal, socket = sys.argv[1], sys.argv[2]
    params = StdioServerParameters(command=shoal, args=["mcp", "--socket", socket], env=dict(os.environ))
    results = []
    for check in (classic, auto):
        try:
            results.append(await asyncio.wait_for(check(params), 60))
        except Exception as e:  # noqa: BLE001
            emit(check=check.__name__, ok=False, error=repr(e))
            results.append(False)
    return all(results)


if __name__ == "__main__":
    import mcp  # noqa: F401
    try:
        from importlib.metadata import version
        emit(sdk=version("mcp"))
    except Exception:  # noqa: BLE001
        pass
    sys.exit(0 if asyncio.run(main()) else 1)

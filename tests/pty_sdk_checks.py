#!/usr/bin/env python3
"""The PTY tools through the official Python MCP SDK (1.x and 2.x), via the
`shoal mcp` shim: every shoal_pty_* tool valid and invalid (the SDK checks
structuredContent against each outputSchema), the Python REPL scenario,
shoal://pty resources, and a screen subscription that stops on unsubscribe.

Usage: pty_sdk_checks.py SHOAL_BIN SOCKET WORKDIR

Each check prints one JSON line {"check": name, "ok": bool, ...}; exit 0 when
all passed.
"""
import asyncio
import json
import os
import sys


def emit(**kv):
    print(json.dumps(kv, default=str), flush=True)


def f(obj, *names):
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    raise AttributeError(names)


def sc(result):
    return f(result, "structured_content", "structuredContent")


def is_err(result):
    return f(result, "is_error", "isError")


def url(u):
    """mcp 1.x takes AnyUrl, mcp 2.x plain strings."""
    from importlib.metadata import version
    if int(version("mcp").split(".")[0]) >= 2:
        return u
    from pydantic import AnyUrl
    return AnyUrl(u)


async def next_update(updates, timeout):
    try:
        return await asyncio.wait_for(updates.get(), timeout)
    except asyncio.TimeoutError:
        return None


class Checks:
    def __init__(self, session, updates):
        self.s = session
        self.updates = updates
        self.failed = []

    def expect(self, name, cond, **info):
        emit(check=name, ok=bool(cond), **info)
        if not cond:
            self.failed.append(name)

    async def tool(self, name, args):
        return await self.s.call_tool(name, args)

    async def tools(self):
        tools = await self.s.list_tools()
        names = [t.name for t in tools.tools]
        want = ["shoal_pty_open", "shoal_pty_send", "shoal_pty_read",
                "shoal_pty_resize", "shoal_pty_close", "shoal_pty_list"]
        self.expect("pty_tools_listed", all(w in names for w in want), tools=names)
        r = await self.tool("shoal_pty_open", {"cmd": "cat", "cols": 40, "rows": 10})
        ok = not is_err(r) and sc(r)["pty_id"].startswith("pty:") and sc(r)["cols"] == 40
        self.expect("open_valid", ok, sc=sc(r))
        pid = sc(r)["pty_id"]
        r = await self.tool("shoal_pty_open", {"cmd": "no-such-program-zz"})
        self.expect("open_failed", is_err(r) and sc(r)["code"] == -32023, sc=sc(r))
        r = await self.tool("shoal_pty_open", {"cmd": 7})
        self.expect("open_invalid", is_err(r) and sc(r)["code"] == -32602, sc=sc(r))
        r = await self.tool("shoal_pty_send", {"pty_id": pid, "input": ["hello-sdk", {"key": "Enter"}]})
        self.expect("send_valid", not is_err(r) and sc(r)["sent"] == 10, sc=sc(r))
        r = await self.tool("shoal_pty_send", {"pty_id": pid, "input": ["x", {"key": "Nope"}]})
        self.expect("send_invalid", is_err(r) and sc(r)["code"] == -32602
                    and sc(r).get("data", {}).get("index") == 1, sc=sc(r))
        r = await self.tool("shoal_pty_read", {"pty_id": pid, "wait_for": "hello-sdk", "timeout_ms": 10000})
        s = sc(r)
        self.expect("read_valid", not is_err(r) and s["matched"] and len(s["screen"]) == 10
                    and s["cursor"]["row"] >= 1 and s["alive"] and s["exit"] is None, sc=s)
        r = await self.tool("shoal_pty_read", {"pty_id": "pty:999999"})
        self.expect("read_unknown", is_err(r) and sc(r)["code"] == -32022, sc=sc(r))
        r = await self.tool("shoal_pty_resize", {"pty_id": pid, "cols": 60, "rows": 20})
        self.expect("resize_valid", not is_err(r) and sc(r) == {"pty_id": pid, "cols": 60, "rows": 20}, sc=sc(r))
        r = await self.tool("shoal_pty_resize", {"pty_id": pid, "cols": 60})
        self.expect("resize_invalid", is_err(r) and sc(r)["code"] == -32602, sc=sc(r))
        r = await self.tool("shoal_pty_list", {})
        self.expect("list_valid", not is_err(r) and [p["pty_id"] for p in sc(r)["ptys"]] == [pid], sc=sc(r))
        r = await self.tool("shoal_pty_close", {"pty_id": pid})
        self.expect("close_valid", not is_err(r) and sc(r)["closed"]
                    and sc(r)["exit"]["signal"] == "SIGKILL", sc=sc(r))
        r = await self.tool("shoal_pty_close", {"pty_id": pid})
        self.expect("close_twice", is_err(r) and sc(r)["code"] == -32022, sc=sc(r))

    async def repl(self):
        r = await self.tool("shoal_pty_open", {"cmd": "python3", "args": ["-q"]})
        pid = sc(r)["pty_id"]
        r = await self.tool("shoal_pty_read", {"pty_id": pid, "wait_for": ">>>", "timeout_ms": 20000})
        self.expect("repl_prompt", sc(r)["matched"], sc=sc(r))
        await self.tool("shoal_pty_send", {"pty_id": pid, "input": ["print(6 * 7)", {"key": "Enter"}]})
        r = await self.tool("shoal_pty_read", {"pty_id": pid, "wait_for": "re:(?m)^42\n>>>", "timeout_ms": 10000})
        self.expect("repl_42", sc(r)["matched"] and "42" in sc(r)["screen"], sc=sc(r))
        await self.tool("shoal_pty_send", {"pty_id": pid, "input": {"key": "Ctrl-D"}})
        s = None
        for _ in range(200):
            s = sc(await self.tool("shoal_pty_read", {"pty_id": pid, "stable_ms": 20, "timeout_ms": 1000}))
            if not s["alive"]:
                break
        self.expect("repl_exit", s is not None and not s["alive"] and s["exit"]["status"] == 0, sc=s)
        await self.tool("shoal_pty_close", {"pty_id": pid})

    async def resources(self):
        r = await self.tool("shoal_pty_open", {"cmd": "cat", "cols": 30, "rows": 6})
        pid = sc(r)["pty_id"]
        n = pid.split(":")[1]
        lst = await self.s.list_resources()
        uris = [str(x.uri) for x in lst.resources]
        self.expect("pty_resources_listed", "shoal://pty" in uris and ("shoal://pty/" + n) in uris, uris=uris)
        rr = await self.s.read_resource(url("shoal://pty/" + n))
        screen = json.loads(rr.contents[0].text)
        self.expect("pty_resource_read", screen["rows"] == 6 and len(screen["screen"]) == 6, screen=screen)
        rr = await self.s.read_resource(url("shoal://pty"))
        self.expect("pty_list_resource", [p["pty_id"] for p in json.loads(rr.contents[0].text)["ptys"]] == [pid])
        uri = "shoal://pty/" + n
        await self.s.subscribe_resource(url(uri))
        await self.tool("shoal_pty_send", {"pty_id": pid, "input": "ping\r"})
        got = await next_update(self.updates, 10)
        self.expect("pty_subscription_update", got == uri, got=got)
        await self.s.unsubscribe_resource(url(uri))
        while not self.updates.empty():
            self.updates.get_nowait()
        await self.tool("shoal_pty_send", {"pty_id": pid, "input": "pong\r"})
        await self.tool("shoal_pty_read", {"pty_id": pid, "wait_for": "pong", "timeout_ms": 5000})
        got = await next_update(self.updates, 0.5)
        self.expect("pty_unsubscribed_stops", got is None, got=got)
        await self.tool("shoal_pty_close", {"pty_id": pid})


async def main():
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    shoal, socket = sys.argv[1], sys.argv[2]
    params = StdioServerParameters(command=shoal, args=["mcp", "--socket", socket], env=dict(os.environ))
    updates = asyncio.Queue()

    async def handler(msg):
        root = getattr(msg, "root", msg)
        if type(root).__name__ == "ResourceUpdatedNotification":
            await updates.put(str(root.params.uri))

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=handler) as session:
            await session.initialize()
            c = Checks(session, updates)
            for step in (c.tools, c.repl, c.resources):
                try:
                    await asyncio.wait_for(step(), 90)
                except Exception as e:  # noqa: BLE001
                    c.expect(step.__name__, False, error=repr(e))
            return not c.failed


if __name__ == "__main__":
    try:
        from importlib.metadata import version
        emit(sdk=version("mcp"))
    except Exception:  # noqa: BLE001
        pass
    sys.exit(0 if asyncio.run(main()) else 1)

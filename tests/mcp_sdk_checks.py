#!/usr/bin/env python3
"""The MCP surface through the official Python SDK (1.x and 2.x): tools,
argument validation, output schemas, resources, subscriptions, progress and
cancellation. No pytest needed.

Usage: mcp_sdk_checks.py SHOAL_BIN SOCKET WORKDIR

Each check prints one JSON line {"check": name, "ok": bool, ...}; exit 0 when
all passed.
"""
import asyncio
import json
import os
import sys
import time


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


class Checks:
    async def run(self, *steps):
        """Run each step (at most 60 s); a step that raises is a failed check. True when all passed."""
        for step in steps:
            try:
                await asyncio.wait_for(step(), 60)
            except Exception as e:  # noqa: BLE001
                self.expect(step.__name__, False, error=repr(e))
        return not self.failed

    def __init__(self, session, socket, workdir, updates, progress):
        self.s = session
        self.socket = socket
        self.workdir = workdir
        self.updates = updates
        self.progress = progress
        self.failed = []

    def expect(self, name, cond, **info):
        emit(check=name, ok=bool(cond), **info)
        if not cond:
            self.failed.append(name)

    async def kernel(self, *reqs):
        """Raw kernel JSON-RPC on the daemon socket: attach, then reqs."""
        r, w = await asyncio.open_unix_connection(self.socket)
        out = []
        msgs = [("session.attach", {"session": "sdk-kernel"})] + list(reqs)
        for i, (m, p) in enumerate(msgs):
            w.write((json.dumps({"jsonrpc": "2.0", "id": i + 1, "method": m, "params": p}) + "\n").encode())
            await w.drain()
            out.append(json.loads(await r.readline()))
        w.close()
        return out[1:]

    async def tools(self):
        tools = await self.s.list_tools()
        names = [t.name for t in tools.tools]
        self.expect("tools_listed", names[:2] == ["shoal_exec", "shoal_get"], tools=names)
        for t in tools.tools:
            self.expect("output_schema:" + t.name, f(t, "output_schema", "outputSchema") is not None)
        # shoal_exec valid / invalid
        r = await self.s.call_tool("shoal_exec", {"src": "6 * 7"})
        self.expect("exec_valid", not is_err(r) and sc(r)["value"] == {"$": "int", "v": 42}, sc=sc(r))
        links = [c for c in r.content if getattr(c, "type", "") == "resource_link"]
        self.expect("exec_link", len(links) == 1 and str(links[0].uri).startswith("shoal://out/")
                    and links[0].name and f(links[0], "mime_type", "mimeType") == "application/json")
        r = await self.s.call_tool("shoal_exec", {"src": 7, "bogus": True})
        paths = [e["path"] for e in sc(r)["data"]["errors"]] if is_err(r) else []
        self.expect("exec_invalid", is_err(r) and sc(r)["code"] == -32602 and "/src" in paths, sc=sc(r))
        # big list elides; shoal_get slices
        r = await self.s.call_tool("shoal_exec", {"src": "range(0, 100000).collect()"})
        v = sc(r)["value"]
        self.expect("exec_elided", v["$"] == "ref" and v["of"] == "list" and v["n"] == 100000
                    and len(v["preview"]["v"]) == 5, value=v)
        ref = sc(r)["ref"]
        g = await self.s.call_tool("shoal_get", {"ref": ref, "slice": [500, 510], "format": "json"})
        items = [x["v"] for x in sc(g)["value"]["v"]] if not is_err(g) else None
        self.expect("get_valid", items == list(range(500, 510)), items=items)
        g = await self.s.call_tool("shoal_get", {"ref": ref, "slice": "all"})
        self.expect("get_invalid", is_err(g) and sc(g)["code"] == -32602, sc=sc(g))
        g = await self.s.call_tool("shoal_get", {"ref": "out:9999"})
        self.expect("get_unknown_ref", is_err(g) and sc(g)["code"] == -32004, sc=sc(g))
        if "shoal_journal" in names:
            j = await self.s.call_tool("shoal_journal", {"limit": 3})
            self.expect("journal_valid", not is_err(j) and isinstance(sc(j)["entries"], list), sc=str(sc(j))[:300])
            j = await self.s.call_tool("shoal_journal", {"limit": "three"})
            self.expect("journal_invalid", is_err(j) and sc(j)["code"] == -32602)
        # unknown tool: a JSON-RPC error
        try:
            r = await self.s.call_tool("shoal_nope", {})
            self.expect("unknown_tool", False, got=str(r)[:200])
        except Exception as e:  # noqa: BLE001
            self.expect("unknown_tool", "unknown tool" in str(e), error=str(e))

    async def resources(self):
        await self.s.call_tool("shoal_exec", {"src": "{name: \"shoal\", n: 3}"})
        lst = await self.s.list_resources()
        uris = [str(r.uri) for r in lst.resources]
        self.expect("resources_listed", "shoal://session/cwd" in uris and any(u.startswith("shoal://out/") for u in uris), uris=uris)
        tpl = await self.s.list_resource_templates()
        names = [t.name for t in f(tpl, "resource_templates", "resourceTemplates")]
        self.expect("templates_listed", "transcript-value" in names, names=names)
        out = [u for u in uris if u.startswith("shoal://out/")][0]
        rr = await self.s.read_resource(url(out + "?path=name"))
        text = rr.contents[0].text
        self.expect("resource_read_out", json.loads(text) == {"$": "str", "v": "shoal"}, text=text)
        rr = await self.s.read_resource(url("shoal://session/cwd"))
        self.expect("resource_read_cwd", "display" in json.loads(rr.contents[0].text))
        if "journal" in names:
            rr = await self.s.read_resource(url("shoal://journal?limit=2"))
            self.expect("resource_read_journal", "entries" in json.loads(rr.contents[0].text))

    async def subscriptions(self):
        await self.s.subscribe_resource(url("shoal://events/user.sdk"))
        await self.kernel(("events.publish", {"channel": "user.sdk", "payload": {"n": 1}}))
        try:
            got = await asyncio.wait_for(self.updates.get(), 10)
        except asyncio.TimeoutError:
            got = None
        self.expect("subscription_update", got is not None and str(got).startswith("shoal://events/user.sdk"), got=got)
        await self.s.unsubscribe_resource(url("shoal://events/user.sdk"))
        await self.s.subscribe_resource(url("shoal://events/user.sdk2"))
        await self.kernel(("events.publish", {"channel": "user.sdk", "payload": {"n": 2}}),
                          ("events.publish", {"channel": "user.sdk2", "payload": {"n": 3}}))
        try:
            got = await asyncio.wait_for(self.updates.get(), 10)
        except asyncio.TimeoutError:
            got = None
        self.expect("unsubscribed_stops", got is not None and str(got).startswith("shoal://events/user.sdk2"), got=got)

    async def cancellation(self):
        marker = os.path.join(self.workdir, "sdk-sleeper-%d" % os.getpid())
        src = "sh { echo $$ > %s; exec sleep 30 }" % marker
        started = asyncio.Event()

        async def on_progress(progress, total, message):
            self.progress.append((progress, message))
            started.set()

        next_id = getattr(self.s, "_request_id", None)
        task = asyncio.ensure_future(self.s.call_tool("shoal_exec", {"src": src}, progress_callback=on_progress))
        try:
            await asyncio.wait_for(started.wait(), 10)
        except asyncio.TimeoutError:
            pass
        self.expect("progress_notified", started.is_set(), progress=self.progress[:2])
        pid = None
        for _ in range(100):
            try:
                pid = int(open(marker).read().strip())
                break
            except (OSError, ValueError):
                await asyncio.sleep(0.05)
        t0 = time.perf_counter()
        if isinstance(next_id, int):
            # mcp 1.x does not send notifications/cancelled itself.
            from mcp import types
            await self.s.send_notification(types.ClientNotification(types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=next_id, reason="test"))))
        task.cancel()
        try:
            await task
        except BaseException:  # noqa: BLE001
            pass
        gone = False
        for _ in range(100):
            try:
                stat = open("/proc/%d/stat" % pid).read()
                if stat.rsplit(") ", 1)[1].startswith("Z"):
                    gone = True
                    break
            except OSError:
                gone = True
                break
            await asyncio.sleep(0.05)
        r = await self.s.call_tool("shoal_exec", {"src": "1 + 1"})
        ms = (time.perf_counter() - t0) * 1000
        self.expect("cancel_stops_work", pid is not None and gone and ms < 5000
                    and sc(r)["value"] == {"$": "int", "v": 2}, pid=pid, ms=round(ms))


async def main():
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    shoal, socket, workdir = sys.argv[1], sys.argv[2], sys.argv[3]
    params = StdioServerParameters(command=shoal, args=["mcp", "--socket", socket], env=dict(os.environ))
    updates = asyncio.Queue()
    progress = []

    async def handler(msg):
        root = getattr(msg, "root", msg)
        if type(root).__name__ == "ResourceUpdatedNotification":
            await updates.put(str(root.params.uri))

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=handler) as session:
            init = await session.initialize()
            caps = f(init, "capabilities")
            res = f(caps, "resources")
            emit(check="initialize", ok=bool(res and res.subscribe), version=f(init, "protocol_version", "protocolVersion"))
            c = Checks(session, socket, workdir, updates, progress)
            ok = await c.run(c.tools, c.resources, c.subscriptions, c.cancellation)
            return ok and bool(res and res.subscribe)


if __name__ == "__main__":
    try:
        from importlib.metadata import version
        emit(sdk=version("mcp"))
    except Exception:  # noqa: BLE001
        pass
    sys.exit(0 if asyncio.run(main()) else 1)

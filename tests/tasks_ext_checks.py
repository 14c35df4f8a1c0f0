#!/usr/bin/env python3
"""The MCP Tasks extension (io.modelcontextprotocol/tasks, 2026-07-28)
through the Python SDK 2.x high-level `Client` and the shim: a
`ClientExtension` claims `resultType: "task"` on tools/call and resolves the
handle by polling `tasks/get` at `pollIntervalMs`; a second handle is
cancelled with `tasks/cancel`.

Usage: tasks_ext_checks.py SHOAL_BIN SOCKET

Each check prints one JSON line {"check": name, "ok": bool, ...}; exit 0 when
all passed.
"""
import asyncio
import json
import os
import sys
from typing import Any, Literal

EXT = "io.modelcontextprotocol/tasks"
failed = False


def emit(**kw):
    print(json.dumps(kw, default=str), flush=True)


def expect(name, ok, **kw):
    global failed
    failed |= not ok
    emit(check=name, ok=bool(ok), **kw)


async def main():
    from mcp import Client, StdioServerParameters
    from mcp.client.extension import ClientExtension, ResultClaim
    from mcp_types import CallToolResult, Request, Result
    from pydantic import ConfigDict, Field, TypeAdapter

    class TaskHandle(Result):
        model_config = ConfigDict(extra="allow", populate_by_name=True)
        result_type: Literal["task"] = Field(alias="resultType")
        task_id: str = Field(alias="taskId")
        status: str
        poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")

    class TaskRequest(Request[dict[str, Any], str]):
        name_param = "taskId"

    raw = TypeAdapter(dict[str, Any])
    seen = {"handles": [], "polls": 0, "statuses": []}
    cancel_next = {"on": False}

    async def resolve(handle: TaskHandle, ctx) -> CallToolResult:
        seen["handles"].append(handle.task_id)
        s = ctx.session
        if cancel_next["on"]:
            r = await s.send_request(TaskRequest(method="tasks/cancel", params={"taskId": handle.task_id}), raw)
            seen["statuses"].append(r.get("status"))
            return CallToolResult(content=[], is_error=True)
        while True:
            r = await s.send_request(TaskRequest(method="tasks/get", params={"taskId": handle.task_id}), raw)
            seen["polls"] += 1
            seen["statuses"].append(r["status"])
            if r["status"] in ("completed", "failed", "cancelled"):
                return CallToolResult.model_validate(r["result"])
            await asyncio.sleep((r.get("pollIntervalMs") or 250) / 1000)

    class Tasks(ClientExtension):
        identifier = EXT

        def claims(self):
            return [ResultClaim(result_type="task", model=TaskHandle, resolve=resolve)]

    shoal, socket = sys.argv[1], sys.argv[2]
    params = StdioServerParameters(command=shoal, args=["mcp", "--socket", socket, "--session", "sdk-tasks"],
                                   env=dict(os.environ))
    async with Client(params, extensions=[Tasks()]) as client:
        emit(check="connected", ok=True, version=client.protocol_version)
        caps = client.session.server_capabilities
        exts = (caps.model_dump(by_alias=True).get("extensions") or {}) if caps else {}
        expect("advertised", EXT in exts, extensions=exts)

        r = await client.call_tool("shoal_exec", {"src": "6 * 7"})
        expect("short_inline", not seen["handles"] and r.structured_content["value"] == {"$": "int", "v": 42},
               handles=seen["handles"])

        r = await asyncio.wait_for(client.call_tool("shoal_exec", {"src": "sh { sleep 2; echo sdk-done }"}), 30)
        text = json.dumps(r.model_dump(by_alias=True, mode="json"))
        expect("long_became_task", len(seen["handles"]) == 1, handles=seen["handles"])
        expect("polled_to_result", seen["polls"] > 1 and seen["statuses"][-1] == "completed"
               and "sdk-done" in text and not r.is_error, polls=seen["polls"], result=text[:400])

        cancel_next["on"] = True
        await asyncio.wait_for(client.call_tool("shoal_exec", {"src": "sh { sleep 30 }"}), 30)
        expect("cancelled", len(seen["handles"]) == 2 and seen["statuses"][-1] == "cancelled",
               statuses=seen["statuses"])
        cancel_next["on"] = False
        r = await client.session.send_request(
            TaskRequest(method="tasks/get", params={"taskId": seen["handles"][1]}), raw)
        expect("cancelled_stays", r["status"] == "cancelled" and "result" not in r, task=r)
    return not failed


if __name__ == "__main__":
    from importlib.metadata import version
    emit(sdk=version("mcp"))
    sys.exit(0 if asyncio.run(main()) else 1)

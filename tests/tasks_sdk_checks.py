#!/usr/bin/env python3
"""MCP Tasks (2025-11-25) through the official Python MCP SDK 2.x and its
typed models, via the `shoal mcp` shim: the `tasks` capability and
`execution.taskSupport`, a task-augmented `shoal_exec` (CreateTaskResult)
polled with tasks/get and fetched with tasks/result, a second one cancelled
with tasks/cancel, tasks/list, notifications/tasks/status, shoal_cancel and
the task resources.

Usage: tasks_sdk_checks.py SHOAL_BIN SOCKET WORKDIR

Each check prints one JSON line {"check": name, "ok": bool, ...}; exit 0 when
all passed.
"""
import asyncio
import json
import os
import sys


def emit(**kv):
    print(json.dumps(kv, default=str), flush=True)


async def main():
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    import mcp.types as t

    shoal, socket = sys.argv[1], sys.argv[2]
    params = StdioServerParameters(command=shoal, args=["mcp", "--socket", socket], env=dict(os.environ))
    statuses = asyncio.Queue()
    failed = []

    def expect(name, cond, **info):
        emit(check=name, ok=bool(cond), **info)
        if not cond:
            failed.append(name)

    # This SDK's core tables leave notifications/tasks/status out: it is
    # delivered through a binding, validated with the SDK's typed params.
    from mcp.client.extension import NotificationBinding

    async def on_status(p):
        await statuses.put((p.task_id, p.status))

    binding = NotificationBinding(method="notifications/tasks/status",
                                  params_type=t.TaskStatusNotificationParams, handler=on_status)

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, notification_bindings=[binding]) as s:
            init = await s.initialize()
            caps = init.capabilities.tasks
            expect("tasks_capability", caps is not None and caps.cancel is not None
                   and caps.list is not None and caps.requests.tools.call is not None, caps=caps)
            tools = await s.list_tools()
            ex = [x for x in tools.tools if x.name == "shoal_exec"][0]
            expect("task_support_optional", ex.execution is not None and ex.execution.task_support == "optional",
                   execution=ex.execution)

            async def start(src):
                # The SDK's send_request checks every tools/call result as a
                # CallToolResult; a task-augmented call answers a
                # CreateTaskResult, so it goes out raw and is parsed with
                # the SDK's typed model.
                req = t.CallToolRequest(params=t.CallToolRequestParams(
                    name="shoal_exec", arguments={"src": src}, task=t.TaskMetadata(ttl=60000)))
                data = req.model_dump(by_alias=True, mode="json", exclude_none=True)
                raw = await s._dispatcher.send_raw_request(data["method"], data["params"], {})
                return t.CreateTaskResult.model_validate(raw, by_name=False)

            created = await start("sh { sleep 0.3; echo from-task }")
            task_id = created.task.task_id
            expect("create_task_result", task_id.startswith("task:") and created.task.status == "working",
                   task=created.task)
            got = None
            for _ in range(200):
                got = await s.send_request(
                    t.GetTaskRequest(params=t.GetTaskRequestParams(task_id=task_id)), t.GetTaskResult)
                if got.status != "working":
                    break
                await asyncio.sleep(max(got.poll_interval or 50, 50) / 1000)
            expect("tasks_get_polled", got is not None and got.status == "completed", task=got)
            res = await s.send_request(
                t.GetTaskPayloadRequest(params=t.GetTaskPayloadRequestParams(task_id=task_id)),
                t.CallToolResult)
            sc = res.structured_content
            expect("tasks_result", not res.is_error and sc["ref"].startswith("out:")
                   and "from-task" in json.dumps(sc), sc=sc)

            second = await start("sh { sleep 30 }")
            sid = second.task.task_id
            cancelled = await s.send_request(
                t.CancelTaskRequest(params=t.CancelTaskRequestParams(task_id=sid)), t.CancelTaskResult)
            expect("tasks_cancel", cancelled.status == "cancelled", task=cancelled)
            seen = []
            try:
                while ("cancelled" not in [st for (i, st) in seen if i == sid]):
                    seen.append(await asyncio.wait_for(statuses.get(), 10))
            except asyncio.TimeoutError:
                pass
            expect("status_notifications", (task_id, "completed") in seen and (sid, "cancelled") in seen,
                   seen=seen)
            lst = await s.send_request(t.ListTasksRequest(params=None), t.ListTasksResult)
            ids = [x.task_id for x in lst.tasks]
            expect("tasks_list", task_id in ids and sid in ids, ids=ids)
            again = await s.send_request(
                t.GetTaskRequest(params=t.GetTaskRequestParams(task_id=sid)), t.GetTaskResult)
            expect("cancelled_stays", again.status == "cancelled", task=again)

            # Background through the plain tool, then shoal_cancel.
            r = await s.call_tool("shoal_exec", {"src": "sh { sleep 30 }", "background": True})
            bg = r.structured_content
            expect("background_tool", not r.is_error and bg["task"].startswith("task:")
                   and bg["events"] == "task." + bg["task"].split(":")[1], sc=bg)
            r = await s.call_tool("shoal_cancel", {"task": bg["task"]})
            expect("shoal_cancel", not r.is_error and r.structured_content["cancel_requested"] is True,
                   sc=r.structured_content)
            r = await s.call_tool("shoal_exec", {"src": "sh { sleep 1 }", "timeout_ms": 50})
            expect("timeout_tool", not r.is_error and r.structured_content.get("timed_out") is True,
                   sc=r.structured_content)
            n = task_id.split(":")[1]
            rr = await s.read_resource("shoal://task/" + n)
            rec = json.loads(rr.contents[0].text)
            expect("task_resource", rec["state"] == "completed" and rec["task"] == task_id, rec=rec)
            rr = await s.read_resource("shoal://task/" + n + "/out")
            expect("task_out_resource", "from-task" in rr.contents[0].text, text=rr.contents[0].text[:200])
            rr = await s.read_resource("shoal://jobs")
            jobs = json.loads(rr.contents[0].text)["tasks"]
            expect("jobs_resource", task_id in [j["task"] for j in jobs], jobs=jobs)
            return not failed


if __name__ == "__main__":
    try:
        from importlib.metadata import version
        emit(sdk=version("mcp"))
    except Exception:  # noqa: BLE001
        pass
    sys.exit(0 if asyncio.run(main()) else 1)

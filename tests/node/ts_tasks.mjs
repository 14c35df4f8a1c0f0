// MCP Tasks (2025-11-25) through the official TypeScript MCP SDK 1.x, as a
// client of `shoal mcp`.
//
// Usage: node ts_tasks.mjs SHOAL_BIN SOCKET WORKDIR
//
// Every answer goes through the SDK's own zod schemas (CreateTaskResult,
// GetTaskResult, CallToolResult for tasks/result, ListTasksResult,
// CancelTaskResult, TaskStatusNotification), and tool results also through
// the tool's outputSchema validator: a result that does not match throws,
// which fails the check. Prints one JSON line per check; exits 1 on the
// first failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  TaskStatusNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { join } from "node:path";

const [bin, socket, workdir] = process.argv.slice(2);

function fail(check, detail) {
  console.log(JSON.stringify({ check, ok: false, detail }));
  process.exit(1);
}

function pass(check, extra = {}) {
  console.log(JSON.stringify({ check, ok: true, ...extra }));
}

async function sdk(check, f) {
  try {
    return await f();
  } catch (e) {
    fail(check, `the SDK rejected the answer: ${e.message}`);
  }
}

const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp", "--socket", socket],
  cwd: workdir,
  env: {
    XDG_RUNTIME_DIR: join(workdir, "run"),
    XDG_STATE_HOME: join(workdir, "state"),
    XDG_CONFIG_HOME: join(workdir, "config"),
  },
  stderr: "inherit",
});
const client = new Client({ name: "shoal-ts-tasks", version: "1.0.0" });
const statuses = [];
let statusWaiter = null;
client.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
  statuses.push([n.params.taskId, n.params.status]);
  if (statusWaiter) statusWaiter();
});
await client.connect(transport);
const tasks = client.experimental.tasks;

const caps = client.getServerCapabilities();
if (!caps?.tasks?.requests?.tools?.call || !caps.tasks.cancel || !caps.tasks.list) {
  fail("tasks_capability", JSON.stringify(caps?.tasks));
}
pass("tasks_capability");

// listTools also primes the SDK's outputSchema validators and its record of
// which tools support tasks.
const tools = (await client.listTools()).tools;
const exec = tools.find((t) => t.name === "shoal_exec");
if (exec?.execution?.taskSupport !== "optional") fail("task_support_optional", JSON.stringify(exec?.execution));
pass("task_support_optional");
const validate = client.getToolOutputValidator("shoal_exec");
if (!validate) fail("output_validator", "no outputSchema validator for shoal_exec");

function checkOutput(check, result) {
  if (!result.structuredContent) fail(check, `no structuredContent: ${JSON.stringify(result)}`);
  const v = validate(result.structuredContent);
  if (!v.valid) fail(check, `structuredContent does not match the outputSchema: ${v.errorMessage}`);
}

// The SDK's own task loop: tools/call with params.task (a CreateTaskResult),
// tasks/get until terminal, then tasks/result, outputSchema-checked.
const seen = [];
let streamed;
for await (const m of tasks.callToolStream(
  { name: "shoal_exec", arguments: { src: "sh { sleep 0.3; echo from-stream }" } },
  CallToolResultSchema,
  { task: { ttl: 60000 } },
)) {
  seen.push(m.type);
  if (m.type === "error") fail("call_tool_stream", m.error.message);
  if (m.type === "result") streamed = m.result;
}
if (seen[0] !== "taskCreated" || !seen.includes("taskStatus") || !streamed) {
  fail("call_tool_stream", JSON.stringify(seen));
}
if (streamed.isError || !JSON.stringify(streamed.structuredContent).includes("from-stream")) {
  fail("call_tool_stream", JSON.stringify(streamed));
}
pass("call_tool_stream", { messages: seen });

async function start(src) {
  return await sdk("create_task_result", () =>
    client.request(
      { method: "tools/call", params: { name: "shoal_exec", arguments: { src }, task: { ttl: 60000 } } },
      CreateTaskResultSchema,
    ),
  );
}

// By hand: create, poll tasks/get, fetch tasks/result.
const created = await start("sh { sleep 0.3; echo from-task }");
const id = created.task.taskId;
if (!id.startsWith("task:") || created.task.status !== "working") fail("create_task_result", JSON.stringify(created));
pass("create_task_result", { task: id });

let got;
for (let i = 0; i < 200; i++) {
  got = await sdk("tasks_get_polled", () => tasks.getTask(id));
  if (got.status !== "working") break;
  await new Promise((r) => setTimeout(r, Math.max(got.pollInterval ?? 50, 50)));
}
if (got.status !== "completed") fail("tasks_get_polled", JSON.stringify(got));
pass("tasks_get_polled", { status: got.status });

const res = await sdk("tasks_result", () => tasks.getTaskResult(id, CallToolResultSchema));
checkOutput("tasks_result", res);
if (res.isError || !res.structuredContent.ref?.startsWith("out:") || !JSON.stringify(res.structuredContent).includes("from-task")) {
  fail("tasks_result", JSON.stringify(res));
}
pass("tasks_result", { ref: res.structuredContent.ref });

// A task that fails: status failed, its tasks/result an error result that
// still matches the outputSchema.
const bad = await start("1 / 0");
let badGot;
for (let i = 0; i < 200; i++) {
  badGot = await sdk("tasks_failed", () => tasks.getTask(bad.task.taskId));
  if (badGot.status !== "working") break;
  await new Promise((r) => setTimeout(r, 50));
}
if (badGot.status !== "failed") fail("tasks_failed", JSON.stringify(badGot));
const badRes = await sdk("tasks_failed", () => tasks.getTaskResult(bad.task.taskId, CallToolResultSchema));
checkOutput("tasks_failed", badRes);
if (!badRes.isError || !JSON.stringify(badRes.content).includes("division by zero")) fail("tasks_failed", JSON.stringify(badRes));
pass("tasks_failed", { statusMessage: badGot.statusMessage });

// A second one, cancelled with tasks/cancel.
const second = await start("sh { sleep 30 }");
const sid = second.task.taskId;
const cancelled = await sdk("tasks_cancel", () => tasks.cancelTask(sid));
if (cancelled.status !== "cancelled" || cancelled.taskId !== sid) fail("tasks_cancel", JSON.stringify(cancelled));
pass("tasks_cancel", { task: sid });
const again = await sdk("cancelled_stays", () => tasks.getTask(sid));
if (again.status !== "cancelled") fail("cancelled_stays", JSON.stringify(again));
pass("cancelled_stays");
// Cancelling a terminal task is a JSON-RPC error, not a malformed result.
try {
  await tasks.cancelTask(sid);
  fail("cancel_terminal", "no error");
} catch (e) {
  if (typeof e.code !== "number") fail("cancel_terminal", e.message);
  pass("cancel_terminal", { code: e.code });
}

// notifications/tasks/status, validated by the SDK's notification schema.
const deadline = Date.now() + 10000;
const want = () =>
  statuses.some(([t, s]) => t === id && s === "completed") &&
  statuses.some(([t, s]) => t === sid && s === "cancelled");
while (!want() && Date.now() < deadline) {
  await new Promise((r) => {
    statusWaiter = r;
    setTimeout(r, 200);
  });
}
if (!want()) fail("status_notifications", JSON.stringify(statuses));
pass("status_notifications", { seen: statuses.length });

// tasks/list, following nextCursor: more tasks than one page.
const extra = [];
for (let i = 0; i < 55; i++) extra.push((await start(`${i}`)).task.taskId);
let cursor;
let pages = 0;
const listed = [];
do {
  const page = await sdk("tasks_list", () => tasks.listTasks(cursor));
  listed.push(...page.tasks.map((t) => t.taskId));
  cursor = page.nextCursor;
  pages += 1;
} while (cursor && pages < 100);
for (const t of [id, sid, bad.task.taskId, ...extra]) {
  if (!listed.includes(t)) fail("tasks_list", `${t} not listed in ${pages} pages: ${JSON.stringify(listed)}`);
}
if (pages < 2) fail("tasks_list", `one page for ${listed.length} tasks`);
pass("tasks_list", { pages, listed: listed.length });

// An unknown task is a JSON-RPC error.
try {
  await tasks.getTask("task:999999");
  fail("unknown_task", "no error");
} catch (e) {
  if (typeof e.code !== "number") fail("unknown_task", e.message);
  pass("unknown_task", { code: e.code });
}

await client.close();
pass("tasks_done");

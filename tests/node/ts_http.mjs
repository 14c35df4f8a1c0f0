// The TypeScript SDK (1.x) as a client of the daemon's own MCP endpoint over
// Streamable HTTP (StreamableHTTPClientTransport, a bearer token in its headers):
// exec values and errors, a resource, a subscription's notification on the
// session's event stream, a task, a cancellation.
//
// Usage: node ts_http.mjs URL TOKEN
// Prints one JSON line per check; exits 1 on the first failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateTaskResultSchema,
  GetTaskResultSchema,
  CallToolResultSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [url, token] = process.argv.slice(2);

function fail(check, detail) {
  console.log(JSON.stringify({ check, ok: false, detail }));
  process.exit(1);
}

function pass(check, extra = {}) {
  console.log(JSON.stringify({ check, ok: true, ...extra }));
}

const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "shoal-ts-http", version: "1.0.0" });
await client.connect(transport);
pass("connected", { session: transport.sessionId, version: transport.protocolVersion });

let r = await client.callTool({ name: "shoal_exec", arguments: { src: "6 * 7" } });
if (r.isError || text(r) !== "42") fail("exec_value", JSON.stringify(r));
pass("exec_value");
r = await client.callTool({ name: "shoal_exec", arguments: { src: "1 / 0" } });
if (!r.isError || !text(r).includes("div_zero")) fail("exec_error", JSON.stringify(r));
pass("exec_error", { code: r.structuredContent?.code });

const res = await client.readResource({ uri: "shoal://out/1" });
if (!res.contents[0].text.includes("42")) fail("resource_read", JSON.stringify(res));
pass("resource_read");

// A subscription: the update comes on the session's GET stream.
const updated = new Promise((resolve) =>
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => resolve(n.params.uri)),
);
await client.subscribeResource({ uri: "shoal://events/user.ts" });
await client.callTool({ name: "shoal_exec", arguments: { src: 'channel("user.ts").emit(1)' } });
const uri = await Promise.race([updated, new Promise((r) => setTimeout(() => r(null), 10000))]);
if (!uri || !uri.startsWith("shoal://events/user.ts")) fail("subscription_update", String(uri));
pass("subscription_update", { uri });

// A task: created, polled, its result fetched.
const created = await client.request(
  { method: "tools/call", params: { name: "shoal_exec", arguments: { src: "sh { sleep 0.3 }; 6 * 7" }, task: { ttl: 60000 } } },
  CreateTaskResultSchema,
);
const id = created.task.taskId;
let got;
for (let i = 0; i < 400; i++) {
  got = await client.request({ method: "tasks/get", params: { taskId: id } }, GetTaskResultSchema);
  if (got.status !== "working") break;
  await new Promise((r) => setTimeout(r, 50));
}
if (got.status !== "completed") fail("task", JSON.stringify(got));
const result = await client.request({ method: "tasks/result", params: { taskId: id } }, CallToolResultSchema);
if (text(result) !== "42") fail("task", JSON.stringify(result));
pass("task", { task: id });

// A cancellation: the SDK aborts the call and tells the server; the next call runs at once.
const ac = new AbortController();
const long = client.callTool({ name: "shoal_exec", arguments: { src: "sh { sleep 30 }" } }, undefined, { signal: ac.signal });
await new Promise((r) => setTimeout(r, 500));
const t0 = Date.now();
ac.abort("test");
try {
  await long;
  fail("cancel", "the call was not cancelled");
} catch (e) {
  // aborted, as asked
}
r = await client.callTool({ name: "shoal_exec", arguments: { src: "1 + 1" } });
if (text(r) !== "2") fail("cancel", JSON.stringify(r));
pass("cancel", { ms: Date.now() - t0 });

await transport.terminateSession();
await client.close();
pass("terminated");

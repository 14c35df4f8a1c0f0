// The TypeScript client 2.x (@modelcontextprotocol/client) against
// `shoal mcp`, negotiating the era itself (`versionNegotiation: auto`):
// it must settle on 2026-07-28, list the tools and call shoal_exec (a
// value and an error result, both validated against the outputSchema).
//
// Usage: node ts2_client.mjs SHOAL_BIN SOCKET WORKDIR [auto|legacy]
// Prints one JSON line per check; exits 1 on the first failure.
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { join } from "node:path";

const [bin, socket, workdir, mode = "auto"] = process.argv.slice(2);

function fail(check, detail) {
  console.log(JSON.stringify({ check, ok: false, detail }));
  process.exit(1);
}

function pass(check, extra = {}) {
  console.log(JSON.stringify({ check, ok: true, ...extra }));
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
const options = mode === "auto" ? { versionNegotiation: { mode: "auto" } } : {};
const client = new Client({ name: "shoal-ts2-test", version: "1.0.0" }, options);
await client.connect(transport);

const version = client.getNegotiatedProtocolVersion();
const era = client.getProtocolEra();
const want = mode === "auto" ? "2026-07-28" : "2025-11-25";
if (version !== want) fail("era", { version, era });
pass("era", { version, era });

const tools = await client.listTools();
const names = tools.tools.map((t) => t.name);
if (names[0] !== "shoal_exec" || names[1] !== "shoal_get") fail("tools_listed", names);
pass("tools_listed", { n: names.length });

const r = await client.callTool({ name: "shoal_exec", arguments: { src: "6 * 7" } });
const v = r.structuredContent?.value;
if (r.isError || v?.$ !== "int" || v?.v !== 42) fail("exec_value", r);
pass("exec_value");

const e = await client.callTool({ name: "shoal_exec", arguments: { src: "1 / 0" } });
const t = e.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
if (!e.isError || !t.includes("division by zero")) fail("exec_error", e);
pass("exec_error");

await client.close();
pass("classic");

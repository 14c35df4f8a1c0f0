// shoal_cap_request asking the user through the TypeScript SDK 1.x: the
// client declares form elicitation and answers `elicitation/create`; accept
// approves the plan (shoal_apply then runs it), decline denies it. The SDK
// validates each structuredContent against the tool's outputSchema.
//
// Usage: node ts_elicit.mjs SHOAL_BIN SOCKET WORKDIR
// With SHOAL_HTTP_URL set: over the daemon's Streamable HTTP endpoint (a daemon
// already serving it, whose policy names agent:ts) instead of the shim.
// Prints one JSON line per check; exits 1 on the first failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [bin, socket, workdir] = process.argv.slice(2);

function fail(check, detail) {
  console.log(JSON.stringify({ check, ok: false, detail }));
  process.exit(1);
}

function pass(check, extra = {}) {
  console.log(JSON.stringify({ check, ok: true, ...extra }));
}

const env = {
  XDG_RUNTIME_DIR: join(workdir, "run"),
  XDG_STATE_HOME: join(workdir, "state"),
  XDG_CONFIG_HOME: join(workdir, "config"),
  HOME: workdir,
  PATH: process.env.PATH,
};
const out = join(workdir, "w");
mkdirSync(out, { recursive: true });
mkdirSync(join(workdir, "config", "shoal"), { recursive: true });
writeFileSync(
  join(workdir, "config", "shoal", "shoal.toml"),
  `[policy.principal."agent:ts"]\nopaque = "ask"\nauto_apply = "in-grant"\napprove_via = ["elicitation", "cli"]\n\n[policy.principal."agent:ts".fs]\nread = ["/**"]\nwrite = ["${out}/**"]\n`,
);
const token = execFileSync(bin, ["token", "create", "agent:ts"], { env }).toString().trim().split("\n").pop();

let answer = "accept";
const asked = [];
const http = process.env.SHOAL_HTTP_URL;
const transport = http
  ? new StreamableHTTPClientTransport(new URL(`${http}?session=ts-elicit`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    })
  : new StdioClientTransport({
      command: bin,
      args: ["mcp", "--socket", socket, "--session", "ts-elicit"],
      cwd: workdir,
      env: { ...env, SHOAL_TOKEN: token },
      stderr: "inherit",
    });
const client = new Client(
  { name: "shoal-ts-elicit", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params.message);
  if (answer === "accept") return { action: "accept", content: { approve: true } };
  return { action: "decline" };
});
await client.connect(transport);

async function round(name) {
  answer = name;
  asked.length = 0;
  const file = join(out, `${name}.txt`);
  const p = await client.callTool({ name: "shoal_plan", arguments: { src: `sh { echo ${name} > ${file} }` } });
  const ref = p.structuredContent.plan_ref;
  const g = (await client.callTool({ name: "shoal_cap_request", arguments: { plan_ref: ref } })).structuredContent;
  const a = await client.callTool({ name: "shoal_apply", arguments: { plan_ref: ref } });
  const wasAsked = asked.length === 1 && asked[0].includes(ref);
  const ok =
    name === "accept"
      ? g.grant === "approved" && wasAsked && !a.isError && existsSync(file)
      : g.grant === "denied" && wasAsked && a.isError && a.structuredContent.code === -32010 && !existsSync(file);
  if (!ok) fail(`ts_${name}`, { grant: g, apply: a.structuredContent, asked });
  pass(`ts_${name}`, { grant: g.grant });
}

await round("accept");
await round("decline");
await client.close();

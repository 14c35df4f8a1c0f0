// The official TypeScript MCP SDK (1.x) as a client of `shoal mcp`.
//
// Usage: node ts_client.mjs SHOAL_BIN SOCKET WORKDIR
//
// The SDK validates every structuredContent against the tool's
// outputSchema, error results included, and throws when one does not match:
// so each call below that returns at all has passed that check. Every tool
// gets a valid call, an invalid-argument call and a kernel error; the
// message (and hint, where there is one) must be visible in the text.
// Prints one JSON line per check; exits 1 on the first failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const [bin, socket, workdir] = process.argv.slice(2);

function fail(check, detail) {
  console.log(JSON.stringify({ check, ok: false, detail }));
  process.exit(1);
}

function pass(check, extra = {}) {
  console.log(JSON.stringify({ check, ok: true, ...extra }));
}

function text(result) {
  return result.content
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

// The environment the SDK gives a server (HOME PATH SHELL TERM ...) plus
// what a user configures for it, as `claude mcp add -e` would.
const transport = new StdioClientTransport({
  command: bin,
  args: ["mcp", "--socket", socket],
  cwd: workdir,
  env: {
    XDG_RUNTIME_DIR: join(workdir, "run"),
    XDG_STATE_HOME: join(workdir, "state"),
    XDG_CONFIG_HOME: join(workdir, "config"),
    SHOAL_TS_PROBE: "from-the-client",
  },
  stderr: "inherit",
});
const client = new Client({ name: "shoal-ts-test", version: "1.0.0" });
await client.connect(transport);

const tools = (await client.listTools()).tools;
const names = tools.map((t) => t.name).sort();
for (const t of tools) {
  if (!t.outputSchema) fail("tools_list", `${t.name} has no outputSchema`);
}
pass("tools_list", { tools: names });

async function call(name, args) {
  try {
    return await client.callTool({ name, arguments: args });
  } catch (e) {
    fail(`${name}:${JSON.stringify(args)}`, `the SDK rejected the result: ${e.message}`);
  }
}

async function expectOk(check, name, args, want) {
  const r = await call(name, args);
  if (r.isError) fail(check, `unexpected error: ${text(r)}`);
  if (want && !text(r).includes(want)) fail(check, `text lacks ${JSON.stringify(want)}: ${text(r)}`);
  pass(check);
  return r;
}

async function expectError(check, name, args, wants) {
  const r = await call(name, args);
  if (!r.isError) fail(check, `expected an error result, got ${text(r)}`);
  if (typeof r.structuredContent?.code !== "number") {
    fail(check, `structuredContent lacks code: ${JSON.stringify(r.structuredContent)}`);
  }
  for (const w of wants) {
    if (!text(r).includes(w)) fail(check, `text lacks ${JSON.stringify(w)}: ${text(r)}`);
  }
  pass(check, { code: r.structuredContent.code });
  return r;
}

// shoal_exec
await expectOk("exec_valid", "shoal_exec", { src: "6 * 7" }, "42");
await expectError("exec_invalid_args", "shoal_exec", {}, ["invalid arguments", "src"]);
await expectError("exec_invalid_type", "shoal_exec", { src: 5, bogus: true }, ["invalid arguments"]);
await expectError("exec_kernel_error", "shoal_exec", { src: "1 / 0" }, ["division by zero", "div_zero"]);
await expectError("exec_parse_error_hint", "shoal_exec", { src: "ls | grep x" }, ["hint:"]);
await expectError("exec_cmd_failed", "shoal_exec", { src: "^false", position: "stmt" }, ["status: 1"]);
// The client's own environment reaches the session it created.
await expectOk("exec_client_env", "shoal_exec", { src: "env.SHOAL_TS_PROBE" }, "from-the-client");
// Reading a UTF-8 file shows its text.
writeFileSync(join(workdir, "notes.md"), "# Notes\nremember the milk\n");
await expectOk("exec_cat_text", "shoal_exec", { src: "cat notes.md" }, "remember the milk");

// shoal_get
await expectOk("get_valid", "shoal_get", { ref: "out:1" }, "42");
await expectError("get_invalid_args", "shoal_get", { ref: 7 }, ["invalid arguments"]);
await expectError("get_kernel_error", "shoal_get", { ref: "out:999999" }, ["unknown value ref"]);

// shoal_journal
if (names.includes("shoal_journal")) {
  await expectOk("journal_valid", "shoal_journal", { limit: 2 });
  await expectError("journal_invalid_args", "shoal_journal", { limit: "x" }, ["invalid arguments"]);
  await expectError("journal_kernel_error", "shoal_journal", { since: 10, until: 5 }, ["since (10) is after until (5)"]);
}

// An unknown tool is a JSON-RPC error, which the SDK surfaces as a throw.
try {
  await client.callTool({ name: "shoal_nope", arguments: {} });
  fail("unknown_tool", "no error");
} catch (e) {
  pass("unknown_tool", { message: e.message });
}

// The language card, as a prompt and as a resource.
const prompts = (await client.listPrompts()).prompts.map((p) => p.name);
if (!prompts.includes("shoal_language")) fail("prompts_list", JSON.stringify(prompts));
const card = await client.getPrompt({ name: "shoal_language" });
const cardText = card.messages[0].content.text;
if (!cardText.includes("Shoal")) fail("prompt_card", cardText.slice(0, 200));
const res = await client.readResource({ uri: "shoal://docs/language" });
if (res.contents[0].text !== cardText) fail("resource_card", "resource and prompt differ");
pass("language_card", { bytes: cardText.length });

// Resource errors are the kernel's own.
try {
  await client.readResource({ uri: "shoal://out/999999" });
  fail("resource_error", "no error");
} catch (e) {
  if (e.code !== -32004) fail("resource_error", `code ${e.code}: ${e.message}`);
  pass("resource_error", { code: e.code });
}

// Pagination: follow nextCursor until it ends.
let cursor;
let pages = 0;
let listed = 0;
do {
  const page = await client.listResources(cursor ? { cursor } : {});
  listed += page.resources.length;
  cursor = page.nextCursor;
  pages += 1;
} while (cursor && pages < 100);
pass("resources_paginated", { pages, listed });

// Completion of a template argument.
const comp = await client.complete({
  ref: { type: "ref/resource", uri: "shoal://out/{n}{?path,slice,format}" },
  argument: { name: "n", value: "1" },
});
if (!comp.completion.values.includes("1")) fail("completion", JSON.stringify(comp));
pass("completion", { values: comp.completion.values.length });

await client.close();
pass("classic");

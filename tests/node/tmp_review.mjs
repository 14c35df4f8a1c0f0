import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
const bin = process.argv[2];
const t = new StdioClientTransport({ command: bin, args: ["mcp"], env: process.env });
const c = new Client({ name: "review", version: "1" });
await c.connect(t);
const calls = [
  ["shoal_exec", { src: "cd /var/tmp/uc64; ^sh -c 'echo bad >&2; exit 3'" }],
  ["shoal_exec", { src: "[1,2].map(|x| x)" }],
  ["shoal_exec", { src: 7 }],
  ["shoal_plan", { src: "rm a.txt" }],
  ["shoal_journal", { limit: 2 }],
  ["shoal_pty_open", { cmd: "python3", args: ["-q"] }],
  ["shoal_pty_read", { pty_id: "pty:1", wait_for: ">>>", timeout_ms: 10000 }],
  ["shoal_pty_read", { pty_id: "pty:99" }],
  ["shoal_pty_list", {}],
  ["shoal_pty_close", { pty_id: "pty:1" }],
  ["shoal_get", { ref: "out:1", path: "[0]" }],
];
for (const [name, args] of calls) {
  try {
    const r = await c.callTool({ name, arguments: args });
    console.log(`## ${name} isError=${r.isError}\n${r.content[0].text}\n`);
  } catch (e) { console.log(`## ${name} THREW ${e}`); }
}
await c.close();

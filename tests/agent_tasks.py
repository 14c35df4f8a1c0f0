#!/usr/bin/env python3
"""Agent tasks through the official Python MCP SDK and the `shoal mcp` shim,
judged by the text the model sees (the text items of each CallToolResult,
never structuredContent), as a harness that shows the model only text would.

Each task is what an agent does on a real repository: orient, search, read
and page, edit and verify, run a background job, drive a REPL and an editor
on a PTY, and make the usual mistakes. Each prints one JSON line
{"check": name, "ok": bool, "bytes": text bytes the model read, "calls":
tool calls made, "why": what was missing}; a final line {"total": ...} sums
them. `make bench` runs the same tasks and reports bytes and calls.

Usage: agent_tasks.py SHOAL_BIN SOCKET WORKDIR
"""
import asyncio
import json
import os
import re
import subprocess
import sys


def emit(**kv):
    print(json.dumps(kv, default=str), flush=True)


def f(obj, *names):
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    raise AttributeError(names)


SUBJECT = "Teach the parser to keep every byte of a long commit subject, however wide the table gets, x" + "y" * 10
LONG_NAME = "a_file_whose_name_is_long_enough_to_be_cut_by_any_eighty_column_table_renderer_" + "z" * 40 + ".txt"


def git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(work):
    repo = os.path.join(work, "repo")
    os.makedirs(os.path.join(repo, "src"), exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "agent@example.com")
    git(repo, "config", "user.name", "Agent")
    with open(os.path.join(repo, "src", "main.py"), "w") as fh:
        fh.write("def main():\n    # TODO: greet by name\n    print('hello')\n\nmain()\n")
    with open(os.path.join(repo, "src", "util.py"), "w") as fh:
        fh.write("def add(a, b):\n    return a + b\n")
    with open(os.path.join(repo, "Makefile"), "w") as fh:
        fh.write("all:\n\t@echo built\n")
    with open(os.path.join(repo, "big.log"), "w") as fh:
        for i in range(1, 5001):
            fh.write(f"line {i} of the build log: compiling unit {i}\n")
        fh.write("error: the last line is where the failure is\n")
    with open(os.path.join(repo, LONG_NAME), "w") as fh:
        fh.write("x\n")
    with open(os.path.join(repo, "notes.txt"), "w") as fh:
        fh.write("draft\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Initial import")
    for i in range(1, 6):
        with open(os.path.join(repo, "src", "util.py"), "a") as fh:
            fh.write(f"# change {i}\n")
        git(repo, "commit", "-q", "-am", f"{SUBJECT} {i}")
    return repo


class Agent:
    """One MCP session; counts the calls and the text bytes the model reads."""

    def __init__(self, session):
        self.s = session
        self.calls = 0
        self.bytes = 0
        self.links = []

    async def tool(self, name, **args):
        r = await self.s.call_tool(name, args)
        self.calls += 1
        text = "\n".join(c.text for c in r.content if getattr(c, "type", "") == "text")
        self.bytes += len(text.encode())
        self.links = [str(c.name) for c in r.content if getattr(c, "type", "") == "resource_link"]
        return text, bool(f(r, "is_error", "isError"))

    async def exec(self, src, **extra):
        return await self.tool("shoal_exec", src=src, **extra)


class Tasks:
    def __init__(self, agent, repo):
        self.a = agent
        self.repo = repo
        self.results = []

    async def run(self, name, fn):
        c0, b0 = self.a.calls, self.a.bytes
        why = None
        try:
            why = await asyncio.wait_for(fn(), 60)
        except Exception as e:  # noqa: BLE001 - a task that raised failed
            why = f"{type(e).__name__}: {e}"
        calls, nbytes = self.a.calls - c0, self.a.bytes - b0
        self.results.append((name, why is None, nbytes, calls))
        emit(check=name, ok=why is None, bytes=nbytes, calls=calls, why=why)

    # Orient in the repository.
    async def orient_ls(self):
        t, _ = await self.a.exec("ls")
        for want in ("src", "Makefile", "big.log", LONG_NAME):
            if want not in t:
                return f"ls text lacks {want!r}: {t[:400]}"

    async def orient_status_clean(self):
        t, _ = await self.a.exec("git status")
        if "main" not in t:
            return f"a clean git status does not name the branch: {t[:300]}"

    async def orient_log_oneline(self):
        t, _ = await self.a.exec("git log --oneline -5")
        lines = [l for l in t.splitlines() if SUBJECT[:40] in l]
        if len(lines) < 5 or not all(f"{SUBJECT} " in l for l in lines):
            return f"git log --oneline -5 is not git's text with whole subjects: {t[:500]}"
        if not re.match(r"^[0-9a-f]{7,} ", lines[0]):
            return f"--oneline lines do not start with a short hash: {lines[0]!r}"

    async def orient_log_typed(self):
        t, _ = await self.a.exec("git log -3")
        if SUBJECT not in t:
            return f"typed git log cuts the subject: {t[:500]}"
        if "^git" not in t:
            return f"a typed result does not name its raw form (^git ...): {t[-300:]}"

    # Search and read.
    async def search_grep(self):
        t, _ = await self.a.exec("grep -rn TODO src")
        if "src/main.py" not in t or "greet by name" not in t:
            return f"grep text lacks the match: {t[:300]}"

    async def read_file(self):
        t, _ = await self.a.exec("cat src/util.py")
        if "return a + b" not in t:
            return f"cat text lacks the file: {t[:300]}"

    async def read_head_tail_agree(self):
        h, _ = await self.a.exec("head -n 2 src/util.py")
        t, _ = await self.a.exec("tail -n 2 src/util.py")
        if "def add(a, b):" not in h or '"' in h.splitlines()[0]:
            return f"head -n gives quoted lines, not the file's text: {h[:200]}"
        if "# change 5" not in t:
            return f"tail -n lacks the last line: {t[:200]}"

    async def read_big_file_paged(self):
        t, _ = await self.a.exec("cat big.log")
        if len(t.encode()) > 16 * 1024:
            return f"a 5000-line file put {len(t.encode())} bytes in context"
        if "error: the last line is where the failure is" not in t:
            return "the end of the big file (where the error is) is not in the text"
        m = re.search(r'shoal_get (\{.*?"lines":\s*\[\d+,\s*\d+\]\})', t)
        if not m:
            return f"the footer names no call for the elided lines: {t[-400:]}"
        args = json.loads(m.group(1))
        a, b = args["lines"]
        lo, hi = a, min(b, a + 2)
        args["lines"] = [lo, hi]
        page, err = await self.a.tool("shoal_get", **args)
        want = [f"line {i} of the build log" for i in range(lo, hi + 1)]
        if err or not all(w in page for w in want) or f"line {hi + 1} of" in page:
            return f"shoal_get lines [{lo}, {hi}] did not return exactly those lines: {page[:300]}"

    async def big_output_max_bytes(self):
        t, _ = await self.a.exec("seq 1 200000", elide={"max_bytes": 2000})
        if len(t.encode()) > 2600:
            return f"elide.max_bytes 2000 gave {len(t.encode())} bytes of text"
        if "200000" not in t:
            return "the tail of the output is not in the bounded text"

    async def get_default_render(self):
        t, _ = await self.a.exec("[1, 2, 3].len()")
        m = re.search(r"out:(\d+)", " ".join([t, *self.a.links]))
        if m is None:
            return f"no out:N in the result to fetch: {t[:200]}"
        ref = m.group(0)
        g, _ = await self.a.tool("shoal_get", ref=ref)
        if g.strip() != "3":
            return f"shoal_get {ref} does not default to the render: {g[:200]}"

    # Edit and verify.
    async def edit_and_diff(self):
        t, err = await self.a.exec('"def sub(a, b):\\n    return a - b\\n".append("src/util.py")')
        if err:
            return f"appending to a file failed: {t[:300]}"
        d, _ = await self.a.exec("git diff")
        if "@@" not in d or "+def sub(a, b):" not in d:
            return f"git diff does not show the patch: {d[:500]}"

    async def diff_stat_raw(self):
        d, _ = await self.a.exec("git diff --stat")
        if "src/util.py" not in d or "insertion" not in d:
            return f"git diff --stat is not git's text: {d[:300]}"

    async def log_patch(self):
        d, _ = await self.a.exec("git log -p -1")
        if "@@" not in d or "+# change 5" not in d:
            return f"git log -p lost its patch: {d[:500]}"

    async def write_file(self):
        t, err = await self.a.exec('"first\\nsecond\\n".save("notes.txt")')
        body = open(os.path.join(self.repo, "notes.txt")).read()
        if err or body != "first\nsecond\n":
            return f".save did not write the file ({body!r}): {t[:200]}"

    async def brace_in_string_hint(self):
        t, _ = await self.a.exec('"fn main() { }".len()')
        if "unterminated" in t and "'" not in t and "raw" not in t:
            return f"the {{ error teaches no raw string: {t[:300]}"

    # Failures the model must not miss.
    async def fail_make(self):
        t, _ = await self.a.exec("make nosuchtarget")
        first = t.splitlines()[0] if t else ""
        if not first.startswith("exit status 2"):
            return f"a failing make does not say so first: {t[:300]}"
        if "--- stderr" not in t or "nosuchtarget" not in t:
            return f"make's stderr is not in the text: {t[:400]}"

    async def fail_checkout(self):
        t, _ = await self.a.exec("git checkout nosuch")
        if not t.startswith("exit status") or "nosuch" not in t:
            return f"git checkout nosuch does not say it failed and why: {t[:300]}"

    async def fail_grep_no_match(self):
        t, _ = await self.a.exec("grep -rn NOTHERE src")
        if not t.startswith("exit status 1"):
            return f"grep without a match does not say exit status 1: {t[:300]}"

    async def fail_script_exit(self):
        t, _ = await self.a.exec("sh { echo partial; exit 3 }")
        if not t.startswith("exit status 3") or "partial" not in t:
            return f"a script exiting 3 is not visible: {t[:300]}"

    async def success_stderr(self):
        t, _ = await self.a.exec("sh { echo out; echo warning: deprecated >&2 }")
        if "out" not in t or "--- stderr" not in t or "warning: deprecated" not in t:
            return f"a successful command's stderr is not in the text: {t[:300]}"
        if t.startswith("exit status"):
            return "a successful command is reported as failed"

    # Background work.
    async def background_job(self):
        t, _ = await self.a.exec("sh { echo started; sleep 0.2; echo finished } &")
        m = re.search(r"task:(\d+)", t)
        if not m:
            return f"`cmd &` gave no task: {t[:300]}"
        ref = m.group(0)
        # One call waits for it, one reads its state and output.
        await self.a.exec(f"task({m.group(1)}).await()")
        g, err = await self.a.tool("shoal_get", ref=ref)
        if err or "finished" not in g or not re.search(r"\b(completed|done|succeeded)\b", g):
            return f"shoal_get {ref} does not show the finished task: {g[:300]}"
        j, _ = await self.a.exec("jobs")
        row = [l for l in j.splitlines() if "echo started" in l]
        if not row or not re.match(rf"^\s*(task:)?{m.group(1)}\b", row[0]):
            return f"jobs does not list {ref}: {j[:300]}"

    # Plans and undo.
    async def rm_trash_path(self):
        open(os.path.join(self.repo, "scratch.txt"), "w").write("x\n")
        t, _ = await self.a.exec("rm scratch.txt")
        if "…" in t or "trash" not in t.lower():
            return f"rm's trash path (the way to undo) is cut or missing: {t[:300]}"

    async def plan_permanent_is_irreversible(self):
        open(os.path.join(self.repo, "gone.txt"), "w").write("x\n")
        t, _ = await self.a.tool("shoal_plan", src="rm --permanent gone.txt")
        low = t.lower()
        if "irreversible" not in low:
            return f"the plan of rm --permanent does not say irreversible: {t[:400]}"

    # Mistakes and suggestions.
    async def unknown_method_hint(self):
        t, _ = await self.a.exec('"a,b".splitt(",")')
        if "did you mean" not in t or ".split" not in t.split("splitt", 1)[-1]:
            return f"an unknown method does not suggest the nearest: {t[:300]}"

    async def bare_number_ref_hint(self):
        t, _ = await self.a.tool("shoal_get", ref="1")
        if "out:1" not in t:
            return f"a bare number as ref does not suggest out:1: {t[:300]}"

    async def pipe_hint(self):
        t, _ = await self.a.exec("cat src/main.py | grep print")
        if "sh {" not in t:
            return f"the | hint does not name sh {{ … }}: {t[:300]}"

    # A REPL and an editor on a PTY.
    async def pty_python_repl(self):
        t, err = await self.a.tool("shoal_pty_open", cmd="python3", args=["-q"])
        m = re.search(r"pty:\d+", t)
        if err or not m:
            return f"pty open failed: {t[:300]}"
        pid = m.group(0)
        await self.a.tool("shoal_pty_read", pty_id=pid, wait_for=">>>")
        await self.a.tool("shoal_pty_send", pty_id=pid, input="6 * 7\n")
        s, _ = await self.a.tool("shoal_pty_read", pty_id=pid, wait_for="42")
        await self.a.tool("shoal_pty_close", pty_id=pid)
        if "42" not in s:
            return f"the REPL answer is not on the screen: {s[:300]}"

    async def pty_vim_edit(self):
        path = os.path.join(self.repo, "edited.txt")
        t, err = await self.a.tool("shoal_pty_open", cmd="vim", args=["-Nu", "NONE", "-n", "edited.txt"])
        m = re.search(r"pty:\d+", t)
        if err or not m:
            return f"pty open failed: {t[:300]}"
        pid = m.group(0)
        await self.a.tool("shoal_pty_read", pty_id=pid, wait_for="edited.txt")
        await self.a.tool("shoal_pty_send", pty_id=pid, input=["ihello from vim", {"key": "Escape"}, ":wq", {"key": "Enter"}])
        await self.a.tool("shoal_pty_read", pty_id=pid, wait_for="re:.", timeout_ms=2000)
        for _ in range(100):
            if os.path.exists(path):
                break
            await asyncio.sleep(0.05)
        await self.a.tool("shoal_pty_close", pty_id=pid)
        if not os.path.exists(path) or "hello from vim" not in open(path).read():
            return "vim did not write the file"


TASKS = [
    "orient_ls", "orient_status_clean", "orient_log_oneline", "orient_log_typed",
    "search_grep", "read_file", "read_head_tail_agree", "read_big_file_paged",
    "big_output_max_bytes", "get_default_render", "edit_and_diff", "diff_stat_raw",
    "log_patch", "write_file", "brace_in_string_hint", "fail_make", "fail_checkout",
    "fail_grep_no_match", "fail_script_exit", "success_stderr", "background_job",
    "rm_trash_path", "plan_permanent_is_irreversible", "unknown_method_hint",
    "bare_number_ref_hint", "pipe_hint", "pty_python_repl", "pty_vim_edit",
]


async def main():
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    shoal, socket, work = sys.argv[1], sys.argv[2], sys.argv[3]
    only = sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] else None
    repo = make_repo(work)
    params = StdioServerParameters(
        command=shoal,
        args=["mcp", "--socket", socket, "--session", "agent-tasks"],
        env=dict(os.environ),
        cwd=repo,
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            agent = Agent(session)
            tasks = Tasks(agent, repo)
            for name in TASKS:
                if only is None or name in only:
                    await tasks.run(name, getattr(tasks, name))
    ok = sum(1 for r in tasks.results if r[1])
    emit(total=len(tasks.results), passed=ok, bytes=agent.bytes, calls=agent.calls)
    return 0 if ok == len(tasks.results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

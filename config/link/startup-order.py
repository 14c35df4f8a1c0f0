#!/usr/bin/env python3
"""Regenerate config/link/startup.order (`make startup-order`).

Runs each given `shoal` binary as a daemon under valgrind's callgrind, three
times on private XDG dirs:

  1. a first start on an empty state dir, one connection opened and closed
     unused (a readiness probe), then 2 s idle, then SIGTERM;
  2. a restart on the journal that run left, the same probe, idle, SIGTERM;
  3. a start, then a few kernel and MCP round trips (attach, `exec`,
     `initialize`, `tools/list`, `shoal_exec`), SIGTERM.

and writes the mangled names of the binary's functions that ran: those of
runs 1 and 2 first (everything the daemon touches to start and to sit idle),
then the ones only run 3 added (the hot path), each group in the order
callgrind first saw them. lld lays `.text` out in that order
(`--symbol-ordering-file`, build.rs), so the start-up and idle working set
is one contiguous MB instead of pages scattered over the whole text.

Symbol names depend on the crate's build hash, which differs between cargo
profiles: give the `release` binary and the `bench` one (what `cargo bench`
runs) and the file serves both; lld skips the names a build does not have.

usage: startup-order.py BINARY...
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "config", "link", "startup.order")


def functions(cg_out, binary):
    """The binary's functions in a callgrind profile, in first-seen order."""
    obnames, names, seen, order, picked = {}, {}, set(), [], set()
    ob = None
    pat = re.compile(r"^(c?)(ob|fn)=\((\d+)\)(?: (.*))?$")
    with open(cg_out, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = pat.match(line.rstrip("\n"))
            if not m:
                continue
            callee, kind, ident, name = m.groups()
            if kind == "ob":
                if name:
                    obnames[ident] = name
                if not callee:
                    ob = ident
                continue
            if name:
                names[ident] = name
            if callee or (ob, ident) in seen:
                continue
            seen.add((ob, ident))
            if obnames.get(ob) == binary:
                # callgrind marks recursion levels as `name'2`.
                n = re.sub(r"'\d+$", "", names.get(ident, ""))
                if n and not n.startswith("0x") and n not in picked:
                    picked.add(n)
                    order.append(n)
    return order


def wait_for(path, proc, secs=300):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            sys.exit(f"the daemon exited ({proc.returncode}) before its socket appeared")
        time.sleep(0.1)
    sys.exit(f"no socket at {path} after {secs} s")


def round_trips(sock_path):
    def call(f, r, frame):
        f.write((json.dumps(frame) + "\n").encode())
        f.flush()
        return r.readline()

    for frames in (
        [
            {"jsonrpc": "2.0", "id": 0, "method": "session.attach", "params": {"session": "p"}},
            {"jsonrpc": "2.0", "id": 1, "method": "exec", "params": {"src": "null"}},
            {"jsonrpc": "2.0", "id": 2, "method": "exec", "params": {"src": "6 * 7"}},
        ],
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "order", "version": "0"}}},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
             "params": {"name": "shoal_exec", "arguments": {"src": "6 * 7"}}},
        ],
    ):
        s = socket.socket(socket.AF_UNIX)
        s.connect(sock_path)
        w, r = s.makefile("wb"), s.makefile("rb")
        for _ in range(3):
            for fr in frames:
                call(w, r, fr)
        s.close()


def profile(binary, home, out, requests):
    env = dict(os.environ)
    for k in ("run", "data", "state", "config"):
        os.makedirs(os.path.join(home, k), mode=0o700, exist_ok=True)
    env.update(
        XDG_RUNTIME_DIR=os.path.join(home, "run"),
        XDG_DATA_HOME=os.path.join(home, "data"),
        XDG_STATE_HOME=os.path.join(home, "state"),
        XDG_CONFIG_HOME=os.path.join(home, "config"),
    )
    env.pop("SHOAL_LOG", None)
    sock = os.path.join(home, "run", "shoal", "shoal.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=no",
         "--callgrind-out-file=" + out, binary, "daemon"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(sock, proc)
        # What a client's readiness probe does: connect, then close unused.
        socket.socket(socket.AF_UNIX).connect(sock)
        if requests:
            round_trips(sock)
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed")
    startup, hot = [], []
    tmp = tempfile.mkdtemp(prefix="shoal-order.")
    try:
        for b, binary in enumerate(os.path.realpath(a) for a in sys.argv[1:]):
            home = os.path.join(tmp, f"home{b}")
            for i, requests in enumerate((False, False, True)):
                out = os.path.join(tmp, f"cg.{b}.{i}")
                profile(binary, home, out, requests)
                names = functions(out, binary)
                (hot if requests else startup).extend(names)
                print(f"{binary} run {i + 1}: {len(names)} functions", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seen, lines = set(), []
    for n in startup + hot:
        if n not in seen:
            seen.add(n)
            lines.append(n)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{OUT}: {len(lines)} symbols", file=sys.stderr)


if __name__ == "__main__":
    main()

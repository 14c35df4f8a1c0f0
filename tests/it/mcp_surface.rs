//! The MCP surface and values on the wire, with raw frames:
//! scenario items 11–13, 21–28, 33–39 and 40–45,
//! resources, subscriptions, cancellation and progress.

use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

/// An MCP connection that keeps notifications aside.
struct Mcp {
    c: Conn,
    next: u64,
    notes: Vec<Value>,
}

impl Mcp {
    fn open(d: &Daemon, session: &str) -> Mcp {
        let mut c = d.conn();
        c.send(
            &json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {"session": session}}),
        );
        let mut m = Mcp {
            c,
            next: 0,
            notes: Vec::new(),
        };
        let r = m.ok("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
        assert_eq!(r["capabilities"]["resources"]["subscribe"], json!(true));
        m.c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }
    fn send_req(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let id = self.next;
        self.c
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }
    fn wait_id(&mut self, id: u64) -> Value {
        loop {
            let f = self.c.recv();
            if f.get("id") == Some(&json!(id)) {
                return f;
            }
            assert!(f.get("method").is_some(), "unexpected frame {f}");
            self.notes.push(f);
        }
    }
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_req(method, params);
        self.wait_id(id)
    }
    fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }
    fn tool(&mut self, name: &str, args: Value) -> Value {
        self.ok("tools/call", json!({"name": name, "arguments": args}))
    }
    fn exec(&mut self, src: &str) -> Value {
        let r = self.tool("shoal_exec", json!({"src": src}));
        assert_eq!(r["isError"], json!(false), "{src}: {r}");
        r["structuredContent"].clone()
    }
    /// `shoal_get`, as the tagged JSON unless `format` or `lines` is given
    /// (its default, the render, is tested in tests/it/big_output.rs).
    fn get(&mut self, mut args: Value) -> Value {
        if args.get("format").is_none() && args.get("lines").is_none() {
            args["format"] = json!("json");
        }
        self.tool("shoal_get", args)
    }
    fn read(&mut self, uri: &str) -> Value {
        self.ok("resources/read", json!({"uri": uri}))
    }
}

/// The detailed output schema of `tool` (what every result keeps; the
/// listing advertises only that results are objects).
fn output_validator(_m: &mut Mcp, tool: &str) -> jsonschema::Validator {
    let caps = shoal_proto::mcp::Caps {
        journal: true,
        events: true,
    };
    let tools = shoal_proto::mcp::tools_detailed(caps);
    let t = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == tool)
        .unwrap_or_else(|| panic!("{tool} has a detailed schema"))
        .clone();
    jsonschema::validator_for(&t["outputSchema"]).unwrap()
}

#[test]
fn tools_list_is_small_and_complete() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "t");
    let r = m.ok("tools/list", json!({}));
    let size = serde_json::to_vec(&r).unwrap().len();
    // 8 KiB for all 13 tools with every input schema (docs/protocol.md §9).
    assert!(size <= 8 * 1024, "tools/list is {size} bytes");
    for t in r["tools"].as_array().unwrap() {
        assert!(jsonschema::meta::is_valid(&t["inputSchema"]), "{t}");
        assert!(jsonschema::meta::is_valid(&t["outputSchema"]), "{t}");
        assert_eq!(t["inputSchema"]["type"], json!("object"));
    }
    // Unknown tool: JSON-RPC error; unadvertised capabilities are not tools.
    for name in ["nope", "shoal_fork"] {
        let e = m.call("tools/call", json!({"name": name, "arguments": {}}));
        assert_eq!(e["error"]["code"], json!(-32602), "{name}: {e}");
    }
}

#[test]
fn exec_values_positions_and_errors() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "t");
    let ov = output_validator(&mut m, "shoal_exec");
    // 21, 22: small values inline, refs count from 1.
    let sc = m.exec("1 + 2");
    assert!(ov.is_valid(&sc), "{sc}");
    assert_eq!(sc["value"], json!({"$": "int", "v": 3}));
    assert_eq!(sc["ref"], json!("out:1"));
    // 23
    let sc = m.exec("[1,2,3]");
    assert_eq!(sc["value"]["$"], json!("list"));
    assert_eq!(sc["value"]["v"].as_array().unwrap().len(), 3);
    // 24: value position (MCP default) vs stmt.
    let sc = m.exec("sh { exit 7 }");
    assert_eq!(sc["value"]["$"], json!("outcome"));
    assert_eq!(sc["value"]["ok"], json!(false));
    assert_eq!(sc["value"]["status"], json!(7));
    let r = m.tool(
        "shoal_exec",
        json!({"src": "sh { exit 5 }", "position": "stmt"}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    let e = &r["structuredContent"];
    assert_eq!(e["code"], json!(-32002));
    // 26: the raised error is stored and linked.
    let eref = e["data"]["ref"].as_str().unwrap().to_string();
    let link = &r["content"][1];
    assert_eq!(link["type"], json!("resource_link"), "{r}");
    assert_eq!(link["uri"], e["data"]["uri"]);
    assert_eq!(link["mimeType"], json!("application/json"));
    assert!(link["name"].is_string());
    let g = m.get(json!({"ref": eref}));
    assert_eq!(g["structuredContent"]["value"]["$"], json!("error"), "{g}");
    // 25
    let sc = m.exec("let x = 10\nx + 5");
    assert_eq!(sc["value"], json!({"$": "int", "v": 15}));
    let sc = m.exec("let a = 1\nsh { exit 4 }");
    assert_eq!(sc["value"]["status"], json!(4));
    // 27: outcome paths.
    let sc = m.exec("sh { echo hello world }");
    let r = sc["ref"].as_str().unwrap().to_string();
    let g = m.get(json!({"ref": r, "path": "out"}));
    assert_eq!(
        g["structuredContent"]["value"],
        json!({"$": "str", "v": "hello world"})
    );
    let g = m.get(json!({"ref": r, "path": "ok"}));
    assert_eq!(
        g["structuredContent"]["value"],
        json!({"$": "bool", "v": true})
    );
    let g = m.get(json!({"ref": r, "path": "nope"}));
    assert_eq!(g["isError"], json!(true));
    assert_eq!(g["structuredContent"]["code"], json!(-32005), "{g}");
    // 28: no ANSI for a non-tty client.
    let sc = m.exec("[{a: 1, b: \"x\"}]");
    assert!(!sc["render"].as_str().unwrap().contains('\x1b'));
    // Invalid arguments: isError with paths.
    let r = m.tool("shoal_exec", json!({"src": 1, "position": "sideways"}));
    assert_eq!(r["isError"], json!(true));
    let errs = r["structuredContent"]["data"]["errors"].as_array().unwrap();
    assert!(errs.iter().any(|e| e["path"] == json!("/src")), "{errs:?}");
    assert!(
        errs.iter().any(|e| e["path"] == json!("/position")),
        "{errs:?}"
    );
    // A parse error is a tool error too.
    let r = m.tool("shoal_exec", json!({"src": "let = ("}));
    assert_eq!(r["structuredContent"]["code"], json!(-32001));
}

#[test]
fn big_values_elide_and_slice() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "t");
    let ov = output_validator(&mut m, "shoal_get");
    let r = m.tool("shoal_exec", json!({"src": "range(0, 100000).collect()"}));
    let sc = &r["structuredContent"];
    let v = &sc["value"];
    assert_eq!(v["$"], json!("ref"), "{v}");
    assert_eq!(v["of"], json!("list"));
    assert_eq!(v["n"], json!(100000));
    assert_eq!(v["preview"]["v"].as_array().unwrap().len(), 5);
    assert_eq!(r["content"][1]["type"], json!("resource_link"));
    let reference = sc["ref"].as_str().unwrap().to_string();
    let g = m.get(json!({"ref": reference, "slice": [500, 510]}));
    assert!(ov.is_valid(&g["structuredContent"]), "{g}");
    let items: Vec<i64> = g["structuredContent"]["value"]["v"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["v"].as_i64().unwrap())
        .collect();
    assert_eq!(items, (500..510).collect::<Vec<_>>());
    // 36: per-call budget.
    let sc = m.exec("range(0, 10).collect()");
    let r10 = sc["ref"].as_str().unwrap().to_string();
    assert_eq!(sc["value"]["$"], json!("list"));
    let g = m.get(json!({"ref": r10, "elide": {"max_items": 5}}));
    assert_eq!(g["structuredContent"]["value"]["$"], json!("ref"));
    assert_eq!(g["structuredContent"]["value"]["n"], json!(10));
    // 37: bytes budget loosened but capped.
    let sc = m.tool(
        "shoal_exec",
        json!({"src": "sh { head -c 20000 /dev/zero | tr '\\0' x }.out", "elide": {"max_bytes": 30000}}),
    );
    assert_eq!(sc["structuredContent"]["value"]["$"], json!("str"), "{sc}");
    let sc = m.tool(
        "shoal_exec",
        json!({"src": "sh { head -c 100000 /dev/zero | tr '\\0' y }.out", "elide": {"max_bytes": 5000000}}),
    );
    let v = &sc["structuredContent"]["value"];
    assert_eq!(
        (v["$"].clone(), v["of"].clone(), v["n"].clone()),
        (json!("ref"), json!("str"), json!(100000))
    );
    // raw is bounded: truncated with the total.
    let r = sc["structuredContent"]["ref"].as_str().unwrap().to_string();
    let g = m.get(json!({"ref": r, "format": "raw"}));
    let s = &g["structuredContent"];
    assert_eq!(s["raw"].as_str().unwrap().len(), 65536);
    assert_eq!(
        (s["truncated"].clone(), s["n"].clone()),
        (json!(true), json!(100000))
    );
    let g = m.get(json!({"ref": r, "format": "raw", "slice": [99990, 100000]}));
    assert_eq!(g["structuredContent"]["raw"], json!("yyyyyyyyyy"));
    // Invalid shoal_get arguments.
    let g = m.get(json!({"ref": r, "slice": [1]}));
    assert_eq!(g["isError"], json!(true));
    assert_eq!(
        g["structuredContent"]["data"]["errors"][0]["path"],
        json!("/slice")
    );
    let g = m.get(json!({"ref": "out:999"}));
    assert_eq!(g["structuredContent"]["code"], json!(-32004));
}

#[test]
fn directory_listing_elides_table_and_bounds_text() {
    let root = Root::new();
    let dir = root.path().join("many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..2000 {
        std::fs::write(dir.join(format!("file-{i:05}.txt")), b"x").unwrap();
    }
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "t");
    // 33, 34
    let r = m.tool(
        "shoal_exec",
        json!({"src": format!("ls {}", dir.display()), "position": "stmt"}),
    );
    let sc = &r["structuredContent"];
    let out = &sc["value"]["out"];
    assert_eq!(sc["value"]["$"], json!("outcome"), "{sc}");
    assert_eq!(out["$"], json!("ref"));
    assert_eq!(out["of"], json!("table"));
    assert_eq!(out["n"], json!(2000));
    assert_eq!(out["cols"]["name"], json!("str"));
    assert!(out["cols"].get("size").is_some());
    assert_eq!(out["preview"]["n"], json!(5));
    assert!(out["render_head"].as_str().unwrap().contains("name"));
    assert!(serde_json::to_vec(&sc["value"]).unwrap().len() < 4096);
    // Head plus tail within 12 KiB, the marker naming the lines cut.
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.len() <= 12 << 10, "{}", text.len());
    let reference = sc["ref"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            " elided; shoal_get {{\"ref\":\"{reference}\",\"lines\":["
        )),
        "{text}"
    );
    assert!(text.contains("file-01999.txt"), "the tail is kept");
    let render = sc["render"].as_str().unwrap();
    assert_eq!(render, text);
    assert!(r["content"][1]["uri"]
        .as_str()
        .unwrap()
        .starts_with("shoal://out/"));
    // 35, 41, 42: drill in.
    let n = sc["ref"].as_str().unwrap().to_string();
    let g = m.get(json!({"ref": n, "path": "out[3]"}));
    let v = &g["structuredContent"]["value"];
    assert_eq!(v["$"], json!("record"), "{v}");
    assert!(v["v"]["name"].is_object());
    let uri = format!(
        "{}?path=out[3]",
        out["uri"].as_str().unwrap().split('?').next().unwrap()
    );
    let rr = m.read(&uri);
    assert_eq!(rr["structuredContent"]["$"], json!("record"), "{rr}");
    let g = m.get(json!({"ref": n, "path": "out.rows[0..2]"}));
    assert_eq!(
        g["structuredContent"]["value"]["v"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let g = m.get(json!({"ref": n, "path": "out.rows[0].name"}));
    assert_eq!(g["structuredContent"]["value"]["$"], json!("str"), "{g}");
}

#[test]
fn value_get_over_the_kernel_protocol() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut k = d.conn();
    k.attach("k");
    // 40
    let t = k.ok("exec", json!({"src": "csv.parse(\"n\\n1\\n2\\n3\")"}));
    let r = t["ref"].as_str().unwrap().to_string();
    let s = k.ok("value.get", json!({"ref": r, "slice": [1, 3]}));
    assert_eq!(s["value"]["$"], json!("table"));
    assert_eq!(s["value"]["n"], json!(2));
    // 41
    let s = k.ok("value.get", json!({"ref": r, "path": "rows[0..2]"}));
    assert_eq!(s["value"]["v"].as_array().unwrap().len(), 2);
    assert_eq!(s["value"]["v"][0]["$"], json!("record"));
    let i = k.ok("exec", json!({"src": "42"}));
    let ir = i["ref"].as_str().unwrap().to_string();
    let e = k.call("value.get", json!({"ref": ir, "slice": [0, 1]}));
    assert_eq!(e["error"]["code"], json!(-32005));
    // 43
    let s = k.ok("value.get", json!({"ref": r, "format": "render"}));
    assert!(s["render"].as_str().unwrap().contains('2'));
    let e = k.call("value.get", json!({"ref": ir, "format": "raw"}));
    assert_eq!(e["error"]["code"], json!(-32005));
    let st = k.ok("exec", json!({"src": "\"hé\""}));
    let s = k.ok("value.get", json!({"ref": st["ref"], "format": "raw"}));
    assert_eq!(s["raw"], json!("hé"));
    let b = k.ok("exec", json!({"src": "sh { printf ab }.stdout"}));
    assert_eq!(b["value"], json!({"$": "bytes", "v": "YWI="}));
    let s = k.ok("value.get", json!({"ref": b["ref"], "format": "raw"}));
    assert_eq!(s["raw_base64"], json!("YWI="));
    // Bytes over 4 KiB elide to a ref; a slice comes back inline.
    let b = k.ok(
        "exec",
        json!({"src": "sh { head -c 10000 /dev/zero }.stdout"}),
    );
    assert_eq!(b["value"]["$"], json!("ref"), "{b}");
    assert_eq!(
        (b["value"]["of"].clone(), b["value"]["n"].clone()),
        (json!("bytes"), json!(10000))
    );
    let s = k.ok("value.get", json!({"ref": b["ref"], "slice": [0, 3]}));
    assert_eq!(s["value"], json!({"$": "bytes", "v": "AAAA"}));
    let s = k.ok("value.get", json!({"ref": ir, "format": "inline"}));
    assert_eq!(s["inline"], json!("42"));
    let e = k.call("value.get", json!({"ref": ir, "format": "xml"}));
    assert_eq!(e["error"]["code"], json!(-32602));
    // 45
    let e = k.call("value.get", json!({"ref": "out:999"}));
    assert_eq!(e["error"]["code"], json!(-32004));
    // Refs are per session.
    let mut k2 = d.conn();
    k2.attach("other");
    let e = k2.call("value.get", json!({"ref": r}));
    assert_eq!(e["error"]["code"], json!(-32004));
    // 39 over the kernel: exec elide param.
    let l = k.ok("exec", json!({"src": "range(0, 600).collect()"}));
    assert_eq!(l["value"]["$"], json!("ref"));
    let l = k.ok(
        "exec",
        json!({"src": "range(0, 600).collect()", "elide": {"max_items": 1000, "max_bytes": 65536}}),
    );
    assert_eq!(l["value"]["$"], json!("list"));
}

#[test]
fn resources_list_templates_read() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "t");
    m.exec("{name: \"shoal\", n: 3}");
    let l = m.ok("resources/list", json!({}));
    let uris: Vec<&str> = l["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    for u in [
        "shoal://session/cwd",
        "shoal://session/env",
        "shoal://out/1",
    ] {
        assert!(uris.contains(&u), "{u} in {uris:?}");
    }
    let t = m.ok("resources/templates/list", json!({}));
    let names: Vec<&str> = t["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"transcript-value") && names.contains(&"session-view"));
    let r = m.read("shoal://out/1");
    assert_eq!(r["contents"][0]["uri"], json!("shoal://out/1"));
    assert_eq!(r["contents"][0]["mimeType"], json!("application/json"));
    assert_eq!(r["structuredContent"]["$"], json!("record"));
    let r = m.read("shoal://out/1?path=name");
    assert_eq!(r["structuredContent"], json!({"$": "str", "v": "shoal"}));
    let r = m.read("shoal://out/1?format=render");
    assert_eq!(r["contents"][0]["mimeType"], json!("text/plain"));
    let r = m.read("shoal://session/cwd");
    assert!(r["structuredContent"]["display"].is_string());
    let r = m.read("shoal://session/env");
    assert_eq!(r["structuredContent"]["granted"], json!(true));
    // The kernel's own error, not wrapped (docs/protocol.md §9).
    let e = m.call("resources/read", json!({"uri": "shoal://out/99"}));
    assert_eq!(e["error"]["code"], json!(-32004), "{e}");
    let e = m.call("resources/read", json!({"uri": "http://x"}));
    assert_eq!(e["error"]["code"], json!(-32602));
    let e = m.call("resources/subscribe", json!({"uri": "shoal://out/1"}));
    assert_eq!(e["error"]["code"], json!(-32602));
    if names.contains(&"journal") {
        let r = m.read("shoal://journal?limit=5");
        assert!(r["structuredContent"]["entries"].is_array(), "{r}");
        let j = m.tool("shoal_journal", json!({"limit": 5}));
        assert_eq!(j["isError"], json!(false), "{j}");
        let ov = output_validator(&mut m, "shoal_journal");
        assert!(ov.is_valid(&j["structuredContent"]));
        // The model reads lines an entry, not the entries' JSON.
        let text = j["content"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with('#')
                && text.lines().nth(1).is_some_and(|l| l.starts_with("  $ "))
                && !text.contains("\"entries\""),
            "{text}"
        );
        let bad = m.tool("shoal_journal", json!({"limit": 0, "bogus": 1}));
        assert_eq!(bad["isError"], json!(true));
    }
}

#[test]
fn subscriptions_deliver_until_unsubscribed() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "t");
    let t = m.ok("resources/templates/list", json!({}));
    if !t.to_string().contains("shoal://events/") {
        panic!("the event bus is not running: {t}");
    }
    m.ok(
        "resources/subscribe",
        json!({"uri": "shoal://events/user.a"}),
    );
    m.ok(
        "resources/subscribe",
        json!({"uri": "shoal://events/user.b"}),
    );
    let mut k = d.conn();
    k.attach("k");
    k.ok(
        "events.publish",
        json!({"channel": "user.a", "payload": {"n": 1}}),
    );
    let note = loop {
        if let Some(n) = m.notes.pop() {
            break n;
        }
        let f = m.c.recv();
        assert!(f.get("id").is_none(), "{f}");
        m.notes.push(f);
    };
    assert_eq!(note["method"], json!("notifications/resources/updated"));
    assert_eq!(note["params"]["uri"], json!("shoal://events/user.a"));
    assert_eq!(note["params"]["payload"], json!({"n": 1}));
    m.ok(
        "resources/unsubscribe",
        json!({"uri": "shoal://events/user.a"}),
    );
    k.ok(
        "events.publish",
        json!({"channel": "user.a", "payload": {"n": 2}}),
    );
    k.ok(
        "events.publish",
        json!({"channel": "user.b", "payload": {"n": 3}}),
    );
    // user.b's event arrives; user.a's does not.
    let f = m.c.recv();
    assert_eq!(f["params"]["uri"], json!("shoal://events/user.b"), "{f}");
    let r = m.read("shoal://events/user.a");
    assert_eq!(
        r["structuredContent"]["events"].as_array().unwrap().len(),
        2
    );
    // Still one connection: a ping answers in order with no stray frames.
    assert_eq!(m.ok("ping", json!({})), json!({}));
    assert!(m.notes.is_empty(), "{:?}", m.notes);
}

#[test]
fn cancelled_call_stops_its_work_and_progress_flows() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "t");
    let marker = root.path().join("sleeper-marker");
    let src = format!("sh {{ echo $$ > {}; exec sleep 30 }}", marker.display());
    let id = m.send_req(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": src}, "_meta": {"progressToken": "p1"}}),
    );
    // A progress notification while it runs.
    let p = m.c.recv();
    assert_eq!(p["method"], json!("notifications/progress"), "{p}");
    assert_eq!(p["params"]["progressToken"], json!("p1"));
    let pid: i32 = eventually("sleeper pid", Duration::from_secs(10), || {
        std::fs::read_to_string(&marker).ok()?.trim().parse().ok()
    });
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    m.c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": id, "reason": "test"}}),
    );
    // `sleep 30` gone well before its time: the cancel ended it.
    eventually("sleeper gone", Duration::from_secs(20), || {
        let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        // Gone, or a zombie about to be reaped.
        match st {
            None => Some(()),
            Some(s) => s
                .rsplit_once(") ")
                .and_then(|(_, r)| r.starts_with('Z').then_some(())),
        }
    });
    // No reply for the cancelled request; the connection keeps serving and
    // the session is usable at once.
    let sc = m.exec("1 + 1");
    assert_eq!(sc["value"], json!({"$": "int", "v": 2}));
    let frames: Vec<&Value> = m.notes.iter().filter(|f| f.get("id").is_some()).collect();
    assert!(frames.is_empty(), "{frames:?}");
}

#[test]
fn refs_survive_a_restart_with_paths_and_slices() {
    let root = Root::new();
    let mut d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "keep");
    let sc = m.exec("{a: [1, 2, 3], s: \"hello\"}");
    assert_eq!(sc["ref"], json!("out:1"));
    drop(m);
    d.signal(libc_sigterm());
    d.wait_timeout(Duration::from_secs(10))
        .expect("daemon stops");
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "keep");
    let g = m.get(json!({"ref": "out:1", "path": "a[1]"}));
    assert_eq!(
        g["structuredContent"]["value"],
        json!({"$": "int", "v": 2}),
        "{g}"
    );
    let g = m.get(json!({"ref": "out:1", "path": "s", "slice": [1, 3]}));
    assert_eq!(
        g["structuredContent"]["value"],
        json!({"$": "str", "v": "el"}),
        "{g}"
    );
    let r = m.read("shoal://out/1?path=a");
    assert_eq!(r["structuredContent"]["$"], json!("list"));
    // New values continue the numbering, past the numbers reserved before the restart
    // (docs/protocol.md §10: reserved durably ahead of use).
    let r = m.exec("7")["ref"].as_str().unwrap().to_string();
    assert!(r[4..].parse::<u64>().unwrap() > 1, "{r}");
}

fn libc_sigterm() -> i32 {
    15
}

#[test]
fn stderr_is_bounded_and_journal_is_subscribable() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "t");
    // A raised error's stderr and an outcome's err are bounded, with a link to the rest.
    let r = m.tool(
        "shoal_exec",
        json!({"src": "sh { head -c 50000 /dev/zero | tr '\\0' e >&2; exit 3 }", "position": "stmt"}),
    );
    let e = &r["structuredContent"];
    assert_eq!(e["code"], json!(-32002), "{e}");
    let stderr = e["data"]["stderr"].as_str().unwrap();
    assert!(stderr.len() <= 8192, "{}", stderr.len());
    assert!(
        stderr.contains("fetch via shoal://out/"),
        "{}",
        &stderr[stderr.len() - 80..]
    );
    let sc = m.exec("sh { head -c 50000 /dev/zero | tr '\\0' e >&2 }");
    let err = sc["value"]["err"].as_str().unwrap();
    assert!(
        err.len() <= 8192 && err.contains("?path=stderr"),
        "{}",
        err.len()
    );
    // Scenario item 13: a real external command's outcome carries its span, also
    // through the elision path (the envelope is kept, `err` bounded).
    let span = &sc["value"]["span"];
    assert_eq!(span["start"], json!(0), "{sc}");
    assert!(span["end"].as_u64() > span["start"].as_u64(), "{sc}");
    let g = m.get(json!({"ref": sc["ref"], "path": "stderr", "format": "raw"}));
    assert_eq!(
        g["structuredContent"]["raw_base64"].as_str().unwrap().len(),
        66668
    );
    // shoal://journal is subscribable: an exec publishes an update.
    m.ok("resources/subscribe", json!({"uri": "shoal://journal"}));
    let id = m.send_req(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "1"}}),
    );
    let reply = m.wait_id(id);
    assert_eq!(reply["result"]["isError"], json!(false));
    let note = match m.notes.pop() {
        Some(n) => n,
        None => m.c.recv(),
    };
    assert_eq!(
        note["method"],
        json!("notifications/resources/updated"),
        "{note}"
    );
    assert_eq!(note["params"]["uri"], json!("shoal://journal"));
    m.ok("resources/unsubscribe", json!({"uri": "shoal://journal"}));
}

#[test]
fn a_call_in_flight_is_answered_after_the_client_stops_sending() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "t");
    let id = m.send_req(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "sleep 200ms\n6 * 7"}}),
    );
    m.c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let r = m.wait_id(id);
    assert_eq!(
        r["result"]["structuredContent"]["value"],
        json!({"$": "int", "v": 42}),
        "{r}"
    );
}

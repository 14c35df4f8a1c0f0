//! Big output is cheap and pageable, through a real
//! daemon over MCP: a 5000-line outcome shows head plus tail within the
//! 12 KiB text budget, its marker line names the `shoal_get` call that
//! returns exactly the lines it cut, `elide.max_bytes` bounds the text,
//! `shoal_get` defaults to the render and pages by lines, the links the
//! result carries lead to text, and `shoal exec` prints the same.

use crate::common::*;
use serde_json::{json, Value};

/// An MCP connection (notifications skipped).
struct Mcp {
    c: Conn,
    next: u64,
}

impl Mcp {
    fn open(d: &Daemon, session: &str) -> Mcp {
        let mut c = d.conn();
        c.send(
            &json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": {"session": session}}),
        );
        let mut m = Mcp { c, next: 0 };
        m.ok("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
        m.c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }
    fn ok(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.c
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let f = self.c.recv();
            if f.get("id") == Some(&json!(id)) {
                assert!(f.get("error").is_none(), "{method}: {f}");
                return f["result"].clone();
            }
        }
    }
    fn tool(&mut self, name: &str, args: Value) -> Value {
        let r = self.ok("tools/call", json!({"name": name, "arguments": args}));
        assert_eq!(r["isError"], json!(false), "{name} {args}: {r}");
        r
    }
}

/// The text the model sees.
fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().expect("a text item")
}

/// `line 00001` .. `line 05000` (55 kB), as `seq` prints them.
const SEQ: &str = "sh { seq -f 'line %05g' 1 5000 }";

fn seq_lines() -> Vec<String> {
    (1..=5000).map(|i| format!("line {i:05}")).collect()
}

/// The marker line of a cut text: `(a, b, n, the shoal_get arguments)`.
fn marker(t: &str) -> (usize, usize, usize, Value) {
    let line = t
        .lines()
        .find(|l| l.starts_with("\u{2026} line"))
        .unwrap_or_else(|| panic!("no marker line in {t}"));
    let rest = line
        .strip_prefix("\u{2026} lines ")
        .unwrap_or_else(|| panic!("{line}"));
    let (range, rest) = rest.split_once(" of ").unwrap();
    let (a, b) = range.split_once('\u{2013}').unwrap();
    let (n, call) = rest.split_once(" elided; shoal_get ").unwrap();
    let call: Value = serde_json::from_str(call).unwrap_or_else(|e| panic!("{line}: {e}"));
    (
        a.parse().unwrap(),
        b.parse().unwrap(),
        n.parse().unwrap(),
        call,
    )
}

/// Head lines, marker, tail lines: the head is lines 1..a-1, the tail b+1..n.
fn assert_head_and_tail(t: &str, want: &[String]) -> (usize, usize, Value) {
    let (a, b, n, call) = marker(t);
    assert_eq!(n, want.len(), "{t}");
    let lines: Vec<&str> = t.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with('\u{2026}'))
        .unwrap();
    assert_eq!(at, a - 1, "head lines before the marker");
    assert_eq!(&lines[..at], &want[..a - 1]);
    assert_eq!(&lines[at + 1..], &want[b..], "the tail is the last lines");
    (a, b, call)
}

#[test]
fn big_outcome_is_head_plus_tail_and_its_marker_call_returns_the_lines() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "big");
    let want = seq_lines();
    let r = m.tool("shoal_exec", json!({"src": SEQ}));
    let t = text(&r);
    assert!(t.len() <= 12 << 10, "text {} bytes", t.len());
    assert!(t.len() > 8 << 10, "the budget is used: {} bytes", t.len());
    assert!(t.starts_with("line 00001\nline 00002\n"), "{t}");
    assert!(
        t.ends_with("line 04999\nline 05000"),
        "the end is kept: {t}"
    );
    let (a, b, call) = assert_head_and_tail(t, &want);
    // About a third head, two thirds tail.
    assert!(a > 250 && a < 450, "head of {} lines", a - 1);
    assert!(5000 - b > 600, "tail of {} lines", 5000 - b);
    let reference = r["structuredContent"]["ref"].as_str().unwrap();
    assert_eq!(call, json!({"ref": reference, "lines": [a, b]}));
    assert_eq!(
        r["structuredContent"]["render"].as_str(),
        Some(t),
        "structuredContent.render is the same text"
    );

    // The call the marker names returns exactly those lines, as text.
    let g = m.tool("shoal_get", call.clone());
    assert_eq!(text(&g), want[a - 1..b].join("\n"));
    assert_eq!(g["structuredContent"]["lines"], json!([a, b]));
    assert_eq!(g["structuredContent"]["total_lines"], json!(5000));

    // Any range pages by lines (1-based, inclusive); past the end is clamped.
    let g = m.tool(
        "shoal_get",
        json!({"ref": reference, "lines": [4998, 6000]}),
    );
    assert_eq!(text(&g), "line 04998\nline 04999\nline 05000");
    let g = m.tool("shoal_get", json!({"ref": reference, "lines": [7, 7]}));
    assert_eq!(text(&g), "line 00007");
    // Past the end, or not a range: an error that says why.
    let e = m.ok(
        "tools/call",
        json!({"name": "shoal_get", "arguments": {"ref": reference, "lines": [5001, 5002]}}),
    );
    assert_eq!(e["isError"], json!(true));
    assert!(text(&e).contains("the text has 5000 lines"), "{e}");
}

#[test]
fn out_n_is_usable_in_source_also_after_a_restart() {
    let root = Root::new();
    let mut d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "big");
    let r = m.tool("shoal_exec", json!({"src": SEQ}));
    let reference = r["structuredContent"]["ref"].as_str().unwrap().to_string();
    let r = m.tool(
        "shoal_exec",
        json!({"src": format!("{reference}.lines().len()")}),
    );
    assert_eq!(text(&r), "5000");
    let r = m.tool(
        "shoal_exec",
        json!({"src": format!("let last = {reference}.lines()[-1]\n\"{{last}} of {{{reference}.lines().len()}}\"")}),
    );
    assert_eq!(text(&r), "line 05000 of 5000");
    // An unknown one says which exist.
    let e = m.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "out:999"}}),
    );
    assert_eq!(e["isError"], json!(true));
    assert!(text(&e).contains("no out:999 in this session yet"), "{e}");
    // Bare `out` teaches the form.
    let e = m.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "out.lines()"}}),
    );
    assert!(text(&e).contains("out:3.lines().len()"), "{e}");
    drop(m);
    d.signal(15);
    d.wait_timeout(std::time::Duration::from_secs(10))
        .expect("daemon stops");
    // After a restart the value is read back from the journal.
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "big");
    let r = m.tool(
        "shoal_exec",
        json!({"src": format!("{reference}.lines()[4998]")}),
    );
    assert_eq!(text(&r), "line 04999");
}

#[test]
fn elide_max_bytes_bounds_the_text() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "big");
    let want = seq_lines();
    for max in [600usize, 2000, 30_000] {
        let r = m.tool(
            "shoal_exec",
            json!({"src": SEQ, "elide": {"max_bytes": max}}),
        );
        let t = text(&r);
        assert!(t.len() <= max, "max_bytes {max}: text {} bytes", t.len());
        assert!(t.len() > max * 3 / 4, "max_bytes {max}: {} bytes", t.len());
        let (a, b, call) = assert_head_and_tail(t, &want);
        assert!(a > 1 && b < 5000, "head and tail present: {a}..{b}");
        let g = m.tool("shoal_get", call);
        assert_eq!(text(&g), want[a - 1..b].join("\n"));
        // The value stays elided under the same budget.
        assert_eq!(r["structuredContent"]["value"]["$"], json!("outcome"));
    }
    // A small text is whole, whatever the budget.
    let r = m.tool(
        "shoal_exec",
        json!({"src": "sh { seq 1 3 }", "elide": {"max_bytes": 600}}),
    );
    assert_eq!(text(&r), "1\n2\n3");
}

#[test]
fn lines_beyond_one_answer_page_through_markers() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "big");
    // 5000 lines of 41 bytes: 205 kB, more than one answer holds.
    let r = m.tool(
        "shoal_exec",
        json!({"src": "sh { seq -f 'build step %05g: compiling module ok' 1 5000 }"}),
    );
    let want: Vec<String> = (1..=5000)
        .map(|i| format!("build step {i:05}: compiling module ok"))
        .collect();
    let t = text(&r);
    assert!(t.len() <= 12 << 10);
    let (a, b, mut call) = assert_head_and_tail(t, &want);
    let mut got: Vec<String> = Vec::new();
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(pages < 10, "paging ends");
        let g = m.tool("shoal_get", call.clone());
        let page = text(&g);
        assert!(page.len() <= 64 << 10, "a page is at most 64 KiB");
        match page.lines().last().filter(|l| l.starts_with('\u{2026}')) {
            Some(_) => {
                let body: Vec<&str> = page.lines().collect();
                got.extend(body[..body.len() - 1].iter().map(|s| s.to_string()));
                let (na, nb, _, next) = marker(page);
                assert_eq!((na, nb), (a + got.len(), b), "the marker names the rest");
                call = next;
            }
            None => {
                got.extend(page.lines().map(str::to_string));
                break;
            }
        }
    }
    assert!(pages > 1, "the cut lines took more than one page");
    assert_eq!(got, want[a - 1..b]);
}

#[test]
fn shoal_get_defaults_to_the_render_and_links_lead_to_text() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "big");
    let want = seq_lines();
    let r = m.tool("shoal_exec", json!({"src": SEQ}));
    let reference = r["structuredContent"]["ref"].as_str().unwrap().to_string();
    let exec_text = text(&r).to_string();

    // Without format: the render, head plus tail, the same text as the exec's.
    let g = m.tool("shoal_get", json!({"ref": reference}));
    assert_eq!(text(&g), exec_text);
    assert!(g["structuredContent"].get("value").is_none(), "{g}");
    // format json: the tagged value as before.
    let g = m.tool("shoal_get", json!({"ref": reference, "format": "json"}));
    assert_eq!(
        g["structuredContent"]["value"]["$"],
        json!("outcome"),
        "{g}"
    );
    let out = &g["structuredContent"]["value"]["out"];
    assert_eq!(out["$"], json!("ref"));
    let out_uri = out["uri"].as_str().unwrap().to_string();
    assert!(out_uri.ends_with("?path=out"), "{out_uri}");

    // The `?path=out` link: as JSON it elides to itself, so the text comes
    // along, its marker naming the path too.
    let g = m.tool(
        "shoal_get",
        json!({"ref": reference, "path": "out", "format": "json"}),
    );
    let t = text(&g);
    assert!(t.len() <= 12 << 10);
    let (a, b, call) = assert_head_and_tail(t, &want);
    assert_eq!(
        call,
        json!({"ref": reference, "path": "out", "lines": [a, b]})
    );
    assert_eq!(text(&m.tool("shoal_get", call)), want[a - 1..b].join("\n"));
    // resources/read of it: text, not a ref to itself.
    let rr = m.ok("resources/read", json!({"uri": out_uri}));
    let t = rr["contents"][0]["text"].as_str().unwrap();
    assert!(t.starts_with("line 00001\n"), "{rr}");
    assert!(t.ends_with("line 05000"), "{rr}");
    marker(t);
    // Slicing the outcome itself says how.
    let e = m.ok(
        "tools/call",
        json!({"name": "shoal_get", "arguments": {"ref": reference, "slice": [0, 10]}}),
    );
    assert_eq!(e["isError"], json!(true));
    assert!(
        text(&e).contains("path: \"out\"") && text(&e).contains("lines: [a, b]"),
        "{e}"
    );
    // The result's resource link reads too.
    let link = r["content"][1]["uri"].as_str().unwrap();
    let rr = m.ok("resources/read", json!({"uri": link}));
    assert!(rr["contents"][0]["text"].is_string(), "{rr}");

    // A big stderr: the `fetch via …?path=stderr` link of `err` reads as text.
    let r = m.tool(
        "shoal_exec",
        json!({"src": "sh { seq -f 'warning %05g' 1 5000 >&2 }"}),
    );
    let err = r["structuredContent"]["value"]["err"].as_str().unwrap();
    let uri = err
        .rsplit("fetch via ")
        .next()
        .and_then(|u| u.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(uri.ends_with("?path=stderr"), "{uri}");
    let rr = m.ok("resources/read", json!({"uri": uri}));
    let t = rr["contents"][0]["text"].as_str().unwrap();
    assert!(
        t.starts_with("warning 00001\n") && t.ends_with("warning 05000"),
        "{rr}"
    );
    let (a, b, _, call) = marker(t);
    let want: Vec<String> = (1..=5000).map(|i| format!("warning {i:05}")).collect();
    assert_eq!(text(&m.tool("shoal_get", call)), want[a - 1..b].join("\n"));
}

#[test]
fn shoal_exec_prints_head_plus_tail() {
    let root = Root::new();
    let _d = Daemon::start(&root);
    let sock = root.socket().display().to_string();
    let (st, out, err) = run(&root, &["exec", "--socket", &sock, SEQ], &[]);
    assert_eq!(st, 0, "{err}");
    let out = out.trim_end_matches('\n');
    assert!(out.len() <= 12 << 10, "{} bytes", out.len());
    assert!(out.starts_with("line 00001\n") && out.ends_with("line 05000"));
    assert_head_and_tail(out, &seq_lines());
}

#[test]
fn a_large_file_read_with_cat_keeps_its_end() {
    let root = Root::new();
    let want: Vec<String> = (1..=5000)
        .map(|i| format!("{i:05} error: something went wrong at step {i}"))
        .collect();
    let file = root.path().join("build.log");
    std::fs::write(&file, want.join("\n") + "\n").unwrap();
    let d = Daemon::start(&root);
    let mut m = Mcp::open(&d, "big");
    let r = m.tool(
        "shoal_exec",
        json!({"src": format!("cat {}", file.display())}),
    );
    let t = text(&r);
    assert!(t.len() <= 12 << 10, "{} bytes", t.len());
    assert!(
        t.ends_with(&want[4999]),
        "the last line is shown: {}",
        &t[t.len() - 300..]
    );
    let (a, b, call) = assert_head_and_tail(t, &want);
    // 4700 lines of about 45 bytes: more than one page; the first page starts at a.
    let g = m.tool("shoal_get", call);
    let page = text(&g);
    assert!(page.starts_with(&want[a - 1]), "page starts at line {a}");
    let (na, nb, _, _) = marker(page);
    assert_eq!(nb, b);
    assert_eq!(page.lines().count(), na - a + 1);
}

//! The fuzz entry points, one per cargo-fuzz target. The targets in
//! `fuzz_targets/` call these, and the stable `tests/it/fuzz_regressions.rs`
//! replays the checked-in corpus (`tests/fuzz_corpus/<target>/`) through the
//! very same functions, so a crash found by fuzzing stays a test.
//!
//! Each function takes arbitrary bytes and must neither panic nor overflow a
//! stack; the assertions inside state what must hold for any input.

#![allow(dead_code)]

use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::Value as Json;
use shoal_lang::{parse as lang_parse, ParseContext};
use shoal_policy::{effect, plan, policy as leash_policy, Effect, Policy};
use shoal_proto::frame::{Frame, FrameReader};
use shoal_proto::{kernel, mcp, rpc, syntax, uri, valpath};
use shoal_pty::keys;
use shoal_value::{Record, Value};

/// One fuzz entry point.
pub type Entry = fn(&[u8]);

/// Every target by name, for the replay test.
pub const TARGETS: &[(&str, Entry)] = &[
    ("parse", parse),
    ("frame", frame),
    ("valpath", valpath_target),
    ("uri", uri_target),
    ("config", config),
    ("pty_input", pty_input),
    ("policy", policy),
    ("effects", effects),
];

/// The lexer and parser: any text parses or fails with an error whose span
/// points into the source, with and without value-bound names; `complete`
/// answers for any cursor.
pub fn parse(data: &[u8]) {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let _ = lang_parse(src, &ParseContext::default());
    let mut ctx = ParseContext::default();
    for name in ["x", "ls", "git", "f"] {
        ctx.value_bound.insert(name.to_string());
    }
    if let Err(e) = lang_parse(src, &ctx) {
        assert!(e.span.start <= e.span.end);
        assert!(
            e.span.start as usize <= src.len() + 1,
            "span past the source"
        );
    }
    let _ = syntax::complete(src, src.len() / 2);
}

/// Kernel and MCP frame decoding: newline framing with a size limit, then
/// JSON-RPC classification and (for MCP tool calls) argument validation.
pub fn frame(data: &[u8]) {
    // The first byte picks a small frame limit so the oversized path runs.
    let Some((&l, rest)) = data.split_first() else {
        return;
    };
    let limit = 16 + l as usize * 8;
    let mut r = FrameReader::new(rest, limit);
    loop {
        // A byte slice never blocks: every poll completes.
        let next = r.next().now_or_never().expect("a slice never pends");
        match next {
            Ok(Some(Frame::Line(line))) => {
                assert!(line.len() <= limit);
                assert!(!line.contains(&b'\n'));
                // The in-place read answers as the whole-value parse does.
                assert_eq!(rpc::classify(&line), rpc::classify_whole(&line));
                if let rpc::Incoming::Request { method, params, .. } = rpc::classify(&line) {
                    if method == "tools/call" {
                        if let Some(name) = params["name"].as_str() {
                            let caps = mcp::Caps {
                                journal: true,
                                events: true,
                            };
                            let _ = mcp::parse_call(caps, name, params.get("arguments").cloned());
                        }
                    }
                    let parsed =
                        shoal_proto::kernel::KernelRequest::parse(&method, params.clone(), true);
                    if let Ok(shoal_proto::kernel::KernelRequest::Complete(p)) = parsed {
                        let _ = syntax::complete_method(&p, None);
                    }
                    let _ = mcp::is_mcp_method(&method);
                }
            }
            Ok(Some(Frame::Oversized { len })) => assert!(len as usize > limit),
            Ok(None) | Err(_) => break,
        }
    }
}

fn sample() -> Value {
    let mut row = Record::new();
    row.insert("name".into(), Value::str("a"));
    row.insert("n".into(), Value::Int(1));
    let table = Value::Table(Arc::new(vec![Arc::new(row.clone()), Arc::new(row.clone())]));
    let mut r = Record::new();
    r.insert("rows".into(), table);
    r.insert("xs".into(), Value::list((0..10).map(Value::Int).collect()));
    r.insert("s".into(), Value::str("héllo wörld"));
    r.insert("b".into(), Value::bytes(b"bytes".to_vec()));
    r.insert("rec".into(), Value::record(row));
    Value::record(r)
}

/// `value.get` paths and slices against a value with every container kind.
pub fn valpath_target(data: &[u8]) {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    let v = sample();
    if let Ok(segs) = valpath::parse(path) {
        if let Ok(x) = valpath::apply(&v, &segs) {
            let n = path.len();
            let _ = valpath::slice(&x, n % 7, n % 13);
            let _ = valpath::slice(&x, usize::MAX - n, usize::MAX);
        }
    }
}

/// `shoal://` resource URIs and `out:N` refs.
pub fn uri_target(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(u) = uri::parse(s) {
        let _ = u.get("path");
        let _ = u.get("since");
    }
    let _ = uri::percent_decode(s);
    if let Some(u) = uri::ref_to_uri(s) {
        assert!(uri::parse(&u).is_ok(), "{u}");
    }
    let _ = kernel::parse_ref(s);
}

/// The config TOML (`shoal.toml`, strict, with `file:line:column` errors).
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = shoal_daemon::config::parse(text, std::path::Path::new("f.toml")) {
        let _ = e.to_string();
    }
}

fn at<'a>(v: &'a Json, path: &[usize]) -> Option<&'a Json> {
    let mut cur = v;
    for &i in path {
        cur = cur.as_array()?.get(i)?;
    }
    Some(cur)
}

/// `pty.send` input: the JSON input encoding (strings, `{key}`, `{text}`,
/// `{bytes}`, nested arrays) and the named-key table. Any input encodes or
/// fails with an error whose index path points into the input.
pub fn pty_input(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The text itself is also tried as a key name.
    let _ = keys::named_key(text);
    let Ok(input) = serde_json::from_str::<Json>(text) else {
        return;
    };
    match keys::encode_input(&input) {
        Ok(bytes) => assert!(bytes.len() <= text.len() * 4 + 16, "{} bytes", bytes.len()),
        Err(e) => {
            assert!(
                at(&input, &e.path).is_some(),
                "error path {:?} outside the input",
                e.path
            );
            assert!(!e.message.is_empty());
        }
    }
}

/// Policy files: `[policy.principal."NAME"]` sections through the strict
/// config loader, and a parsed policy deciding a fixed set of effects (and
/// lowered to Landlock rules).
pub fn policy(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let effects = [
        Effect::Opaque,
        Effect::FsWrite {
            paths: vec!["/tmp/x/../y".into()],
        },
        Effect::NetConnect {
            host: "github.com".into(),
            port: 443,
        },
        Effect::ProcSpawn {
            bin_hash: String::new(),
            argv0: "git".into(),
        },
    ];
    match shoal_daemon::config::parse(text, std::path::Path::new("f.toml")) {
        Err(e) => {
            let _ = e.to_string();
        }
        Ok(c) => {
            let p = Policy::from_config(&c.policy, "uid:0");
            for name in p.principals.keys() {
                let _ = p.decide(name, &effects, Some("/home/u"));
                if let Some(pp) = p.get(name) {
                    let _ = shoal_policy::landlock::Rules::lower(pp, Some("/home/u"));
                }
            }
        }
    }
}

fn fixed_principal() -> leash_policy::PrincipalPolicy {
    let c = shoal_daemon::config::parse(
        "[policy.principal.\"a\"]\nopaque = \"ask\"\nnet = [\"*.example.org:*\"]\nenv_read = [\"HOME\"]\nfs.write = [\"~/p/**\"]\nfs.read = [\"/**\"]\n",
        std::path::Path::new("f.toml"),
    )
    .expect("fixed policy parses");
    c.policy.principal["a"].clone()
}

/// Effect lists as JSON (what `cap.request` and stored plans carry): parsed,
/// decided under a scoped policy and the local default, named and reported.
pub fn effects(data: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Json>(data) else {
        return;
    };
    let Some(items) = v.as_array() else {
        return;
    };
    let effects: Vec<Effect> = items.iter().filter_map(Effect::from_json).collect();
    let _ = fixed_principal().decide(&effects, Some("/home/u"));
    let _ = leash_policy::local_default().decide(&effects, None);
    let _ = effect::wire_reversibility(&effects);
    let _ = effect::auto_reversible(&effects);
    let at = plan::Place::of(std::path::Path::new("/home/u"), [("PATH", "/usr/bin")]);
    let _ = plan::plan_ref("s", "agent", "src", &effects, &at);
    for e in &effects {
        let _ = effect::normalize_kind(e.kind());
        let _ = e.to_json();
    }
}

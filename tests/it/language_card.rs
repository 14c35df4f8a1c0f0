//! The language card (`docs/language.md`) cannot rot: every example in it runs
//! through the real daemon and must give the result written under it.
//!
//! Convention: in a fenced `shoal` block, the lines before a `# => X` line are
//! one example whose inline render is `X` (for a command, the render of its
//! `.out`); `# !! CODE` means it fails with that error code (`parse_error`
//! for syntax); a `# warning CODE` line after either adds a warning the
//! result must carry. Examples of one block share a session; each block
//! starts fresh in a directory holding `notes.txt` (lines a, b, c),
//! `data.json` and `src/main.rs`. Execs use `position: "value"`, the
//! `shoal_exec` default.

use std::path::Path;

use crate::common::*;
use serde_json::{json, Value};

const CARD: &str = include_str!("../../docs/language.md");

#[derive(Debug)]
struct Example {
    src: String,
    /// Ok(inline) or Err(code).
    want: Result<String, String>,
    warnings: Vec<String>,
    line: usize,
}

/// The `shoal` blocks of the card, each a list of examples.
fn blocks(card: &str) -> Vec<Vec<Example>> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<Example>> = None;
    let mut src = String::new();
    let mut start = 0;
    for (n, line) in card.lines().enumerate() {
        let n = n + 1;
        if cur.is_none() {
            if line.trim() == "```shoal" {
                cur = Some(Vec::new());
                src.clear();
                start = n + 1;
            }
            continue;
        }
        let exs = cur.as_mut().unwrap();
        if line.trim() == "```" {
            assert!(
                src.trim().is_empty(),
                "card line {start}: example without `# =>` or `# !!`: {src:?}"
            );
            out.push(cur.take().unwrap());
            continue;
        }
        let want = if let Some(v) = line.strip_prefix("# => ") {
            Some(Ok(v.to_string()))
        } else {
            line.strip_prefix("# !! ")
                .map(|c| Err(c.trim().to_string()))
        };
        if let Some(want) = want {
            assert!(
                !src.trim().is_empty(),
                "card line {n}: expectation without source"
            );
            exs.push(Example {
                src: std::mem::take(&mut src).trim_end().to_string(),
                want,
                warnings: Vec::new(),
                line: start,
            });
            start = n + 1;
        } else if let Some(code) = line.strip_prefix("# warning ") {
            let last = exs.last_mut().expect("warning after an example");
            last.warnings.push(code.trim().to_string());
            start = n + 1;
        } else {
            src.push_str(line);
            src.push('\n');
        }
    }
    assert!(cur.is_none(), "unclosed shoal block");
    out
}

fn fixture(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("notes.txt"), "a\nb\nc\n").unwrap();
    std::fs::write(
        dir.join("data.json"),
        "{\"name\": \"shoal\", \"tags\": [\"x\", \"y\"]}\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
}

fn codes(ws: Option<&Value>) -> Vec<String> {
    ws.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|w| w["code"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn every_card_example_runs() {
    let blocks = blocks(CARD);
    let total: usize = blocks.iter().map(Vec::len).sum();
    assert!(total >= 40, "only {total} examples");
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut conn = d.conn();
    let mut failures = Vec::new();
    for (b, exs) in blocks.iter().enumerate() {
        let dir = root.path().join(format!("b{b}"));
        fixture(&dir);
        let session = format!("card{b}");
        conn.ok(
            "session.attach",
            json!({"session": session, "client": {"kind": "test", "tty": false},
                   "cwd": dir.to_string_lossy()}),
        );
        for ex in exs {
            let r = conn.call("exec", json!({"src": ex.src, "position": "value"}));
            let (got, warnings) = match r.get("error") {
                Some(e) => {
                    let code = match e["code"].as_i64() {
                        Some(-32001) => "parse_error".to_string(),
                        _ => e["data"]["code"].as_str().unwrap_or("?").to_string(),
                    };
                    (Err(code), codes(e["data"].get("warnings")))
                }
                None => {
                    let res = &r["result"];
                    let mut get = json!({"ref": res["ref"], "format": "inline"});
                    if res["value"]["$"] == json!("outcome") && res["value"]["ok"] == json!(true) {
                        get["path"] = json!(".out");
                    }
                    let v = conn.ok("value.get", get);
                    (
                        Ok(v["inline"].as_str().unwrap_or("").to_string()),
                        codes(res.get("warnings")),
                    )
                }
            };
            if got != ex.want || warnings != ex.warnings {
                failures.push(format!(
                    "card line {}: {:?}\n  want {:?} warnings {:?}\n  got  {:?} warnings {:?}\n  {}",
                    ex.line, ex.src, ex.want, ex.warnings, got, warnings, r
                ));
            }
        }
        let _ = conn.call("session.close", json!({"session": session}));
    }
    assert!(
        failures.is_empty(),
        "{} of {total} card examples failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// An agent reads the card whole: keep it compact.
#[test]
fn card_is_compact() {
    assert!(CARD.len() <= 9 * 1024, "the card is {} bytes", CARD.len());
    assert!(CARD.starts_with("# "), "the card starts with its title");
}

#[test]
fn example_extraction() {
    let card = "x\n```shoal\nlet a = 1\na + 1\n# => 2\nfoo |\n# !! parse_error\necho \"$X\"\n# => \"$X\"\n# warning dollar_in_string\n```\n";
    let b = blocks(card);
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].len(), 3);
    assert_eq!(b[0][0].src, "let a = 1\na + 1");
    assert_eq!(b[0][0].want, Ok("2".to_string()));
    assert_eq!(b[0][1].want, Err("parse_error".to_string()));
    assert_eq!(b[0][2].warnings, ["dollar_in_string"]);
}

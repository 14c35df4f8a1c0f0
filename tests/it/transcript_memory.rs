//! A session's transcript is bounded in memory: past `session.resident_values`
//! the oldest values leave memory and `value.get` reads them back from the
//! journal, paths and slices included.

use crate::common::*;
use serde_json::json;

#[test]
fn old_transcript_values_come_back_from_the_journal() {
    let root = Root::new();
    let cfg = root.path().join("shoal.toml");
    std::fs::write(&cfg, "[session]\nresident_values = 2\n").unwrap();
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    let mut c = d.conn();
    c.attach("bounded");
    c.ok(
        "exec",
        json!({"src": "range(0, 2000).map(x => {n: x, sq: x * x})"}),
    );
    for i in 0..5 {
        c.ok("exec", json!({ "src": format!("{i} + 1") }));
    }
    // out:1 is long out of memory (2 values resident); it still answers.
    let g = c.ok(
        "value.get",
        json!({"ref": "out:1", "path": "[1500].sq", "format": "json"}),
    );
    assert_eq!(g["value"], json!({"$": "int", "v": 2_250_000}), "{g}");
    let s = c.ok("value.get", json!({"ref": "out:1", "slice": [10, 12]}));
    assert_eq!(s["value"]["v"].as_array().map(Vec::len), Some(2), "{s}");
    let inline = c.ok("value.get", json!({"ref": "out:2", "format": "inline"}));
    assert_eq!(inline["inline"], json!("1"));
    // Recent values are still served from memory.
    let last = c.ok("value.get", json!({"ref": "out:6"}));
    assert_eq!(last["value"], json!({"$": "int", "v": 5}));
}

#[test]
fn resident_values_is_validated() {
    let root = Root::new();
    let cfg = root.path().join("bad.toml");
    std::fs::write(&cfg, "[session]\nresident_values = 0\n").unwrap();
    let (code, _out, err) = run(&root, &["config", "check", cfg.to_str().unwrap()], &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("bad.toml:2:19: resident_values must be between"),
        "{err}"
    );
}

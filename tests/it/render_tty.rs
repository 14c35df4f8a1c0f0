//! Scenario 28: a headless client (`tty:false`) gets renders without ANSI
//! escape bytes (SGR and other CSI sequences), a terminal client keeps them.

use crate::common::*;
use serde_json::json;

#[test]
fn headless_renders_are_stripped_terminal_renders_keep_colour() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let src = r"sh { printf '\033[31mred\033[0m \033[2Jdone' }";
    for (tty, want) in [
        (false, "red done".to_string()),
        (true, "\u{1b}[31mred\u{1b}[0m \u{1b}[2Jdone".to_string()),
    ] {
        let mut c = d.conn();
        c.ok(
            "session.attach",
            json!({"session": format!("tty-{tty}"), "client": {"kind": "test", "tty": tty}}),
        );
        let r = c.ok("exec", json!({ "src": src }));
        assert_eq!(r["render"], json!(want), "exec render, tty {tty}");
        let g = c.ok("value.get", json!({"ref": r["ref"], "format": "render"}));
        assert_eq!(g["render"], json!(want), "value.get render, tty {tty}");
    }
    // Plain text is untouched by stripping.
    let mut c = d.conn();
    c.attach("plain");
    let r = c.ok("exec", json!({"src": "\"no escapes [here]\""}));
    assert_eq!(r["render"], json!("no escapes [here]"));
}

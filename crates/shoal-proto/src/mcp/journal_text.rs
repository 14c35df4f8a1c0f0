//! What a model reads of a `shoal_journal` result: two or three lines an
//! entry (when, how it ended, where, who; the source; its effects, a
//! program named by its path rather than its 64-hex hash), newest as the
//! query gave them. The structured content keeps every member.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::{Map, Value as Json};

use super::outputs::JournalResult;
use super::results::ToolOutput;

/// Source lines an entry shows at most (then `…`).
const SRC_LINES: usize = 3;
/// Effects an entry names at most (then how many more).
const EFFECTS: usize = 6;

impl ToolOutput for JournalResult {
    fn text(&self) -> Option<Cow<'_, str>> {
        if self.entries.is_empty() {
            return Some(Cow::Borrowed("no journal entries match"));
        }
        let mut t = String::new();
        for e in &self.entries {
            entry_text(e, &mut t);
        }
        if let Some(more) = self.more {
            let _ = writeln!(
                t,
                "… {more} more entries left off: narrow with `limit`, `since` or `until`"
            );
        }
        t.pop();
        Some(Cow::Owned(t))
    }
}

fn entry_text(e: &Map<String, Json>, t: &mut String) {
    let s = |k: &str| e.get(k).and_then(Json::as_str).unwrap_or("");
    let id = e.get("id").and_then(Json::as_u64).unwrap_or(0);
    let when = e
        .get("ts")
        .and_then(Json::as_i64)
        .map(shoal_policy::plan::rfc3339)
        .unwrap_or_default();
    // `ok` is the exec's, not a command's: a failed command kept as a
    // value (the MCP default) raised nothing.
    let ended = match (e.get("ok").and_then(Json::as_bool), e.get("status")) {
        (None, _) => "running".to_string(),
        (Some(true), _) => "no error raised".to_string(),
        (Some(false), Some(Json::Number(n))) => format!("raised an error (exit status {n})"),
        (Some(false), _) => "raised an error".to_string(),
    };
    let _ = write!(t, "#{id} · {when} · {ended}");
    if let Some(ns) = e.get("dur_ns").and_then(Json::as_i64) {
        let _ = write!(t, " · {}", duration(ns));
    }
    let cwd = e
        .get("cwd")
        .and_then(|c| c.get("display"))
        .and_then(Json::as_str)
        .unwrap_or("");
    let _ = writeln!(t, " · {} · {} · in {cwd}", s("session"), s("principal"));
    let src = s("src");
    let lines: Vec<&str> = src.lines().collect();
    for l in lines.iter().take(SRC_LINES) {
        let _ = writeln!(t, "  $ {l}");
    }
    if lines.len() > SRC_LINES {
        let _ = writeln!(t, "  … ({} more lines)", lines.len() - SRC_LINES);
    }
    let effects: Vec<String> = e
        .get("effects")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .map(effect_text)
        .collect();
    if !effects.is_empty() {
        let shown = effects.len().min(EFFECTS);
        let _ = write!(t, "  effects: {}", effects[..shown].join("; "));
        if effects.len() > shown {
            let _ = write!(t, "; … {} more", effects.len() - shown);
        }
        t.push('\n');
    }
}

/// `fs_write /a/b`, `proc_spawn /usr/bin/git`, `net_connect host:443`.
pub(super) fn effect_text(e: &Json) -> String {
    let kind = e.get("kind").and_then(Json::as_str).unwrap_or("?");
    let strs = |k: &str| -> Vec<String> {
        e.get(k)
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect()
    };
    let what = match kind {
        "fs_read" | "fs_write" | "fs_delete" => strs("paths").join(", "),
        "env_read" | "env_write" | "secret_use" => strs("names").join(", "),
        "proc_spawn" => e
            .get("argv0")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string(),
        "net_connect" => format!(
            "{}:{}",
            e.get("host").and_then(Json::as_str).unwrap_or(""),
            e.get("port").and_then(Json::as_u64).unwrap_or(0)
        ),
        "net_listen" => format!(":{}", e.get("port").and_then(Json::as_u64).unwrap_or(0)),
        _ => String::new(),
    };
    if what.is_empty() {
        kind.to_string()
    } else {
        format!("{kind} {what}")
    }
}

/// `17 ms`, `2.4 s`, `3 min 5 s`.
fn duration(ns: i64) -> String {
    let ms = ns / 1_000_000;
    match ms {
        ..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{}.{} s", ms / 1000, ms % 1000 / 100),
        _ => format!("{} min {} s", ms / 60_000, ms % 60_000 / 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(v: Json) -> Map<String, Json> {
        match v {
            Json::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn entries_read_as_lines_with_paths_not_hashes() {
        let r = JournalResult {
            entries: vec![
                entry(json!({"id": 16, "session": "default", "principal": "uid:0",
                    "ts": 1_796_670_665_266_586_138_i64, "dur_ns": 17_249_564,
                    "cwd": {"display": "/w"}, "src": "git status",
                    "effects": [{"kind": "fs_read", "paths": ["/w"]},
                        {"kind": "proc_spawn", "bin_hash": "d41f".repeat(16), "argv0": "/usr/bin/git"}],
                    "status": 0, "ok": true, "opaque": false, "outputs": []})),
                entry(json!({"id": 17, "session": "s", "principal": "agent:a",
                    "ts": 1_796_670_665_266_586_138_i64, "dur_ns": 2_400_000_000_i64,
                    "cwd": {"display": "/w"}, "src": "make\nmake test\nls\nls -l",
                    "effects": [], "status": 2, "ok": false, "opaque": true, "outputs": []})),
            ],
            truncated: Some(true),
            more: Some(5),
        };
        let t = r.text().unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("#16 · 2026-")
                && lines[0].ends_with(" · no error raised · 17 ms · default · uid:0 · in /w"),
            "{t}"
        );
        assert_eq!(lines[1], "  $ git status");
        assert_eq!(lines[2], "  effects: fs_read /w; proc_spawn /usr/bin/git");
        assert!(
            lines[3].contains("raised an error (exit status 2) · 2.4 s"),
            "{t}"
        );
        assert_eq!(lines[7], "  … (1 more lines)");
        assert!(!t.contains("d41f"), "{t}");
        assert!(t.ends_with("5 more entries left off: narrow with `limit`, `since` or `until`"));
        let none = JournalResult {
            entries: vec![],
            truncated: None,
            more: None,
        };
        assert_eq!(none.text().unwrap(), "no journal entries match");
    }
}

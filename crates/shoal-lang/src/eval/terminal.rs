//! A command here has no terminal: its output is captured and its input is
//! empty (docs/rules.md §8). A full-screen program run that way waits for a
//! key that never comes, so it is refused with the way that works (a PTY);
//! and git, which starts an editor for a message it was not given, gets one
//! that fails at once and says what to pass instead.

use std::ffi::OsString;

use indexmap::IndexMap;
use shoal_value::{ErrorCode, ShoalError};

/// The editor git starts for a command here (`GIT_EDITOR`, and
/// `GIT_SEQUENCE_EDITOR` for `rebase -i`), unless the environment names one.
/// Git runs it with `sh -c`, the file to edit appended: `:` ignores it, and
/// git's own error quotes this line (so: words only, nothing `sh` reads as
/// syntax).
const NO_EDITOR: &str = ": a shoal command has no terminal for an editor, so pass the message \
     with -m, or run it in a terminal with shoal_pty_open; false";

/// Full-screen programs, and the arguments that make each one run without a
/// terminal (batch modes, `--version`).
const FULL_SCREEN: &[(&str, &[&str])] = &[
    (
        "vi",
        &["-e", "-es", "-E", "-Es", "-s", "--version", "--help", "-h"],
    ),
    (
        "vim",
        &["-e", "-es", "-E", "-Es", "-s", "--version", "--help", "-h"],
    ),
    ("view", &["--version", "--help", "-h"]),
    (
        "nvim",
        &[
            "-e",
            "-es",
            "-E",
            "-Es",
            "-s",
            "--headless",
            "--version",
            "--help",
            "-h",
        ],
    ),
    ("nano", &["--version", "--help", "-V", "-h"]),
    ("pico", &["--version", "--help", "-h"]),
    ("micro", &["-version", "--version", "-help", "--help"]),
    (
        "emacs",
        &["--batch", "-batch", "--script", "--version", "--help"],
    ),
    ("top", &["-b", "-bn1", "-v", "-h"]),
    ("htop", &["--version", "--help", "-V", "-h"]),
    ("btop", &["--version", "--help", "-v", "-h"]),
];

/// The refusal of running `head` with `args` here, when it is a full-screen
/// program asked to run as one.
pub(super) fn refusal(head: &str, args: &[OsString]) -> Option<ShoalError> {
    let name = std::path::Path::new(head).file_name()?.to_str()?;
    let (_, batch) = FULL_SCREEN.iter().find(|(p, _)| *p == name)?;
    if args
        .iter()
        .any(|a| a.to_str().is_some_and(|a| batch.contains(&a)))
    {
        return None;
    }
    let open = serde_json::json!({
        "cmd": head,
        "args": args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>(),
    });
    Some(
        ShoalError::new(
            ErrorCode::Custom,
            format!("`{name}` needs a terminal, and a command here has none (it would wait for keys that never come)"),
        )
        .with_hint(format!(
            "run it in a terminal: shoal_pty_open {open}, then shoal_pty_send and shoal_pty_read; or use a non-interactive form (cat, sed -i, git commit -m)"
        )),
    )
}

/// Give git an editor that fails at once, unless `env` names one.
pub(super) fn no_editor(env: &mut IndexMap<String, String>) {
    for key in ["GIT_EDITOR", "GIT_SEQUENCE_EDITOR"] {
        if !env.contains_key(key) {
            env.insert(key.into(), NO_EDITOR.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn full_screen_programs_are_refused_unless_run_in_batch() {
        let e = refusal("vim", &args(&["notes.txt"])).unwrap();
        assert!(e.msg.contains("`vim` needs a terminal"), "{}", e.msg);
        let hint = e.hint.unwrap();
        assert!(
            hint.contains(r#"shoal_pty_open {"cmd":"vim","args":["notes.txt"]}"#),
            "{hint}"
        );
        assert!(refusal("/usr/bin/nano", &args(&[])).is_some());
        assert!(refusal("vim", &args(&["-es", "-c", "wq", "f"])).is_none());
        assert!(refusal("emacs", &args(&["--batch", "-l", "x.el"])).is_none());
        assert!(refusal("top", &args(&["-b", "-n", "1"])).is_none());
        assert!(refusal("less", &args(&["f"])).is_none());
        assert!(refusal("git", &args(&["commit"])).is_none());
    }

    #[test]
    fn git_gets_an_editor_that_fails_unless_one_is_named() {
        let mut env = IndexMap::new();
        env.insert("GIT_SEQUENCE_EDITOR".to_string(), "true".to_string());
        no_editor(&mut env);
        assert_eq!(env["GIT_EDITOR"], NO_EDITOR);
        assert_eq!(env["GIT_SEQUENCE_EDITOR"], "true");
        // As git runs it: it fails, saying nothing of its own (no syntax error).
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                &format!("{NO_EDITOR} \"$@\""),
                "editor",
                ".git/COMMIT_EDITMSG",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    }
}

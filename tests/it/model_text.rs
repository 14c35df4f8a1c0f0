//! What the model sees (docs/rules.md §12): the text of a `shoal_exec`
//! result (`content[0].text`) and what `shoal exec` prints says when a
//! command failed (status or signal first, then a bounded stderr tail),
//! shows a successful command's stderr after its output, and renders tables
//! without a terminal width (cells cut only past 200 characters, saying so).

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::*;
use serde_json::{json, Value};

/// A git repository with one commit whose subject is 100 characters long.
fn repo(root: &Root) -> (std::path::PathBuf, String) {
    let dir = root.path().join("repo");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(dir.join("Makefile"), "all:\n\t@echo built\n").unwrap();
    let subject = format!("Fix the parser so {} ok", "x".repeat(100 - 21));
    assert_eq!(subject.len(), 100);
    for args in [
        vec!["init", "-q", "-b", "main"],
        vec!["add", "."],
        vec!["commit", "-qm", &subject],
    ] {
        let st = Command::new("git")
            .args(&args)
            .current_dir(&dir)
            .env("HOME", root.path())
            .env("GIT_AUTHOR_NAME", "Ann Author")
            .env("GIT_AUTHOR_EMAIL", "ann@example.com")
            .env("GIT_COMMITTER_NAME", "Ann Author")
            .env("GIT_COMMITTER_EMAIL", "ann@example.com")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    }
    (dir, subject)
}

/// A `shoal_exec` call: (content[0].text, the whole result).
fn exec(m: &mut Conn, src: &str) -> (String, Value) {
    let r = m.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": src}}),
    );
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    (text.to_string(), r)
}

fn mcp_in(d: &Daemon, session: &str, dir: &Path) -> Conn {
    let mut m = d.mcp_legacy(session);
    let (text, _) = exec(&mut m, &format!("cd \"{}\"", dir.display()));
    assert!(text.ends_with("repo"), "{text}");
    m
}

#[test]
fn a_failure_says_so_in_its_first_line_with_stderr() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let (dir, _) = repo(&root);
    let mut m = mcp_in(&d, "fail", &dir);
    for (src, want) in [
        (
            "make nosuchtarget",
            "exit status 2\n--- stderr ---\nmake: *** No rule to make target 'nosuchtarget'.  Stop.",
        ),
        (
            "git checkout nosuch",
            "exit status 1\n--- stderr ---\nerror: pathspec 'nosuch' did not match any file(s) known to git",
        ),
        ("grep zzz a.txt", "exit status 1"),
        ("sh { exit 3 }", "exit status 3"),
        (
            "sh { echo partial; echo bad >&2; exit 4 }",
            "exit status 4\npartial\n--- stderr ---\nbad",
        ),
        (
            "sh { echo before; kill -KILL $$ }",
            "killed by signal SIGKILL\nbefore",
        ),
    ] {
        let (text, r) = exec(&mut m, src);
        assert_eq!(text, want, "{src}: {r}");
        // A value, not a tool error; the structured content is unchanged.
        assert_eq!(r["isError"], json!(false), "{src}");
        assert_eq!(r["structuredContent"]["value"]["ok"], json!(false), "{src}");
    }
    // A command that succeeds and prints nothing says so: an empty text
    // reads as no answer.
    for src in ["^true", "touch -t 202001010000 a.txt"] {
        let (text, r) = exec(&mut m, src);
        assert_eq!(text, "(no output)", "{src}: {r}");
        assert_eq!(r["structuredContent"]["render"], json!(""), "{src}");
    }
    // In statement position the failure is a tool error; its text ends with
    // the same stderr section.
    let r = m.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "make nosuchtarget", "position": "stmt"}}),
    );
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(
        text.ends_with("\n--- stderr ---\nmake: *** No rule to make target 'nosuchtarget'.  Stop."),
        "{text}"
    );
}

#[test]
fn stderr_is_shown_after_output_and_bounded() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let (dir, _) = repo(&root);
    let mut m = mcp_in(&d, "stderr", &dir);
    let (text, r) = exec(&mut m, "sh { echo out; echo warn >&2 }");
    assert_eq!(text, "out\n--- stderr ---\nwarn", "{r}");
    assert_eq!(r["structuredContent"]["value"]["ok"], json!(true));
    // No stderr, no section.
    assert_eq!(exec(&mut m, "sh { echo out }").0, "out");
    // The first 3 and the last 17 of 30 lines.
    let (text, _) = exec(
        &mut m,
        "sh { i=1; while [ $i -le 30 ]; do echo \"warning $i\" >&2; i=$((i+1)); done; exit 1 }",
    );
    let want: Vec<String> = (14..=30).map(|i| format!("warning {i}")).collect();
    assert_eq!(
        text,
        format!(
            "exit status 1\n--- stderr (first 3 and last 17 of 30 lines) ---\n\
             warning 1\nwarning 2\nwarning 3\n\u{2026} (10 lines left out) \u{2026}\n{}",
            want.join("\n")
        )
    );
    // A big output never pushes the status line or the stderr out of the text.
    let (text, _) = exec(&mut m, "sh { seq 1 40000; echo oops >&2; exit 1 }");
    assert!(text.starts_with("exit status 1\n1\n2\n"), "{}", &text[..40]);
    assert!(
        text.ends_with("\n--- stderr ---\noops"),
        "{}",
        &text[text.len() - 200..]
    );
    assert!(text.len() <= 65536, "{}", text.len());
    // At most 2 KiB: a 5 KiB stderr keeps its first lines cut and its end.
    let (text, _) = exec(
        &mut m,
        "sh { i=1; while [ $i -le 10 ]; do printf '%0500d\\n' $i >&2; i=$((i+1)); done }",
    );
    let (header, rest) = text.split_once('\n').unwrap();
    assert_eq!(
        header, "--- stderr (first 3 and last 2 of 10 lines) ---",
        "{text}"
    );
    assert!(rest.len() <= 2048, "{}", rest.len());
    assert!(rest.ends_with(&format!("{:0500}", 10)), "{text}");
}

#[test]
fn tables_have_no_terminal_width() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let (dir, subject) = repo(&root);
    let mut m = mcp_in(&d, "tables", &dir);

    // git log: the whole hash, date and 100-character subject.
    let (text, r) = exec(&mut m, "git log");
    let log = &r["structuredContent"]["value"]["out"]["cols"];
    let hash = log["hash"][0]["v"].as_str().unwrap();
    assert_eq!(hash.len(), 40, "{r}");
    let row = text.lines().nth(2).unwrap_or_default();
    assert!(row.starts_with(hash), "{text}");
    assert!(row.ends_with(&subject), "{text}");
    assert!(row.contains("Ann Author"), "{text}");
    assert!(!text.contains('…'), "{text}");

    // ls: `name` without the redundant `path`; the value keeps both.
    let (text, r) = exec(&mut m, "ls");
    let header = text.lines().next().unwrap_or_default();
    assert!(header.starts_with("name "), "{text}");
    assert!(!header.contains("path"), "{text}");
    assert!(text.contains("a.txt"), "{text}");
    let cols = &r["structuredContent"]["value"]["out"]["cols"];
    assert!(cols["path"].is_array() && cols["name"].is_array(), "{r}");

    // rm: the trash path (the way back) arrives whole.
    let (text, r) = exec(&mut m, "rm a.txt");
    let trash = r["structuredContent"]["value"]["out"]["v"][0]["v"]["trash"]["v"]
        .as_str()
        .unwrap_or_else(|| panic!("no trash path in {r}"))
        .to_string();
    assert!(trash.len() > 20, "{trash}");
    assert!(text.contains(&trash), "{text}");
    assert!(!text.contains('…'), "{text}");

    // A cell over 200 characters is cut, and the text says where the rest is.
    let long = "y".repeat(300);
    let (text, r) = exec(&mut m, &format!("[{{k: 1, v: \"{long}\"}}]"));
    let reference = r["structuredContent"]["ref"].as_str().unwrap().to_string();
    let row = text.lines().nth(2).unwrap_or_default();
    assert_eq!(row, format!("1  {}…", "y".repeat(199)), "{text}");
    assert_eq!(
        text.lines().last().unwrap_or_default(),
        format!("cells over 200 characters cut; shoal_get {reference} for all")
    );
    // ... and shoal_get's render has it whole.
    let g = m.ok(
        "tools/call",
        json!({"name": "shoal_get", "arguments": {"ref": reference, "format": "render"}}),
    );
    let got = g["content"][0]["text"].as_str().unwrap_or_default();
    assert!(got.contains(&long), "{g}");
    assert!(!got.contains('…'), "{g}");
}

/// `shoal exec` with stdout a pipe prints the same text.
#[test]
fn shoal_exec_prints_the_same_text() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let (dir, subject) = repo(&root);
    let sock = d.socket.to_str().unwrap().to_string();
    let run_in = |args: &[&str]| {
        let out = root
            .command()
            .arg("exec")
            .arg("--socket")
            .arg(&sock)
            .args(args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = run_in(&["--value", "make nosuchtarget"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        "exit status 2\n--- stderr ---\nmake: *** No rule to make target 'nosuchtarget'.  Stop.\n"
    );
    let (_, out) = run_in(&["sh { echo out; echo warn >&2 }"]);
    assert_eq!(out, "out\n--- stderr ---\nwarn\n");
    let (_, out) = run_in(&["git log"]);
    let row = out.lines().nth(2).unwrap_or_default();
    assert!(row.ends_with(&subject), "{out}");
    assert!(!out.contains('…'), "{out}");
}

/// A glob that matched nothing is left out of an external command's
/// arguments (docs/rules.md §8); the text says so, and how to pass it as
/// written, after the command's own output.
#[test]
fn a_glob_that_matched_nothing_says_so() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let (dir, _) = repo(&root);
    let mut m = mcp_in(&d, "globs", &dir);
    let (text, _) = exec(&mut m, "grep -rn alpha --include=*.py .");
    let note = "note: `--include=*.py` matched nothing and was left out (quote it to pass it \
                as written: '--include=*.py')";
    assert!(text.starts_with("./a.txt:1:alpha"), "{text}");
    assert!(text.ends_with(&format!("--- stderr ---\n{note}")), "{text}");
    // Quoted, it reaches grep as written.
    let (text, _) = exec(&mut m, "grep -rn alpha '--include=*.py' .");
    assert!(text.starts_with("exit status 1"), "{text}");
    // A failure shows it beside the program's own complaint.
    let (text, _) = exec(&mut m, "find . -name *.rs");
    assert!(text.starts_with("exit status 1"), "{text}");
    assert!(text.contains("note: `*.rs` matched nothing"), "{text}");
}

/// A command has no terminal: an editor git would start fails at once and
/// says what to pass, and a full-screen program is refused with the PTY
/// call that runs it (both used to wait for keys that never came).
#[test]
fn programs_that_want_a_terminal_say_so_at_once() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let (dir, _) = repo(&root);
    let mut m = mcp_in(&d, "terminal", &dir);
    let (text, _) = exec(
        &mut m,
        "git -c user.name=a -c user.email=a@example.com commit --allow-empty",
    );
    assert!(text.starts_with("exit status 1"), "{text}");
    assert!(text.contains("pass the message with -m"), "{text}");
    assert!(!text.contains("Syntax error"), "{text}");
    let (text, r) = exec(&mut m, "vim notes.txt");
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(text.contains("`vim` needs a terminal"), "{text}");
    assert!(
        text.contains(r#"shoal_pty_open {"cmd":"vim","args":["notes.txt"]}"#),
        "{text}"
    );
    // Refused before anything runs: vim need not be installed.
    assert!(!dir.join("notes.txt").exists());
}

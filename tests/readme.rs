//! The README's examples run: every fenced block with the info string `console` in
//! README.md is a transcript. A line starting with `$ ` is a command, run by `bash` in a
//! private root (its own XDG dirs, so the first `shoal` call starts a daemon of its own);
//! the lines up to the next command are its expected output, stdout and stderr together.
//! In an expected line `[..]` stands for any text within the line, and a line that is
//! just `...` for any number of lines (none included). Trailing blanks are ignored.
//! The daemon the commands started is killed (by pid, found in /proc) at the end.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{daemons_on, kill_pid, Root, BIN};

/// One `$ ` command of a console block and the output it must print.
struct Step {
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// The commands of every `console` block of `text`, in order.
fn console_steps(text: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut in_console = false;
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.strip_prefix("```") {
            in_console = !in_console && info.trim() == "console";
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step {
                line: i + 1,
                command: command.to_string(),
                expected: Vec::new(),
            });
        } else {
            let step = steps
                .last_mut()
                .unwrap_or_else(|| panic!("README.md:{}: output before any `$ ` line", i + 1));
            step.expected.push(line.trim_end().to_string());
        }
    }
    steps
}

/// `actual` matches `pattern`, where each `[..]` in `pattern` matches any text.
fn line_matches(pattern: &str, actual: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(at) => rest = &rest[at + mid.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// `actual` lines match `expected` lines, `...` matching any run of lines.
fn lines_match(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e == "..." => {
            (0..=actual.len()).any(|k| lines_match(rest, &actual[k..]))
        }
        Some((e, rest)) => actual
            .split_first()
            .is_some_and(|(a, more)| line_matches(e, a) && lines_match(rest, more)),
    }
}

/// Run one README command in `dir` with the root's private environment and `shoal` on
/// `PATH`; its stdout and stderr, interleaved as written.
fn run_step(root: &Root, dir: &Path, command: &str) -> String {
    let bin_dir = Path::new(BIN).parent().expect("the binary's directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let base = root.command();
    let mut cmd = Command::new("bash");
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd
        .arg("--noprofile")
        .arg("--norc")
        .arg("-c")
        .arg(format!("{{ {command}\n}} 2>&1"))
        .env("PATH", path)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run bash");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn readme_console_blocks_run_as_written() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let steps = console_steps(&readme);
    assert!(
        steps.len() >= 10,
        "README.md has only {} console commands: are the blocks still marked `console`?",
        steps.len()
    );
    let root = Root::new();
    let work = root.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let socket = root.path().join("run/shoal/shoal.sock");
    let mut failures = Vec::new();
    for step in &steps {
        let out = run_step(&root, &work, &step.command);
        let actual: Vec<&str> = out.lines().map(str::trim_end).collect();
        if !lines_match(&step.expected, &actual) {
            failures.push(format!(
                "README.md:{}: $ {}\n--- expected\n{}\n--- got\n{}",
                step.line,
                step.command,
                step.expected.join("\n"),
                actual.join("\n")
            ));
        }
    }
    let daemons = daemons_on(&socket);
    for pid in &daemons {
        kill_pid(*pid);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(daemons.len(), 1, "the first command starts one daemon");
}

#[test]
fn the_matcher_is_strict_where_it_should_be() {
    let lines = |s: &[&str]| s.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert!(line_matches("pid [..] · up [..]", "pid 42 · up 3s"));
    assert!(!line_matches("pid [..] · up", "pid 42 · up 3s"));
    assert!(!line_matches("42", "43"));
    assert!(lines_match(
        &lines(&["a", "...", "d"]),
        &["a", "b", "c", "d"]
    ));
    assert!(lines_match(&lines(&["a", "...", "d"]), &["a", "d"]));
    assert!(!lines_match(&lines(&["a", "d"]), &["a", "b", "d"]));
    assert!(!lines_match(&lines(&["a"]), &["a", "extra"]));
    assert!(!lines_match(&lines(&[]), &["unexpected output"]));
}

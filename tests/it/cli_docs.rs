//! The CLI's generated documents: `shoal completions SHELL` and `shoal man`, both generated
//! from the clap definition in `src/main.rs`. Runs the real binary; needs no daemon and
//! starts none.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::{run, Root};

/// Every subcommand `shoal --help` lists, so the checks follow the CLI as it grows.
fn subcommands(root: &Root) -> Vec<String> {
    let (st, out, err) = run(root, &["--help"], &[]);
    assert_eq!(st, 0, "{err}");
    let mut names = Vec::new();
    let mut in_commands = false;
    for line in out.lines() {
        if line.starts_with("Commands:") {
            in_commands = true;
            continue;
        }
        if in_commands {
            if !line.starts_with("  ") {
                break;
            }
            let name = line.split_whitespace().next().unwrap_or_default();
            if name != "help" {
                names.push(name.to_string());
            }
        }
    }
    assert!(names.len() >= 10, "too few subcommands in --help:\n{out}");
    names
}

/// What bash's programmable completion offers for `words` (the last one being completed),
/// with the generated script sourced in a real `bash`.
fn bash_complete(script: &str, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let driver = format!(
        "{script}\nCOMP_WORDS=({words})\nCOMP_CWORD={cword}\nCOMP_LINE=\"${{COMP_WORDS[*]}}\"\n\
         COMP_POINT=${{#COMP_LINE}}\n_shoal shoal \"${{COMP_WORDS[COMP_CWORD]}}\" \
         \"${{COMP_WORDS[COMP_CWORD-1]}}\"\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        words = quoted.join(" "),
        cword = words.len() - 1,
    );
    let mut child = Command::new("bash")
        .arg("--noprofile")
        .arg("--norc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bash");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(driver.as_bytes())
        .unwrap();
    let out = child.wait_with_output().expect("bash");
    assert!(
        out.status.success(),
        "bash failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completion_offers_every_subcommand_and_their_flags() {
    let root = Root::new();
    let (st, script, err) = run(&root, &["completions", "bash"], &[]);
    assert_eq!(st, 0, "{err}");
    let offered = bash_complete(&script, &["shoal", ""]);
    for name in subcommands(&root) {
        assert!(offered.contains(&name), "{name} not offered: {offered:?}");
    }
    assert_eq!(bash_complete(&script, &["shoal", "sta"]), vec!["status"]);
    let flags = bash_complete(&script, &["shoal", "exec", "--"]);
    for flag in ["--session", "--json", "--socket"] {
        assert!(flags.iter().any(|f| f == flag), "{flag} not in {flags:?}");
    }
}

#[test]
fn zsh_and_fish_completions_name_every_subcommand() {
    let root = Root::new();
    let names = subcommands(&root);
    let (st, zsh, err) = run(&root, &["completions", "zsh"], &[]);
    assert_eq!(st, 0, "{err}");
    assert!(zsh.starts_with("#compdef shoal"), "{zsh}");
    let (st, fish, err) = run(&root, &["completions", "fish"], &[]);
    assert_eq!(st, 0, "{err}");
    for name in &names {
        assert!(zsh.contains(&format!("'{name}:")), "zsh lacks {name}");
        assert!(
            fish.contains(&format!("-a \"{name}\"")),
            "fish lacks {name}"
        );
    }
    let (st, _, err) = run(&root, &["completions", "tcsh"], &[]);
    assert_eq!(st, 2, "an unknown shell is a usage error");
    assert!(err.contains("possible values"), "{err}");
}

#[test]
fn the_man_page_renders_and_lists_every_subcommand() {
    let root = Root::new();
    let (st, page, err) = run(&root, &["man"], &[]);
    assert_eq!(st, 0, "{err}");
    assert!(page.contains(".TH shoal 1"), "{page}");
    // groff renders it without a warning, and the rendered text names each subcommand.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shoal.1");
    std::fs::write(&file, &page).unwrap();
    let out = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(&file)
        .output()
        .expect("groff");
    assert!(out.status.success());
    let warnings = String::from_utf8_lossy(&out.stderr);
    assert!(warnings.is_empty(), "groff warnings:\n{warnings}");
    let text = Command::new("groff")
        .args(["-man", "-Tascii", "-P-c", "-P-b", "-P-u"])
        .arg(&file)
        .output()
        .expect("groff");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("SUBCOMMANDS"), "{text}");
    for name in subcommands(&root) {
        assert!(
            text.contains(&format!("shoal-{name}")),
            "man page lacks {name}:\n{text}"
        );
    }
}

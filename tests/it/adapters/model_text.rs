//! What the model sees of adapted commands: the agent's flags win (an
//! unmodelled flag runs the tool as written), `git diff` is the patch, a
//! typed result names its `^raw` form, a clean `git status` shows the
//! branch, and `head`/`tail`/`cat` agree.

use super::*;

/// A repository with six commits (long subjects) and one modified file.
fn history_repo() -> tempfile::TempDir {
    let d = tmp();
    let mut script = String::from(
        "git init -q -b main && git config user.email t@example.com && git config user.name Tess",
    );
    for i in 1..=6 {
        script.push_str(&format!(
            " && echo line{i} >> tracked.txt && git add . && git commit -q -m 'commit number {i} with a subject long enough to be cut in a narrow table'"
        ));
    }
    script.push_str(" && echo changed >> tracked.txt && sed -i 's/line1/first/' tracked.txt");
    sh(d.path(), &script);
    d
}

/// `content[0].text` of one `shoal_exec` run in `dir`.
fn mcp_text(m: &mut Conn, dir: &Path, src: &str) -> String {
    let src = format!("cd '{}'; {src}", dir.display());
    let r = m.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": src}}),
    );
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn mcp_conn(d: &Daemon) -> Conn {
    let mut m = d.conn();
    m.ok("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
    m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    m
}

const TYPED: &str = "typed by the git adapter; raw text: ";

#[test]
fn mcp_text_keeps_the_agents_flags_and_the_patch() {
    let root = Root::new();
    let repo = history_repo();
    let d = Daemon::start(&root);
    let mut m = mcp_conn(&d);
    let dir = repo.path();

    // --oneline: git's own text, five whole lines, no typed line.
    let t = mcp_text(&mut m, dir, "git log --oneline -5");
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 5, "{t}");
    for l in &lines {
        let (hash, subject) = l.split_once(' ').unwrap_or_default();
        assert!(
            hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit()),
            "{t}"
        );
        assert!(
            subject.starts_with("commit number ")
                && subject.ends_with("long enough to be cut in a narrow table"),
            "{t}"
        );
    }
    assert!(!t.contains(TYPED), "{t}");

    // A typed log says so, last, naming the raw form as written.
    let t = mcp_text(&mut m, dir, "git log -5");
    assert_eq!(
        t.lines().last(),
        Some(format!("{TYPED}^git log -5").as_str()),
        "{t}"
    );
    // ...and the raw form works: git's own text.
    let t = mcp_text(&mut m, dir, "^git log -5");
    assert_eq!(t.matches("\ncommit ").count() + 1, 5, "{t}");
    assert!(t.starts_with("commit ") && !t.contains(TYPED), "{t}");

    // git diff (and -p) is the patch itself, typed.
    for src in ["git diff", "git diff -p"] {
        let t = mcp_text(&mut m, dir, src);
        assert!(
            t.starts_with("diff --git a/tracked.txt b/tracked.txt"),
            "{src}: {t}"
        );
        assert!(t.contains("\n@@ -1,6 +1,7 @@"), "{src}: {t}");
        assert!(
            t.contains("\n-line1\n+first\n") && t.contains("\n+changed\n"),
            "{src}: {t}"
        );
        assert_eq!(
            t.lines().last(),
            Some(format!("{TYPED}^{src}").as_str()),
            "{src}: {t}"
        );
    }
    // An unmodelled flag: git's text as written.
    let t = mcp_text(&mut m, dir, "git diff --stat");
    assert!(
        t.contains("tracked.txt |") && t.contains("1 file changed") && !t.contains(TYPED),
        "{t}"
    );

    // git log -p keeps its patches.
    let t = mcp_text(&mut m, dir, "git log -p -2");
    assert_eq!(t.matches("diff --git a/tracked.txt").count(), 2, "{t}");
    assert!(
        t.contains("\n+line6") && t.contains("\n+line5") && t.contains("@@"),
        "{t}"
    );
    assert!(!t.contains(TYPED), "{t}");

    // git show: the commit and its patch.
    let t = mcp_text(&mut m, dir, "git show HEAD");
    assert!(
        t.starts_with("commit ") && t.contains("\n+line6") && t.contains("\n@@ "),
        "{t}"
    );
    assert_eq!(
        t.lines().last(),
        Some(format!("{TYPED}^git show HEAD").as_str()),
        "{t}"
    );

    // A dirty status lists the file; a clean one shows the branch, never `[]`.
    let t = mcp_text(&mut m, dir, "git status");
    assert!(
        t.starts_with("on branch main\n") && t.contains("tracked.txt"),
        "{t}"
    );
    sh(dir, "git checkout -q -- tracked.txt");
    let t = mcp_text(&mut m, dir, "git status");
    assert_eq!(
        t,
        format!("on branch main; nothing to commit, working tree clean\n{TYPED}^git status"),
    );
    let t = mcp_text(&mut m, dir, "git status -s");
    assert!(t.is_empty() || !t.contains(TYPED), "{t}");
}

#[test]
fn git_diff_is_typed_as_files_with_hunks() {
    let repo = history_repo();
    let mut s = session(repo.path());
    sh(repo.path(), "echo new > added.txt && git add added.txt");
    let diff = eval(&mut s, "git diff HEAD");
    assert_eq!(
        columns(&diff),
        ["path", "old_path", "status", "binary", "added", "deleted", "hunks"]
    );
    assert_eq!(
        inline(&mut s, "(git diff HEAD).map(.path)"),
        format!(
            "[{}, {}]",
            render::inline(&Value::path("added.txt")),
            render::inline(&Value::path("tracked.txt"))
        )
    );
    assert_eq!(
        inline(&mut s, "(git diff HEAD).map(.status)"),
        r#"["added", "modified"]"#
    );
    assert_eq!(
        inline(&mut s, "(git diff).first().hunks.first().lines"),
        r#"["-line1", "+first", " line2", " line3", " line4", " line5", " line6", "+changed"]"#
    );
    assert_eq!(
        inline(
            &mut s,
            "[(git diff).first().added, (git diff).first().deleted]"
        ),
        "[2, 1]"
    );
    // The outcome's render is the patch text; `.stdout` is git's bytes.
    let Value::Outcome(o) = &diff else {
        panic!("not an outcome")
    };
    let raw = String::from_utf8_lossy(&o.stdout.read_all().expect("stdout")).into_owned();
    let r = render::block(&diff, 80);
    assert_eq!(r, format!("{}\n{TYPED}^git diff HEAD", raw.trim_end()));
    // An unmodelled flag: the text, untyped.
    assert!(matches!(&eval(&mut s, "git diff --numstat"), Value::Outcome(o) if o.typed.is_none()));
    assert!(
        matches!(&eval(&mut s, "(git diff --numstat).out"), Value::Str(t) if t.contains("tracked.txt"))
    );
}

#[test]
fn the_card_and_the_instructions_teach_the_raw_form() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut m = d.conn();
    let init = m.ok("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
    let instructions = init["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.contains("`^git log -5` runs a tool as written"),
        "{instructions}"
    );
    assert!(
        shoal_proto::mcp::LANGUAGE_CARD.contains("`^cmd` runs the program as\nwritten, untyped"),
        "the card teaches ^"
    );
}

#[test]
fn head_tail_and_cat_give_the_same_kind_of_text() {
    let root = Root::new();
    let dir = tmp();
    std::fs::write(dir.path().join("notes.txt"), "a\nb\nc\nd\n").expect("write");
    let d = Daemon::start(&root);
    let mut m = mcp_conn(&d);
    assert_eq!(mcp_text(&mut m, dir.path(), "head -n 2 notes.txt"), "a\nb");
    assert_eq!(mcp_text(&mut m, dir.path(), "head -2 notes.txt"), "a\nb");
    assert_eq!(mcp_text(&mut m, dir.path(), "tail -n 2 notes.txt"), "c\nd");
    assert_eq!(mcp_text(&mut m, dir.path(), "cat notes.txt"), "a\nb\nc\nd");
    // The same values too: text whose `.lines()` is the list.
    assert_eq!(
        mcp_text(
            &mut m,
            dir.path(),
            "[(head -n 2 notes.txt).lines(), (tail -n 2 notes.txt).lines()]"
        ),
        r#"[["a", "b"], ["c", "d"]]"#
    );
}

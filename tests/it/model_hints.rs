//! What the model sees of plans and mistakes, through the real daemon:
//! plans say what cannot be undone (and the disk agrees once applied),
//! verdict and approval never contradict, unknown names come with the
//! nearest valid ones, writing a file has a form the errors teach, and
//! `glob("*/")` matches directories only (docs/rules.md §21, §2).

use std::path::Path;

use crate::common::*;
use serde_json::{json, Value};

fn plan(c: &mut Conn, src: &str) -> Value {
    c.ok("exec", json!({"src": src, "mode": "plan"}))
}

fn apply(c: &mut Conn, p: &Value) -> Value {
    c.ok("plan.apply", json!({"plan_ref": p["plan_ref"]}))
}

/// Verdict and approval are one of the documented pairs.
fn consistent(p: &Value) {
    let pair = (
        p["verdict"].as_str().unwrap_or(""),
        p["approval"].as_str().unwrap_or(""),
    );
    let ok = matches!(
        pair,
        ("allow", "approved")
            | ("approval_required", "pending" | "approved" | "denied")
            | ("deny", "none" | "denied")
            | (_, "applied")
    );
    assert!(ok, "verdict and approval contradict: {p}");
    assert_eq!(
        p["approval_pending"],
        json!(pair == ("approval_required", "pending")),
        "{p}"
    );
}

fn why(p: &Value) -> String {
    p["irreversible"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn plans_say_what_cannot_be_undone_and_the_disk_agrees() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("plans");
    let dir = root.path().join("w");
    std::fs::create_dir(&dir).unwrap();
    for f in ["gone.txt", "trashed.txt", "keep.txt"] {
        std::fs::write(dir.join(f), f).unwrap();
    }
    c.ok("exec", json!({"src": format!("cd {}", dir.display())}));
    let at = |f: &str| dir.join(f).display().to_string();

    // rm --permanent: irreversible, and applying it deletes for good.
    let p = plan(&mut c, "rm --permanent gone.txt");
    assert_eq!(p["reversibility"], json!("irreversible"), "{p}");
    assert!(
        why(&p).contains(&format!(
            "rm --permanent deletes {} for good",
            at("gone.txt")
        )),
        "{p}"
    );
    assert!(p.get("undo").is_none(), "{p}");
    consistent(&p);
    let r = apply(&mut c, &p);
    assert!(!dir.join("gone.txt").exists(), "{r}");
    assert!(
        !r.to_string().contains("trash"),
        "a permanent rm keeps no copy: {r}"
    );

    // rm to the trash: reversible, naming the trash; the file is there after.
    let p = plan(&mut c, "rm trashed.txt");
    assert_eq!(p["reversibility"], json!("reversible"), "{p}");
    assert!(p.get("irreversible").is_none(), "{p}");
    assert_eq!(p["undo"]["paths"], json!([at("trashed.txt")]), "{p}");
    let trash = p["undo"]["trash"].as_str().unwrap().to_string();
    consistent(&p);
    let r = apply(&mut c, &p);
    let v = c.ok("value.get", json!({"ref": r["ref"], "format": "json"}));
    let moved = v.to_string();
    assert!(!dir.join("trashed.txt").exists());
    let kept = std::fs::read_dir(&trash)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with("-trashed.txt"))
        .unwrap_or_else(|| panic!("not in {trash}: {moved}"));
    assert_eq!(std::fs::read_to_string(kept.path()).unwrap(), "trashed.txt");
    assert!(
        moved.contains(&kept.path().display().to_string()),
        "the outcome names the trash path: {moved}"
    );

    // `>` over an existing file loses it; a new file or `>>` does not.
    let p = plan(&mut c, "echo new > keep.txt");
    assert_eq!(p["reversibility"], json!("irreversible"), "{p}");
    assert!(
        why(&p).contains(&format!("`>` overwrites {}", at("keep.txt"))),
        "{p}"
    );
    consistent(&p);
    for src in ["echo new > fresh.txt", "echo more >> keep.txt"] {
        let p = plan(&mut c, src);
        assert_eq!(p["reversibility"], json!("reversible"), "{src}: {p}");
    }
    // The apply really overwrites, as the plan said.
    apply(&mut c, &p);
    assert_eq!(
        std::fs::read_to_string(dir.join("keep.txt")).unwrap(),
        "new\n"
    );

    // A plan made before the file existed may not overwrite it later.
    let p = plan(&mut c, "echo late > later.txt");
    assert_eq!(p["reversibility"], json!("reversible"), "{p}");
    std::fs::write(dir.join("later.txt"), "precious").unwrap();
    let r = c.call("plan.apply", json!({"plan_ref": p["plan_ref"]}));
    assert_eq!(r["error"]["code"], json!(-32011), "{r}");
    assert_eq!(
        std::fs::read_to_string(dir.join("later.txt")).unwrap(),
        "precious"
    );

    // explain says the same.
    let e = c.ok("explain", json!({"src": "rm --permanent keep.txt"}));
    assert_eq!(e["reversibility"], json!("irreversible"), "{e}");
    assert!(why(&e).contains("for good"), "{e}");
}

#[test]
fn git_push_is_irreversible_over_mcp() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let repo = root.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let st = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&[
        "remote",
        "add",
        "origin",
        "https://github.com/example/x.git",
    ]);
    let mut m = d.mcp_legacy("push");
    let cd = tool(
        &mut m,
        "shoal_exec",
        json!({"src": format!("cd {}", repo.display())}),
    );
    assert_eq!(cd["isError"], json!(false), "{cd}");
    let r = tool(&mut m, "shoal_plan", json!({"src": "git push origin main"}));
    let p = &r["structuredContent"];
    assert_eq!(p["reversibility"], json!("irreversible"), "{r}");
    assert!(why(p).contains("cannot be recalled"), "{r}");
    consistent(p);
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("irreversible"), "{text}");
    assert!(!text.contains("\"approval\": \"pending\""), "{text}");
    // The model reads the plan's standing, its effects a line each, what
    // cannot be undone and the next call; not the plan's JSON.
    let plan_ref = p["plan_ref"].as_str().unwrap();
    assert!(text.starts_with(&format!("{plan_ref} · ")), "{text}");
    assert!(text.contains("\n  proc_spawn git"), "{text}");
    assert!(text.contains("\ncannot be undone: "), "{text}");
    assert!(
        text.contains(&format!(
            "next: shoal_apply {{\"plan_ref\":\"{plan_ref}\"}}"
        )),
        "{text}"
    );
    assert!(!text.contains("bin_hash"), "{text}");
}

#[test]
fn a_denied_plan_waits_for_no_approval() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let t = create_token(&root, "agent:none");
    let mut c = d.conn();
    let r = c.attach_token("none", &t);
    assert_eq!(r["result"]["principal"], json!("agent:none"), "{r}");
    let p = plan(&mut c, "echo hi");
    assert_eq!(p["verdict"], json!("deny"), "{p}");
    assert_eq!(p["approval"], json!("none"), "{p}");
    consistent(&p);
    // The local user's permissive policy: allowed, so approved by it.
    let mut l = d.conn();
    l.attach("local");
    let p = plan(&mut l, "sh { echo hi }");
    assert_eq!(p["verdict"], json!("allow"), "{p}");
    assert_eq!(p["approval"], json!("approved"), "{p}");
    assert_eq!(p["approved_via"], json!("policy"), "{p}");
    consistent(&p);
    let listed = l.ok("plan.list", json!({}));
    let listed = listed["plans"].as_array().unwrap();
    assert!(!listed.is_empty());
    for p in listed {
        consistent(p);
    }
}

fn tool(m: &mut Conn, name: &str, args: Value) -> Value {
    m.ok("tools/call", json!({"name": name, "arguments": args}))
}

fn text(r: &Value) -> String {
    r["content"][0]["text"].as_str().unwrap_or("").to_string()
}

#[test]
fn mistakes_come_with_the_form_that_works() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let dir = root.path().join("w");
    std::fs::create_dir_all(dir.join("src/a")).unwrap();
    std::fs::create_dir_all(dir.join("src/b")).unwrap();
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "a\nb\n").unwrap();
    let mut m = d.mcp_legacy("hints");
    let exec = |m: &mut Conn, src: &str| tool(m, "shoal_exec", json!({"src": src}));
    exec(&mut m, &format!("cd {}", dir.display()));

    // Unknown names: the nearest valid ones, in the text the model reads.
    for (src, hint) in [
        (r#""a\nb".lins()"#, "hint: did you mean .lines()?"),
        (
            r#"path("notes.txt").type"#,
            "hint: did you mean .is_dir, .is_file or .ext?",
        ),
        ("{name: 1, size: 2}.nmae", "hint: did you mean .name?"),
        ("journl", "hint: did you mean 'journal'?"),
        ("[1, 2, 3][1..3]", "`.skip(1).take(2)`"),
        (r#"path("f").write("x")"#, "`TEXT.save(path)`"),
        ("ls | wc -l", "`sh { cmd1 | cmd2 }`"),
        (r#""{"a": 1}""#, "raw string"),
        (r#""if x { y""#, "raw string"),
        (r#"glob("src**/*.rs").len()"#, "`src/**/*.rs`"),
    ] {
        let r = exec(&mut m, src);
        assert_eq!(r["isError"], json!(true), "{src}: {r}");
        assert!(text(&r).contains(hint), "{src}: {}", text(&r));
    }
    // `27` for a ref: `out:27`.
    let r = tool(&mut m, "shoal_get", json!({"ref": "27"}));
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(text(&r).contains("did you mean out:27?"), "{}", text(&r));

    // `text > file` writes nothing and teaches `.save`, which works.
    let r = exec(&mut m, r#"'''hi'''.feed(cat) > out.txt"#);
    assert_eq!(r["isError"], json!(true), "{r}");
    assert!(text(&r).contains(r#".save("out.txt")"#), "{}", text(&r));
    assert!(!dir.join("out.txt").exists());
    let r = exec(&mut m, r#"'{"a": 1}'.save("out.txt")"#);
    assert_eq!(r["isError"], json!(false), "{r}");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.txt")).unwrap(),
        r#"{"a": 1}"#
    );
    let r = exec(&mut m, r#""\n".append("out.txt")"#);
    assert_eq!(r["isError"], json!(false), "{r}");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.txt")).unwrap(),
        "{\"a\": 1}\n"
    );

    // `*/` matches directories only, as in bash.
    let r = exec(&mut m, r#"glob("src/*/").map(.name)"#);
    assert_eq!(text(&r), r#"["a", "b"]"#, "{r}");
    let r = exec(&mut m, r#"glob("src/*").map(.name)"#);
    assert_eq!(text(&r), r#"["a", "b", "main.rs"]"#, "{r}");
    assert!(Path::new(&dir.join("src/main.rs")).is_file());
}

#[test]
fn auto_apply_reversible_never_allows_an_overwrite() {
    let root = Root::new();
    let project = root.path().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("old.txt"), "keep").unwrap();
    let cfg = root.path().join("shoal.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[policy.principal."agent:r"]
auto_apply = "reversible"

[policy.principal."agent:r".fs]
read = ["/**"]
write = ["{p}/**"]
delete = ["{p}/**"]
"#,
            p = project.display()
        ),
    )
    .unwrap();
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap()],
        &[],
    );
    let t = create_token(&root, "agent:r");
    let mut c = d.conn();
    let r = c.attach_token("r", &t);
    assert_eq!(r["result"]["principal"], json!("agent:r"), "{r}");
    let new = project.join("new.txt").display().to_string();
    let old = project.join("old.txt").display().to_string();
    let p = plan(&mut c, &format!("touch {new}"));
    assert_eq!(p["verdict"], json!("allow"), "{p}");
    consistent(&p);
    let p = plan(&mut c, &format!("echo x > {old}"));
    assert_eq!(p["verdict"], json!("approval_required"), "{p}");
    assert_eq!(p["reversibility"], json!("irreversible"), "{p}");
    consistent(&p);
    // Run directly, the same: refused, the file intact.
    let r = c.call("exec", json!({"src": format!("echo x > {old}")}));
    assert_eq!(r["error"]["code"], json!(-32011), "{r}");
    assert_eq!(
        std::fs::read_to_string(project.join("old.txt")).unwrap(),
        "keep"
    );
}

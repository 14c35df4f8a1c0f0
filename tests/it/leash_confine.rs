//! Leash: a token principal's evaluation runs on a kernel-confined thread
//! (docs/leash.md). Its policy here allows opaque runs and reads of every
//! path, so neither the verdict nor the effect deriver stands in the way:
//! what stops each attempt is the kernel (Landlock on the evaluation thread
//! and its children), judged by outcome on disk and by the secrets never
//! appearing in a reply. The local user, unconfined, does each for real.

use crate::common::*;
use serde_json::{json, Value};

const MARKER: &str = "daemon-env-marker-5f1c";

/// The whole reply as text (value, render, error and its data).
fn reply(c: &mut Conn, src: &str) -> String {
    c.call("exec", json!({"src": src})).to_string()
}

/// Run `src` as a background task and await it (the run-time gate may
/// refuse it before it starts; the outcome on disk is what counts).
fn background(c: &mut Conn, src: &str) -> String {
    let r = c.call("exec", json!({"src": src, "background": true}));
    let Some(task) = r["result"]["task"].as_str() else {
        return r.to_string();
    };
    let rec = c.ok("task.await", json!({"task": task, "timeout_ms": 20000}));
    assert!(rec["state"].as_str().unwrap().len() > 1, "{rec}");
    rec.to_string()
}

#[test]
fn the_kernel_confines_a_token_principals_evaluation() {
    let root = Root::new();
    let project = root.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let outside = root.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    for f in ["a", "b", "c", "d", "e", "f"] {
        std::fs::write(outside.join(f), "keep\n").unwrap();
    }
    let d = Daemon::with_config(
        &root,
        &project_policy("agent:k", &project),
        &[("SHOAL_CONFINE_MARKER", MARKER)],
    );
    let token = create_token(&root, "agent:k");
    let tokens_file = root.state_dir().join("tokens.json");
    let tokens_text = std::fs::read_to_string(&tokens_file).unwrap();
    let digest = tokens_text
        .split("\"digest\": \"")
        .nth(1)
        .map(|s| s[..24].to_string())
        .expect("a digest in tokens.json");

    let mut k = d.conn();
    let r = k.attach_token("agent", &token);
    assert_eq!(r["result"]["caps_enforced"], json!(true), "{r}");
    let o = |f: &str| outside.join(f).display().to_string();

    // Builtins and methods in call form, in the daemon: the kernel refuses.
    reply(&mut k, &format!("rm(\"{}\", permanent: true)", o("a")));
    assert!(
        outside.join("a").exists(),
        "rm() in call form deleted a file"
    );
    reply(&mut k, &format!("\"x\".save(\"{}\")", o("new")));
    assert!(!outside.join("new").exists(), ".save() wrote outside");
    reply(&mut k, &format!("touch(\"{}\")", o("t")));
    assert!(!outside.join("t").exists(), "touch() made a file");
    reply(&mut k, &format!("mkdir(\"{}\")", o("m")));
    assert!(!outside.join("m").exists(), "mkdir() made a dir");
    // A background task's thread is confined too.
    background(&mut k, &format!("rm(\"{}\", permanent: true)", o("b")));
    assert!(outside.join("b").exists(), "a task deleted a file");
    // Children of the confined thread.
    reply(&mut k, &format!("sh {{ rm -f {} }}", o("c")));
    assert!(outside.join("c").exists(), "a child deleted a file");

    // Mode, times and attributes of an outside file, by name from a child
    // (Landlock does not govern them; the attribute filter does).
    let meta = |f: &str| {
        let m = std::fs::metadata(outside.join(f)).unwrap();
        (
            std::os::unix::fs::PermissionsExt::mode(&m.permissions()),
            m.modified().unwrap(),
        )
    };
    let before = meta("e");
    reply(
        &mut k,
        &format!(
            "sh {{ chmod 777 {e}; touch -d 2001-01-01 {e}; python3 -c 'import os; os.utime(\"{e}\", (1, 1)); os.chmod(\"{e}\", 0o777)' }}",
            e = o("e")
        ),
    );
    assert_eq!(
        meta("e"),
        before,
        "a child changed an outside file's mode or times"
    );
    // Its own files it may still touch (through a descriptor).
    std::fs::write(project.join("own"), "x").unwrap();
    let r = reply(
        &mut k,
        &format!(
            "sh {{ touch -d 2001-01-01 {} && echo TOUCHED }}",
            project.join("own").display()
        ),
    );
    assert!(r.contains("TOUCHED"), "{r}");

    // The daemon's own files, though `fs.read` is every path.
    for src in [
        format!("cat(\"{}\")", tokens_file.display()),
        format!("path(\"{}\").read()", tokens_file.display()),
        format!("sh {{ cat {} }}", tokens_file.display()),
        format!("path(\"{}\").read()", root.socket().display()),
        format!("ls(\"{}\")", root.state_dir().display()),
    ] {
        let text = reply(&mut k, &src);
        assert!(!text.contains(&digest), "{src} read tokens.json: {text}");
        assert!(!text.contains("journal.redb"), "{src} listed the state dir");
    }
    // The daemon's memory and environment (the thread shares its address
    // space): no /proc at all.
    for src in [
        "path(\"/proc/self/environ\").read()".to_string(),
        "cat(\"/proc/self/environ\")".to_string(),
        format!("path(\"/proc/{}/environ\").read()", d.pid()),
        format!("sh {{ cat /proc/{}/environ }}", d.pid()),
        "path(\"/proc/self/mem\").read()".to_string(),
    ] {
        let text = reply(&mut k, &src);
        assert!(
            !text.contains(MARKER),
            "{src} read the daemon's env: {text}"
        );
    }
    // Inside its grants it works.
    let r = k.ok(
        "exec",
        json!({"src": format!("\"hi\".save(\"{}\")", project.join("in.txt").display())}),
    );
    assert!(r.get("value").is_some(), "{r}");
    assert_eq!(
        std::fs::read_to_string(project.join("in.txt")).unwrap(),
        "hi"
    );
    let r: Value = k.ok("exec", json!({"src": "sh { echo fine }"}));
    assert!(r.to_string().contains("fine"), "{r}");

    // Controls: the local user, unconfined, does each of these for real.
    let mut l = d.conn();
    l.attach("mine");
    l.ok(
        "exec",
        json!({"src": format!("rm(\"{}\", permanent: true)", o("d"))}),
    );
    assert!(!outside.join("d").exists(), "control: local rm()");
    reply(
        &mut l,
        &format!(
            "sh {{ chmod 700 {e}; touch -d 2001-01-01 {e} }}",
            e = o("f")
        ),
    );
    let m = std::fs::metadata(outside.join("f")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777,
        0o700,
        "control: local chmod"
    );
    let text = reply(&mut l, &format!("cat(\"{}\")", tokens_file.display()));
    assert!(text.contains(&digest), "control: local cat: {text}");
    let text = reply(&mut l, "path(\"/proc/self/environ\").read()");
    assert!(text.contains(MARKER), "control: local environ: {text}");
}

/// The local user attached to a session a token owns runs under the
/// owner's confinement: the token's closures (and its own programs) cannot
/// borrow the local user's reach. Its own session stays unconfined.
#[test]
fn a_tokens_session_confines_the_local_user_in_it() {
    let root = Root::new();
    let project = root.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let outside = root.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    for f in ["a", "b", "c"] {
        std::fs::write(outside.join(f), "keep\n").unwrap();
    }
    let d = Daemon::with_config(&root, &project_policy("agent:k", &project), &[]);
    let token = create_token(&root, "agent:k");
    let o = |f: &str| outside.join(f).display().to_string();

    let mut k = d.conn();
    let r = k.attach_token("agent", &token);
    assert_eq!(r["result"]["caps_enforced"], json!(true), "{r}");
    // The token leaves a closure behind for whoever calls it next.
    k.ok(
        "exec",
        json!({"src": "fn zap(p) { rm(p, permanent: true) }"}),
    );

    let mut l = d.conn();
    l.attach("agent@agent:k");
    reply(&mut l, &format!("zap(\"{}\")", o("a")));
    assert!(
        outside.join("a").exists(),
        "the token's closure deleted as the local user"
    );
    reply(&mut l, &format!("rm(\"{}\", permanent: true)", o("b")));
    assert!(
        outside.join("b").exists(),
        "the local user ran unconfined in a token's session"
    );
    // A program that is not quick, before the token ran any: still confined.
    let mut k2 = d.conn();
    let r = k2.attach_token("agent-fresh", &token);
    assert!(r.get("result").is_some(), "{r}");
    let mut l2 = d.conn();
    l2.attach("agent-fresh@agent:k");
    reply(&mut l2, &format!("rm(\"{}\", permanent: true)", o("b")));
    assert!(
        outside.join("b").exists(),
        "a token's fresh session ran the local user unconfined"
    );
    // A quick program of the token's is answered (on the arbiter, touching nothing).
    let r = k.ok("exec", json!({"src": "6 * 7"}));
    assert_eq!(r["render"], json!("42"), "{r}");

    // Control: the local user's own session.
    l.attach("mine");
    l.ok(
        "exec",
        json!({"src": format!("rm(\"{}\", permanent: true)", o("c"))}),
    );
    assert!(
        !outside.join("c").exists(),
        "control: local rm() in its own session"
    );
}

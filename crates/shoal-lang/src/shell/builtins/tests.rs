//! Tests of the structured builtins (`shell::builtins`).

use super::*;

fn ctx_run(dir: &Path, head: &str, args: Vec<BArg>) -> SResult<Value> {
    let env = IndexMap::new();
    let ctx = Ctx {
        cwd: dir,
        env: &env,
        interrupter: &crate::interrupt::Interrupter::default(),
    };
    run(head, args, &ctx)
}

fn s(x: &str) -> BArg {
    BArg::Val(Value::str(x))
}

#[test]
fn fs_roundtrip() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    assert!(matches!(ctx_run(p, "touch", vec![]), Err(e) if e.code == ErrorCode::ArgError));
    ctx_run(p, "touch", vec![s("a.txt")]).unwrap();
    assert!(p.join("a.txt").exists());
    assert!(matches!(ctx_run(p, "mkdir", vec![s("x/y")]), Err(e) if e.code == ErrorCode::Custom));
    ctx_run(
        p,
        "mkdir",
        vec![
            BArg::Long {
                name: "parents".into(),
                value: None,
            },
            s("x/y"),
        ],
    )
    .unwrap();
    assert!(p.join("x/y").is_dir());
    std::fs::write(p.join("a.txt"), "hi").unwrap();
    ctx_run(p, "cp", vec![s("a.txt"), s("b.txt")]).unwrap();
    assert_eq!(std::fs::read(p.join("b.txt")).unwrap(), b"hi");
    ctx_run(p, "mv", vec![s("b.txt"), s("c.txt")]).unwrap();
    assert!(!p.join("b.txt").exists());
    let cat = ctx_run(p, "cat", vec![s("a.txt"), s("c.txt")]).unwrap();
    assert!(matches!(cat, Value::Bytes(ref b) if &b[..] == b"hihi"));
    assert!(matches!(ctx_run(p, "cat", vec![s("nope")]), Err(e) if e.code == ErrorCode::Custom));
    assert!(matches!(ctx_run(p, "rm", vec![]), Err(e) if e.code == ErrorCode::NoMatches));
    ctx_run(p, "rm", vec![s("c.txt")]).unwrap();
    assert!(!p.join("c.txt").exists());
    ctx_run(
        p,
        "rm",
        vec![
            BArg::Long {
                name: "permanent".into(),
                value: None,
            },
            s("a.txt"),
        ],
    )
    .unwrap();
    assert!(!p.join("a.txt").exists());
    let ls = ctx_run(p, "ls", vec![]).unwrap();
    assert!(matches!(ls, Value::Table(ref t) if t.len() == 1));
}

#[test]
fn head_lines() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("m.txt"), "l1\nl2\nl3\n").unwrap();
    // Text, like `tail -n N` and `cat`: no trailing newline.
    let v = ctx_run(d.path(), "head", vec![s("m.txt"), s("2")]).unwrap();
    assert!(matches!(v, Value::Str(ref t) if &**t == "l1\nl2"));
    let v = ctx_run(d.path(), "head", vec![s("m.txt")]).unwrap();
    assert!(matches!(v, Value::Str(ref t) if &**t == "l1\nl2\nl3"));
}

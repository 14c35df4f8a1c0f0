//! Evaluator tests: a table of `(source, expected)` pairs run through
//! `Session::exec`. The shared conformance corpus has its own runner
//! (`/work/shared/conformance/run`); shell builtins and process semantics are
//! tested in `crate::shell::tests`.

mod fast_paths;
mod waits;

use std::path::Path;

use crate::session::{ExecError, Position, Session, SessionOptions};
use shoal_value::render;

fn session_in(dir: &Path) -> Session {
    Session::new(SessionOptions {
        cwd: dir.to_path_buf(),
        env: Vec::new(),
        ..Default::default()
    })
}

/// Inline render of the result, `!code` for a raised error, `!parse` for a
/// parse error.
fn run_in(dir: &Path, src: &str) -> String {
    let mut s = session_in(dir);
    match s.exec(src, Position::Stmt) {
        Ok(v) => render::inline(&v),
        Err(ExecError::Parse(_)) => "!parse".into(),
        Err(ExecError::Raised(e)) => format!("!{}", e.code),
    }
}

fn run(src: &str) -> String {
    let d = tempfile::tempdir().expect("tempdir");
    run_in(d.path(), src)
}

fn check(cases: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (src, want) in cases {
        let got = run(src);
        if got != *want {
            failures.push(format!("{src:?}: want {want}, got {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn expressions_and_bindings() {
    check(&[
        ("2 + 3 * 4", "14"),
        ("range(0, 5)", "0..5"),
        ("range(3).collect()", "[0, 1, 2]"),
        ("range(0, 100000).collect().len()", "100000"),
        ("range(5, 2).collect()", "[]"),
        ("range(1, \"a\")", "!type_error"),
        ("range()", "!arg_error"),
        (
            "let probe = 5\n{ probe, answer: 42 }",
            "{probe: 5, answer: 42}",
        ),
        ("let x = 4\nx + 1", "5"),
        ("var x = 4\nx += 3\nx", "7"),
        ("let x = 4\nx = 9", "!type_error"),
        ("y = 1", "!type_error"),
        ("let x = missing", "!undefined_var"),
        ("false && missing", "false"),
        ("true && 5", "5"),
        ("1 && true", "!type_error"),
        ("null ?? 7", "7"),
        ("3 ?? (1 / 0)", "3"),
        ("\"answer {6 * 7}\"", "\"answer 42\""),
        ("[1][3]", "!index_range"),
        ("{a: 1, a: 2}", "{a: 2}"),
        ("if false { 1 } else { 2 }", "2"),
        ("if false { 1 }", "null"),
        ("{ }", "{}"),
        ("let x = null\nx?.foo", "null"),
        ("let x = null\nlet y = x?.foo(1 / 0)\ny == null", "true"),
        ("1..5.5", "!type_error"),
    ]);
}

#[test]
fn functions_and_closures() {
    check(&[
        ("fn add(a, b) { a + b }\nadd(2, 5)", "7"),
        ("fn inc(a, by = 1) { a + by }\ninc(4)", "5"),
        ("fn f(a, b) { [a, b] }\nf(b: 1, 2)", "[2, 1]"),
        ("fn f(x) { x }\nf(1, 2)", "!arg_error"),
        ("fn f(x) { x }\nf()", "!arg_error"),
        ("fn f(x) { x }\nf(1, bogus: 99)", "!arg_error"),
        ("fn f(...xs) { xs }\nf(1, 2)", "[1, 2]"),
        ("fn f(xs: list<int>) { xs[0] + 1 }\nf([\"2\", \"3\"])", "3"),
        (
            "fn f(n) { if n == 0 { return 0 }\nn + f(n - 1) }\nf(100)",
            "5050",
        ),
        ("fn f(n) { f(n + 1) }\nf(0)", "!recursion_limit"),
        ("let x = 10\nlet add_x = y => y + x\nadd_x(5)", "15"),
        (
            "let compose = (f, g) => x => f(g(x))\nlet h = compose(x => x + 1, x => x * 2)\nh(5)",
            "11",
        ),
        ("((a, b) => a + b)(2, 3)", "5"),
        ("(() => 42)()", "42"),
        (
            "var total = 0\nlet add = x => { total += x }\nadd(2)\nadd(3)\ntotal",
            "5",
        ),
        ("return 1", "!custom"),
        ("break", "!custom"),
        ("let f = 5\nf(1)", "!type_error"),
        ("fn f() { 42 }\nlet g = f\ng()", "42"),
        ("fn f() { 42 }\nf", "42"),
    ]);
}

/// Frames are pooled and parameters bound without locking: captured frames
/// stay alive and distinct, parameters stay immutable and shadowable, and
/// the int fast path of binary operators keeps the checked semantics.
#[test]
fn pooled_frames_and_int_fast_path() {
    check(&[
        (
            "let mk = x => () => x\nlet fs = range(0, 5).map(i => mk(i * 10))\nfs.map(f => f())",
            "[0, 10, 20, 30, 40]",
        ),
        (
            "let adders = [1, 2, 3].map(n => (x => x + n))\n[adders[0](10), adders[2](10)]",
            "[11, 13]",
        ),
        ("fn f(x) { let x = x + 1\nx }\n[f(1), f(5)]", "[2, 6]"),
        (
            "fn f(x) { var x = x\nx += 10\nx }\n[f(1), f(2)]",
            "[11, 12]",
        ),
        ("fn f(x) { x = 2 }\nf(1)", "!type_error"),
        (
            "fn f(x) { x = 2 }\nf(1) catch e { e.msg }",
            "\"cannot assign `x`: it is immutable (declared with `let`)\"",
        ),
        ("let f = (a, b, a) => [a, b]\nf(1, 2, 3)", "[3, 2]"),
        (
            "var n = 0\nlet bump = x => { n += x\nn }\nrange(0, 100).each(bump)\nn",
            "4950",
        ),
        (
            "fn fib(n) { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }\nfib(15)",
            "610",
        ),
        (
            "let y = 1\nfn g(x) { x + y }\nlet h = y => g(y) * 10\nh(2)",
            "30",
        ),
        ("9223372036854775807 + 1", "!overflow"),
        (
            "let m = 9223372036854775807\n[1].map(x => m + x)",
            "!overflow",
        ),
        ("[1].map(x => x / 0)", "!div_zero"),
        ("[1].map(x => x % 0)", "!div_zero"),
        ("[-7, 7].map(x => x % 3)", "[-1, 1]"),
        ("[-7, 7].map(x => x % -3)", "[-1, 1]"),
        ("[-7].map(x => x / 2)", "[-3]"),
        (
            "range(0, 5).where(x => x >= 2 && x != 3 && x < 5 && x <= 4 && x > 0)",
            "[2, 4]",
        ),
        ("[1].map(x => x + 0.5)", "[1.5]"),
        ("[1].map(x => x == 1.0)", "[true]"),
        (
            "range(0, 1000).map(x => x * 2).where(x => x % 3 == 0).len()",
            "334",
        ),
    ]);
}

#[test]
fn loops_and_control() {
    check(&[
        ("var s = 0\nfor i in 1..4 { s += i }\ns", "6"),
        (
            "var s = 0\nfor i in 1..6 { if i % 2 == 0 { continue }\ns += i }\ns",
            "9",
        ),
        (
            "var i = 0\nwhile true { i += 1\nif i == 3 { break } }\ni",
            "3",
        ),
        ("for i in 5 { }", "!type_error"),
        ("var n = 0\nfor r in [{a: 1}, {a: 2}] { n += r.a }\nn", "3"),
        ("try { 1/0 } catch e { e.code }", "\"div_zero\""),
        ("try { try { 1 / 0 } catch { 99 } } catch { -1 }", "99"),
        ("1/0 catch \"fallback\"", "\"fallback\""),
        ("(1 / 0) catch err { err.msg.len() > 0 }", "true"),
        ("assert(1 == 2)", "!assert_failed"),
        ("assert(1 == 1)", "null"),
        ("assert(1, \"x\")", "!type_error"),
        ("assert(true, 5)", "!type_error"),
        ("assert(true, \"a\", \"b\")", "!arg_error"),
        ("retry(2) { 5 }", "5"),
        (
            "var a = 0\nretry(3) {\n  a += 1\n  if a < 3 { 1 / 0 } else { 99 }\n}",
            "99",
        ),
        ("retry(2) { 1 / 0 }", "!div_zero"),
        ("parallel(() => 1, () => 2)", "[1, 2]"),
        ("parallel(() => 1, () => 1 / 0, settle: true).len()", "2"),
        ("exit\n5", "null"),
    ]);
}

#[test]
fn match_patterns() {
    check(&[
        (
            "match 5 { 0..3 => \"low\"; 3..=10 => \"mid\"; _ => \"high\" }",
            "\"mid\"",
        ),
        (
            "match \"hi\" { int n => \"int\"; str s => \"str:{s}\" }",
            "\"str:hi\"",
        ),
        ("match {name: \"ada\"} { {name, age} => 1; _ => 2 }", "2"),
        (
            "match {point: {x: 1, y: 2}} { {point: {x, y}} => x + y; _ => 0 }",
            "3",
        ),
        (
            "match [1, 2, 3, 4] { [first, ...rest] => rest.len(); _ => 0 }",
            "3",
        ),
        (
            "match [] { [a, ...rest] => \"has\"; [] => \"empty\" }",
            "\"empty\"",
        ),
        (
            "match 7 { 1 | 2 | 3 => \"small\"; n if n > 5 => \"big\"; _ => \"m\" }",
            "\"big\"",
        ),
        (
            "match null { null => \"isnull\"; _ => \"notnull\" }",
            "\"isnull\"",
        ),
        ("match 3 { 1 => 1 }", "null"),
        (
            "match 5 { float f => \"float\"; int n => \"int:{n}\"; _ => \"other\" }",
            "\"int:5\"",
        ),
    ]);
}

#[test]
fn commands_and_outcomes() {
    check(&[
        ("(echo hi).out", "\"hi\""),
        ("echo hi", "outcome(status: 0, ok: true)"),
        ("echo a && echo b", "outcome(status: 0, ok: true)"),
        ("echo hi && false", "false"),
        ("!(echo hi)", "false"),
        ("^false", "!cmd_failed"),
        ("(^false)", "!cmd_failed"),
        ("(^false).ok", "false"),
        ("let r = (^false)\nr.ok", "false"),
        ("if true { ^false }", "outcome(status: 1, ok: false)"),
        (
            "try { ^false } catch e { 1 }",
            "outcome(status: 1, ok: false)",
        ),
        ("let r = (sh -c \"exit 7\")\nr.status", "7"),
        ("let r = (sh -c \"exit 7\")\nr.out", "!cmd_failed"),
        ("let r = (sh -c 'kill -SEGV $$')\nr.signal", "\"SIGSEGV\""),
        ("let r = (sh -c 'kill -SEGV $$')\nr.status", "null"),
        ("sh { printf hi }.out", "\"hi\""),
        ("(sh { exit 3 }).status", "3"),
        ("sh { exit 3 }", "!cmd_failed"),
        ("\"b\\na\\nc\".feed(sort).out", "\"a\\nb\\nc\""),
        (
            "[\"b\", \"a\", \"c\"].feed(sort -r).out.trim()",
            "\"c\\nb\\na\"",
        ),
        (
            "sort.feed([\"b\", \"a\", \"c\"]).out.trim()",
            "\"a\\nb\\nc\"",
        ),
        ("re\"x\".feed(sort)", "!feed_error"),
        (
            "let r = (FOO=hello sh -c 'printf %s $FOO')\nr.out",
            "\"hello\"",
        ),
        ("xyzzy", "!not_found"),
        ("let ls = 5\nls", "5"),
        ("alias greet = echo hey\n(greet there).out", "\"hey there\""),
        ("fn build(jobs: int = 1) { jobs }\nbuild --jobs=4", "4"),
        (
            "fn f(a: str, times: int = 1) { [a, \"{times}\"] }\n(f ada --times 2)",
            "[\"ada\", \"2\"]",
        ),
        (
            "fn f(a: str, times: int = 1) { a }\n(f ada --times)",
            "!arg_error",
        ),
        (
            "fn f(a: str, force: bool = false) { [a, force] }\n(f x --force)",
            "[\"x\", true]",
        ),
        ("fn f(d: duration) { d }\nf 90", "1m30s"),
        ("fn f(...rest: list<int>) { rest.len() }\nf 1 2 3", "3"),
        ("fn f(a: int) { a }\nf abc", "!arg_error"),
        ("(sleep 0).out", "null"),
        ("cd -", "!custom"),
        ("popd", "!custom"),
        ("pushd", "!custom"),
        ("dirs.len()", "1"),
        ("fn f() { popd }\nf()", "!custom"),
        ("env.NOPE_ZZZ_NOT_SET", "!field_missing"),
        ("env.SHOAL_T = \"v\"\nenv.SHOAL_T", "\"v\""),
        (
            "run(\"./definitely-not-a-real-script-xyz.zzz\")",
            "!runner_not_found",
        ),
        ("reef lock --refresh", "!reef_not_found"),
        ("mkdir", "!arg_error"),
        ("rm", "!no_matches"),
        ("cat nope.txt", "!custom"),
        (
            "(echo before *.nonexistent-ext-zzz after).out",
            "\"before after\"",
        ),
    ]);
}

#[test]
fn files_and_scripts() {
    check(&[
        ("echo hi > out.txt\n(cat out.txt).out.str()", "\"hi\\n\""),
        (
            "echo a > out.txt\necho b >> out.txt\n(cat out.txt).out.str()",
            "\"a\\nb\\n\"",
        ),
        (
            "sh -c 'printf hi' > out.txt\n(cat out.txt).out.str()",
            "\"hi\"",
        ),
        ("echo \"let zzz = 42\" > lib.shl\nsource lib.shl\nzzz", "42"),
        (
            "echo \"let zzz = 42\" > leak.shl\nrun leak.shl\nzzz",
            "!not_found",
        ),
        ("echo \"40 + 2\" > calc.shl\nrun calc.shl", "42"),
        ("echo \"args.len()\" > a.shl\nrun a.shl x y", "2"),
        ("mkdir --parents a/b/c\n(stat a/b/c).out.type", "\"dir\""),
        ("touch a.txt b.txt\n(stat a.txt b.txt).out.len()", "2"),
        (
            "\"hi\".save(\"t.txt\")\nln t.txt link.txt\n(cat link.txt).out.str()",
            "\"hi\"",
        ),
        (
            "mkdir sub\nlet start = pwd\ncd sub\ncd -\nstart == pwd",
            "true",
        ),
        ("mkdir a b\npushd a\npushd ../b\npopd\ndirs.len()", "2"),
        (
            "touch a.txt b.txt\nfn f(...rest: list<path>) { rest.len() }\nf *.txt",
            "2",
        ),
        (
            "touch a.txt b.txt\nfn f(paths: list<path>) { paths.len() }\nf *.txt",
            "2",
        ),
        ("touch a.txt\nfn f(g: glob) { g }\nf *.txt", "*.txt"),
        (
            "touch a.txt b.txt\nvar n = 0\nfor p in glob(\"*.txt\") { n += 1 }\nn",
            "2",
        ),
        ("mkdir d\nwith cwd: \"d\" { pwd.name }", "\"d\""),
        (
            "with env: {SHOAL_W: \"1\"} { (sh -c 'printf %s $SHOAL_W').out }",
            "\"1\"",
        ),
    ]);
}

#[test]
fn tasks_and_channels() {
    check(&[
        ("let t = spawn { 1 + 1 }\nt.await()", "2"),
        ("let t = spawn { 1 / 0 }\nt.await()", "!div_zero"),
        ("jobs.len()", "0"),
        // Without a daemon, `&` runs on a thread of the evaluation.
        ("let t = sh { echo hi } &\nt.await().out", "\"hi\""),
        ("let t = (echo a &)\nt.await().out", "\"a\""),
        (
            "let t = spawn { 1 }\nt.await()\n[task(t.id).state, task(\"task:{t.id}\").is_done()]",
            "[\"completed\", true]",
        ),
        (
            "let t = spawn { 1 }\nt.await()\njobs.where(.id == t.id)[0].state",
            "\"completed\"",
        ),
        ("task(999999999)", "!not_found"),
        ("task(\"out:1\")", "!arg_error"),
        (
            "channel(\"z\").emit(\"a\")\nchannel(\"z\").latest()",
            "\"a\"",
        ),
        ("channel(\"nope\").latest()", "null"),
    ]);
}

#[test]
fn session_state_persists() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = session_in(d.path());
    assert!(s.exec("let x = 5", Position::Stmt).is_ok());
    let v = s.exec("x", Position::Stmt).map(|v| render::inline(&v));
    assert!(matches!(v.as_deref(), Ok("5")), "{v:?}");
    assert_eq!(s.bound_names(), vec!["x".to_string()]);
    std::fs::create_dir(d.path().join("sub")).expect("mkdir");
    assert!(s.exec("cd sub", Position::Stmt).is_ok());
    assert_eq!(s.cwd(), d.path().join("sub"));
    // Value position: a failing command yields its outcome.
    let v = s
        .exec("^false", Position::Value)
        .map(|v| render::inline(&v));
    assert!(
        matches!(v.as_deref(), Ok("outcome(status: 1, ok: false)")),
        "{v:?}"
    );
}

#[test]
fn interrupt_cancels_running_exec() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = session_in(d.path());
    for src in [
        "sleep 30",
        "sh -c 'sleep 30'",
        "var i = 0\nwhile true { i += 1 }",
    ] {
        let intr = s.interrupter();
        // `exec` clears the flag when it starts, so keep interrupting until
        // the evaluation has returned (no guess at when it started).
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = done.clone();
        let t = std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                intr.interrupt();
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        });
        let start = std::time::Instant::now();
        let r = s.exec(src, Position::Stmt);
        assert!(
            matches!(r, Err(ExecError::Raised(ref e)) if e.code == shoal_value::ErrorCode::Cancelled),
            "{src}: {r:?}"
        );
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "{src}"
        );
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = t.join();
    }
}

#[test]
fn deep_recursion_is_safe() {
    check(&[
        (
            "fn f(n) { if n == 0 { 0 } else { 1 + f(n - 1) } }\nf(9990)",
            "9990",
        ),
        (
            "fn g(n) { if n == 0 { 0 } else { [n].map(x => g(x - 1)).first() + 1 } }\ng(4900)",
            "4900",
        ),
        (
            "fn h(n) { h(n + 1) }\nh(0) catch e { e.code }",
            "\"recursion_limit\"",
        ),
        ("let f = x => f(x)\nf(1)", "!recursion_limit"),
    ]);
}

#[test]
fn statement_sink_and_help() {
    use std::sync::{Arc, Mutex};
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = session_in(d.path());
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink_seen = seen.clone();
    s.set_sink(Some(Box::new(move |v| {
        sink_seen.lock().expect("lock").push(render::inline(v));
    })));
    let r = s.exec(
        "1 + 1\nlet x = 3\nfn f(a: int, b = 2, ...r: list<str>) { a }\nf --help\nx",
        Position::Stmt,
    );
    assert!(
        matches!(r.as_ref().map(render::inline).as_deref(), Ok("3")),
        "{r:?}"
    );
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(
        seen,
        [
            "2",
            "null",
            "null",
            "\"fn f(a: int, b = …, ...r: list<str>)\"",
            "null"
        ]
    );
}

#[test]
fn jump_tasks_and_interact() {
    check(&[
        ("mkdir -p a/deep\ncd a/deep\ncd ../..\nj deep\npwd.name", "\"deep\""),
        ("j nothing-here", "!not_found"),
        ("jump a b", "!arg_error"),
        ("let t = (sleep 300ms &)\nt.suspend()\nlet s = t.is_suspended()\nt.resume()\nt.await()\n[s, t.is_suspended()]", "[true, false]"),
        ("let t = (sh -c 'sleep 5' &)\nt.suspend()\nt.cancel()\nt.await()", "!cancelled"),
        ("(interact echo hi).out", "\"hi\""),
        ("touch .\n1", "1"),
    ]);
}

#[test]
fn reef_snapshot_shape() {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::write(d.path().join(".reef.toml"), "[tools]\nsh = \"*\"\n").expect("write");
    let s = session_in(d.path());
    let snap = s.reef_snapshot();
    assert!(snap["active_scope"].is_string(), "{snap}");
    assert_eq!(snap["bindings"][0]["tool"], "sh");
    assert_eq!(snap["bindings"][0]["scope"], "reef");
}

/// Every prefix of pure-expression corpus programs must evaluate or fail
/// cleanly, never panic (about 3,600 prefixes; well under a second).
#[test]
fn truncations_never_panic() {
    let root = Path::new("/work/shared/conformance/cases");
    let suites = [
        "core",
        "closures",
        "match",
        "match-more",
        "operators",
        "iife",
        "catch-forms",
        "strings",
        "literals",
    ];
    let d = tempfile::tempdir().expect("tempdir");
    let mut n = 0;
    for suite in suites {
        let Ok(text) = std::fs::read_to_string(root.join(format!("{suite}.toml"))) else {
            continue;
        };
        let Ok(doc) = text.parse::<toml::Table>() else {
            continue;
        };
        let Some(cases) = doc.get("case").and_then(|c| c.as_array()) else {
            continue;
        };
        for c in cases {
            let src = c.get("src").and_then(|v| v.as_str()).unwrap_or("");
            for (i, _) in src.char_indices() {
                let mut s = session_in(d.path());
                let prefix = &src[..i];
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    s.exec(prefix, Position::Stmt)
                }));
                assert!(r.is_ok(), "panic on {prefix:?}");
                n += 1;
            }
        }
    }
    eprintln!("{n} prefixes evaluated");
}

#[test]
fn empty_glob_note() {
    let note = "\"note: `*.zzz` matched nothing and was left out (quote it to pass it as \
                written: '*.zzz')\\n\"";
    check(&[
        ("(echo *.zzz).stderr.str()", note),
        ("(echo *.zzz).out", "\"\""),
        // An external program's outcome says so too, after its own stderr.
        ("(^sh -c 'echo own >&2' x *.zzz).stderr.str().lines().len()", "2"),
        (
            "(^sh -c 'echo own >&2' x *.zzz).stderr.str().lines()[1].starts_with(\"note: `*.zzz`\")",
            "true",
        ),
        ("(^printf '%s|' a *.zzz b).stdout.str()", "\"a|b|\""),
    ]);
}

/// `parallel` runs its thunks at the same time: the first thunk waits for an
/// event only the second one emits (replayed from the channel's ring, so the
/// order in which the threads start does not matter). Run one after the other
/// this would never finish, so a watchdog bounds the test instead of a sleep.
#[test]
fn parallel_thunks_run_concurrently() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let src = r#"let c = channel("rendezvous")
parallel(() => c.events().take(1).collect().first().payload, () => { c.emit(42); "sent" })"#;
        let _ = tx.send(run(src));
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("parallel thunks finished (a sequential parallel() would wait forever)");
    assert_eq!(got, "[42, \"sent\"]");
    check(&[
        ("parallel(() => 1, () => 2, () => 3)", "[1, 2, 3]"),
        ("parallel([() => \"a\", () => \"b\"])", "[\"a\", \"b\"]"),
        ("parallel(() => 1, () => 1 / 0)", "!div_zero"),
        (
            "parallel(() => 1, () => 1 / 0, settle: true)",
            "[1, error(div_zero: division by zero)]",
        ),
        ("parallel(() => 1, settle: 3)", "!type_error"),
        (
            "var n = 0\nparallel(() => { n += 1 }, () => { n += 1 })\nn",
            "2",
        ),
        // Many racing compound assignments: the read-modify-write is one
        // step under the scope's lock, so no increment is lost.
        (
            "var n = 0\nlet bump = () => { for i in 0..5000 { n += 1 } }\nparallel(bump, bump, bump, bump)\nn",
            "20000",
        ),
    ]);
}

#[test]
fn transcript_refs_in_source() {
    let d = tempfile::tempdir().expect("tempdir");
    // Without a daemon session there is no transcript: the error says so.
    assert_eq!(run_in(d.path(), "out:1"), "!undefined_var");
    let mut s = session_in(d.path());
    s.set_transcript(Some(std::sync::Arc::new(|n: u64| match n {
        3 => Ok(shoal_value::Value::str("a\nb\nc")),
        _ => Err(format!("no out:{n}")),
    })));
    let mut eval = |src: &str| match s.exec(src, Position::Stmt) {
        Ok(v) => render::inline(&v),
        Err(ExecError::Parse(e)) => format!("!parse {} / {:?}", e.msg, e.hint),
        Err(ExecError::Raised(e)) => format!("!{}: {}", e.code, e.msg),
    };
    assert_eq!(eval("out:3.lines().len()"), "3");
    assert_eq!(eval("out:3"), "\"a\\nb\\nc\"");
    assert_eq!(eval("let x = out:3.lines()\nx[-1]"), "\"c\"");
    assert_eq!(eval("\"{out:3.lines()[0]}!\""), "\"a!\"");
    assert_eq!(eval("[out:3.lines().len(), 1]"), "[3, 1]");
    assert_eq!(eval("out:4"), "!undefined_var: no out:4");
    // A record key stays a key; bare `out` teaches the form.
    assert_eq!(eval("{out:3}"), "{out: 3}");
    let e = eval("out.lines()");
    assert!(
        e.contains("REPL-only") && e.contains("out:3.lines().len()"),
        "{e}"
    );
}

/// A missing program's hint never points at a deletion (`rg` is one letter
/// from `rm`), and an often-missing tool names what does the same.
#[test]
fn a_missing_program_is_never_pointed_at_a_deletion() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut s = session_in(d.path());
    // Looked up on a PATH with nothing on it, wherever the test runs.
    let mut hint = |src: &str| match s.exec(&format!("PATH=/nonexistent {src}"), Position::Value) {
        Err(ExecError::Raised(e)) => e.hint.clone().unwrap_or_default(),
        other => panic!("{src}: {other:?}"),
    };
    let rg = hint("rg TODO");
    assert!(rg.contains("grep -rn"), "{rg}");
    assert!(!hint("rmx a").contains("'rm'"));
    assert!(!hint("kil 1").contains("'kill'"));
    assert_eq!(hint("lss"), "did you mean 'ls'?");
}

/// `ls` sorts as `-t`, `-S` and `-r` ask; a flag it does not model runs the
/// program as written (the agent's flags win); `^ls` is still the builtin.
#[test]
fn ls_and_cat_keep_the_agents_flags() {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path();
    std::fs::write(p.join("big.txt"), "x".repeat(100)).unwrap();
    std::fs::write(p.join("small.txt"), "x").unwrap();
    std::fs::create_dir(p.join("sub")).unwrap();
    std::fs::write(p.join("sub/deep.txt"), "d").unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    let f = std::fs::File::options()
        .write(true)
        .open(p.join("big.txt"))
        .unwrap();
    f.set_modified(old).unwrap();
    assert_eq!(
        run_in(p, "(ls).map(.name)"),
        r#"["big.txt", "small.txt", "sub"]"#
    );
    assert_eq!(
        run_in(p, "(ls -S *.txt).map(.name)"),
        r#"["big.txt", "small.txt"]"#
    );
    assert_eq!(
        run_in(p, "(ls -Sr *.txt).map(.name)"),
        r#"["small.txt", "big.txt"]"#
    );
    assert_eq!(
        run_in(p, "(ls -t *.txt).map(.name)"),
        r#"["small.txt", "big.txt"]"#
    );
    assert_eq!(run_in(p, "(ls -la).len()"), "3");
    // Not modelled: the program's own text.
    let r = run_in(p, "(ls -R).out");
    assert!(r.contains("./sub:") && r.contains("deep.txt"), "{r}");
    assert_eq!(run_in(p, "(^ls sub).len()"), "1");
    assert_eq!(run_in(p, "(/bin/ls sub).out"), r#""deep.txt""#);
    assert_eq!(run_in(p, "(cat -n small.txt).out"), r#""     1\tx""#);
}

/// A builtin that changes files runs the program as written when given a
/// flag it does not model, so the flag does what it says: never a file
/// named after the flag's value, never an overwrite `-n` forbids. `rm`
/// refuses such a flag instead (the system's rm deletes for good), and its
/// `-f` makes a missing path no error.
#[test]
fn mutating_builtins_honour_flags_they_do_not_model() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("a"), "hi").unwrap();
    std::fs::write(p.join("n"), "new").unwrap();
    run_in(p, "touch -t 202001010000 a");
    let mtime = std::fs::metadata(p.join("a")).unwrap().modified().unwrap();
    let year_2020 = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_577_836_800);
    assert!(
        mtime < year_2020 + std::time::Duration::from_secs(86_400 * 2),
        "{mtime:?}"
    );
    assert!(!p.join("202001010000").exists());
    run_in(p, "mkdir -m 700 d");
    let mode = std::fs::metadata(p.join("d")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(!p.join("700").exists());
    run_in(p, "mv -n n a");
    assert_eq!(
        std::fs::read_to_string(p.join("a")).unwrap(),
        "hi",
        "-n: no overwrite"
    );
    std::os::unix::fs::symlink("a", p.join("l")).unwrap();
    run_in(p, "ln -sf n l");
    assert_eq!(std::fs::read_link(p.join("l")).unwrap(), Path::new("n"));
    assert_eq!(run_in(p, "(stat -c %s a).out"), r#""2""#);
    // Modelled flags keep the builtin's typed result.
    assert_eq!(run_in(p, "(mkdir -p e/f).out.len()"), "1");
    assert_eq!(run_in(p, "(ln -s a s).out.symbolic"), "true");

    assert_eq!(run_in(p, "(rm -f missing).out"), "[]");
    assert_eq!(run_in(p, "rm -d d"), "!arg_error");
    let mut s = session_in(p);
    let Err(ExecError::Raised(e)) = s.exec("rm --one-file-system d", Position::Stmt) else {
        panic!("rm --one-file-system is refused");
    };
    assert!(
        e.msg.contains("--one-file-system is not a flag"),
        "{}",
        e.msg
    );
    assert!(p.join("d").exists(), "a refused rm removes nothing");
}

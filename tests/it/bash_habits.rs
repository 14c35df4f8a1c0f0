//! Bash one-liners agents write by reflex, through the real daemon (kernel
//! `exec`, statement position, as `shoal exec` and the conformance runner
//! send them). Every row either works (the value is checked), teaches (an
//! error code and a hint naming the Shoal form) or warns (the value plus a
//! warning code): none is a bare error or a silent divergence.

use std::path::Path;

use crate::common::*;
use serde_json::{json, Value};

#[derive(Debug)]
enum Expect {
    /// The inline render; `~text` means "contains text".
    Works(&'static str),
    /// Error code (`parse_error` for -32001) and a needle of the hint.
    Teaches(&'static str, &'static str),
    /// The inline render (as in `Works`) and a warning code.
    Warns(&'static str, &'static str),
}
use Expect::*;

const ROWS: &[(&str, Expect)] = &[
    // --- reading files ---
    ("cat notes.txt", Works("bytes(8b)")),
    ("head -n 2 notes.txt", Works(r#""a\nb""#)),
    ("head -2 notes.txt", Works(r#""a\nb""#)),
    ("head -n2 notes.txt", Works(r#""a\nb""#)),
    ("head notes.txt", Works(r#""a\nb\nc\nd""#)),
    ("head -c 3 notes.txt", Works("bytes(3b)")),
    ("head --lines=1 notes.txt", Works(r#""a""#)),
    ("tail -n 2 notes.txt", Works("\"c\\nd\"")),
    ("tail -1 notes.txt", Works("\"d\"")),
    ("wc -l notes.txt", Works("\"4 notes.txt\"")),
    ("wc -l < notes.txt", Works("\"4\"")),
    ("sort -r notes.txt", Works("\"d\\nc\\nb\\na\"")),
    ("sed -n 2p notes.txt", Works("\"b\"")),
    ("awk '{print $1}' notes.txt", Works("\"a\\nb\\nc\\nd\"")),
    ("cat notes.txt | wc -l", Teaches("parse_error", "`(cmd1).feed(cmd2 args)`")),
    // jq, git status and git diff are adapted: their `.out` is typed.
    ("jq .name data.json", Works(r#""shoal""#)),
    ("cat data.json | jq .name", Teaches("parse_error", ".feed(")),
    // --- grep and find ---
    ("grep -n b notes.txt", Works("\"2:b\"")),
    ("grep -r TODO src", Works("\"src/lib.rs:// TODO: x\"")),
    ("grep -c a notes.txt", Works("\"1\"")),
    ("grep -q a notes.txt && echo found", Works("~found")),
    ("grep -l TODO src/*.rs", Works("\"src/lib.rs\"")),
    ("find sub -name \"*.txt\"", Works("\"sub/x.txt\"")),
    ("find . -name '*.rs' | xargs grep TODO", Teaches("parse_error", ".feed(")),
    ("ls *.txt", Works("~notes.txt")),
    ("ls -la", Works("~.git")),
    ("ls src", Works("~main.rs")),
    ("ls | grep notes", Teaches("parse_error", ".feed(")),
    // --- environment ---
    ("echo $HOME", Teaches("parse_error", "`env.HOME`")),
    ("echo \"$HOME\"", Warns("~$HOME", "dollar_in_string")),
    ("echo \"home: ${HOME}\"", Teaches("undefined_var", "`env.HOME`")),
    ("FOO=bar env FOO", Works("~bar")),
    ("FOO=bar env", Works("~FOO: \"bar\"")),
    ("FOO=bar printenv FOO", Works("\"bar\"")),
    ("printenv HOME", Works("~/")),
    ("export FOO=bar", Teaches("parse_error", "`env.FOO = \"value\"`")),
    ("FOO=bar", Teaches("parse_error", "`env.FOO = \"bar\"`")),
    ("x=5", Teaches("parse_error", "`var x = \"5\"`")),
    ("x = 5", Teaches("type_error", "`var x = …`")),
    ("unset FOO", Teaches("parse_error", "`env.NAME = ")),
    ("source env.sh", Teaches("parse_error", "`sh { source env.sh; cmd }`")),
    (". ./env.sh", Teaches("parse_error", "`sh { . ./env.sh; cmd }`")),
    ("set -e", Teaches("parse_error", "`(cmd).ok`")),
    ("set -euo pipefail", Teaches("parse_error", "`(cmd).ok`")),
    ("set -x", Teaches("parse_error", "`journal --limit=5`")),
    ("echo $(date)", Teaches("parse_error", "`(ls).out`")),
    ("echo `date`", Teaches("parse_error", "`(cmd args)`")),
    ("echo $?", Teaches("parse_error", "`(cmd args).status`")),
    // --- redirects ---
    ("echo hello > out.txt", Works("null")),
    ("echo more >> notes.txt", Works("null")),
    ("sort < notes.txt", Works("\"a\\nb\\nc\\nd\"")),
    ("ls nosuch 2>/dev/null", Teaches("parse_error", "`(cmd).err`")),
    ("make > build.log 2>&1", Teaches("parse_error", "`(cmd).err`")),
    ("echo hi &> log.txt", Teaches("parse_error", "`(cmd).err`")),
    ("cat <<EOF", Teaches("parse_error", "`.feed(cmd)`")),
    ("grep a <<< \"abc\"", Teaches("parse_error", ".feed(cmd)")),
    // --- loops ---
    (
        "for f in *.txt; do echo $f; done",
        Teaches("parse_error", "`for f in glob(\"*.txt\") { echo (f) }`"),
    ),
    ("for i in 1 2 3; do echo $i; done", Teaches("parse_error", "`for i in ")),
    ("for i in $(seq 3); do echo $i; done", Teaches("parse_error", "`for i in ")),
    (
        "while read line; do echo $line; done < notes.txt",
        Teaches("parse_error", "`var n = 0; while n < 3 { n += 1 }`"),
    ),
    ("while true; do sleep 1; done", Teaches("parse_error", "while n < 3 {")),
    ("until false; do sleep 1; done", Teaches("parse_error", "`while !cond { … }`")),
    // --- conditionals ---
    ("if [ -f notes.txt ]; then echo yes; fi", Teaches("parse_error", "`if cond { … }")),
    (
        "if grep -q a notes.txt; then echo y; fi",
        Teaches("parse_error", "`if (grep -q x f.txt) { … }`"),
    ),
    ("[ -f notes.txt ] && echo yes", Teaches("parse_error", "`path(\"f.txt\").exists()`")),
    ("[[ -d sub ]] && echo dir", Teaches("parse_error", "`path(\"d\").is_dir()`")),
    ("test -f notes.txt && echo yes", Works("~yes")),
    ("true && echo ok", Works("~ok")),
    ("false || echo fallback", Works("~fallback")),
    ("cd sub && ls", Teaches("parse_error", "`cd sub; …`")),
    ("cd sub || exit 1", Teaches("parse_error", "`cd sub; …`")),
    ("pwd && ls", Teaches("parse_error", "`pwd; …`")),
    ("mkdir -p build && cd build", Warns("~/build", "builtin_in_chain")),
    ("cat notes.txt || echo missing", Warns("bytes(8b)", "builtin_in_chain")),
    ("echo a && echo b", Warns("~b", "builtin_in_chain")),
    // --- directories and files ---
    ("cd sub; pwd", Works("~/sub")),
    ("mkdir -p a/b", Works("~a/b")),
    ("touch new.txt", Works("~new.txt")),
    ("cp notes.txt copy.txt", Works("~copy.txt")),
    ("mv notes.txt moved.txt", Works("~moved.txt")),
    ("rm -r sub", Works("~trash")),
    ("stat notes.txt", Works("~size: 8b")),
    ("du -s sub", Works("~sub")),
    ("alias ll='ls -la'", Teaches("parse_error", "`alias ll = ls -la`")),
    ("echo -e \"a\\tb\"", Works("\"a\\tb\"")),
    // --- pipes into shells and interpreters ---
    ("sh -c \"echo hi | tr a-z A-Z\"", Works("\"HI\"")),
    ("bash -c 'ls src | wc -l'", Works("\"2\"")),
    ("python3 -c \"print(1+1)\"", Works("\"2\"")),
    ("ps aux | grep shoal", Teaches("parse_error", "`(cmd1).feed(cmd2 args)`")),
    // --- jobs ---
    ("sleep 0 &", Works("~task(")),
    ("sh { sleep 0 } &", Works("~task(")),
    ("(sleep 0) &", Works("~task(")),
    ("jobs", Works("[]")),
    ("wait", Teaches("parse_error", "`t.await()`")),
    ("fg", Teaches("parse_error", "`jobs`")),
    // --- git ---
    // An unmodelled flag runs git as written: its (empty) text.
    ("git status --short", Works("\"\"")),
    ("git status", Works("[]")),
    ("git log --oneline -1", Works("~init")),
    ("git rev-parse --is-inside-work-tree", Works("\"true\"")),
    ("git log --oneline | head -5", Teaches("parse_error", ".feed(")),
    (
        "git -c user.name=t -c user.email=t@x commit --allow-empty -q -m second && git log --oneline -1",
        Works("~second"),
    ),
    ("git diff --stat", Works("\"\"")),
    ("git diff", Works("[]")),
];

/// A fresh working directory: notes, sources, a JSON file, a shell env file,
/// a subdirectory, all committed in a git repository.
fn fixture(dir: &Path) {
    std::fs::write(dir.join("notes.txt"), "a\nb\nc\nd\n").unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(dir.join("src/lib.rs"), "// TODO: x\n").unwrap();
    std::fs::write(dir.join("sub/x.txt"), "hi\n").unwrap();
    std::fs::write(dir.join("data.json"), "{\"name\":\"shoal\",\"n\":3}\n").unwrap();
    std::fs::write(dir.join("env.sh"), "FOO=bar\nexport BAR=baz\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@x",
            "commit",
            "-q",
            "-m",
            "init",
        ],
    ] {
        let st = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .status()
            .expect("git");
        assert!(st.success(), "git {args:?}");
    }
}

/// What one exec answered, in the terms of a row.
struct Answer {
    /// Ok(inline) or Err((code, hint)).
    result: Result<String, (String, String)>,
    warnings: Vec<String>,
    raw: Value,
}

fn codes(ws: Option<&Value>) -> Vec<String> {
    ws.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|w| w["code"].as_str().unwrap_or("").to_string())
        .collect()
}

fn exec(conn: &mut Conn, src: &str) -> Answer {
    let r = conn.call("exec", json!({"src": src, "position": "stmt"}));
    if let Some(e) = r.get("error") {
        let code = match e["code"].as_i64() {
            Some(-32001) => "parse_error".to_string(),
            _ => e["data"]["code"].as_str().unwrap_or("").to_string(),
        };
        let hint = e["data"]["hint"].as_str().unwrap_or("").to_string();
        return Answer {
            result: Err((code, hint)),
            warnings: codes(e["data"].get("warnings")),
            raw: r.clone(),
        };
    }
    let res = &r["result"];
    // An outcome is checked by its `.out` (the command's result).
    let mut get = json!({"ref": res["ref"], "format": "inline"});
    if res["value"]["$"] == json!("outcome") {
        get["path"] = json!(".out");
    }
    let inline = conn.ok("value.get", get);
    Answer {
        result: Ok(inline["inline"].as_str().unwrap_or("").to_string()),
        warnings: codes(res.get("warnings")),
        raw: r.clone(),
    }
}

fn value_matches(want: &str, got: &str) -> bool {
    match want.strip_prefix('~') {
        Some(needle) => got.contains(needle),
        None => got == want,
    }
}

#[test]
fn bash_one_liners_work_teach_or_warn() {
    assert!(ROWS.len() >= 60, "{} rows", ROWS.len());
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut conn = d.conn();
    let mut failures = Vec::new();
    // Rows that run jq for real need it on PATH (the teaching rows do not run it).
    let jq = crate::common::have_tools(
        "bash_habits::bash_one_liners_work_teach_or_warn (jq rows)",
        &["jq"],
    );
    for (i, (src, want)) in ROWS.iter().enumerate() {
        if !jq && src.contains("jq") && !matches!(want, Teaches(..)) {
            continue;
        }
        let dir = root.path().join(format!("w{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        fixture(&dir);
        let session = format!("row{i}");
        conn.ok(
            "session.attach",
            json!({"session": session, "client": {"kind": "test", "tty": false},
                   "cwd": dir.to_string_lossy()}),
        );
        let a = exec(&mut conn, src);
        let ok = match (want, &a.result) {
            (Works(v), Ok(got)) => value_matches(v, got) && a.warnings.is_empty(),
            (Warns(v, code), Ok(got)) => {
                value_matches(v, got) && a.warnings.iter().any(|w| w == code)
            }
            (Teaches(code, needle), Err((c, hint))) => {
                // The hint names a Shoal form: backquoted code, with the needle.
                c == code && hint.contains(needle) && hint.contains('`')
            }
            _ => false,
        };
        if !ok {
            let got = match &a.result {
                Ok(inline) => format!("value {inline} warnings {:?}", a.warnings),
                Err(_) => a.raw.to_string(),
            };
            failures.push(format!("{src:?}: want {want:?}, got {got}"));
        }
        let _ = conn.call("session.close", json!({"session": session}));
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        ROWS.len(),
        failures.join("\n")
    );
}

/// A teaching error arrives before anything ran: `cd sub && ls` leaves the
/// directory where it was.
#[test]
fn cd_and_chain_is_refused_before_the_cd() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let dir = root.path().join("w");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let mut conn = d.conn();
    conn.ok(
        "session.attach",
        json!({"session": "cd", "cwd": dir.to_string_lossy()}),
    );
    let r = conn.call("exec", json!({"src": "cd sub && ls", "position": "stmt"}));
    assert_eq!(r["error"]["code"], json!(-32001), "{r}");
    let pwd = exec(&mut conn, "pwd");
    let Ok(inline) = pwd.result else {
        panic!("pwd failed: {}", pwd.raw)
    };
    assert!(!inline.contains("sub"), "cd ran: {inline}");
    // The Shoal form from the hint works.
    let ok = exec(&mut conn, "cd sub; pwd");
    assert!(
        matches!(&ok.result, Ok(p) if p.contains("sub")),
        "{}",
        ok.raw
    );
}

/// A prefix assignment reaches builtins exactly as it reaches externals, and
/// only for that command.
#[test]
fn prefix_assignment_is_the_same_for_builtins_and_externals() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut conn = d.conn();
    conn.attach("env");
    let inline = |a: Answer| a.result.unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(inline(exec(&mut conn, "SHOAL_T=1 env SHOAL_T")), "\"1\"");
    assert_eq!(
        inline(exec(&mut conn, "SHOAL_T=1 printenv SHOAL_T")),
        "\"1\""
    );
    assert_eq!(
        inline(exec(&mut conn, "(SHOAL_T=1 env).out.SHOAL_T")),
        "\"1\""
    );
    // A function sees it too, and it is gone afterwards.
    assert_eq!(
        inline(exec(
            &mut conn,
            "fn show() { (env SHOAL_T).out }\nSHOAL_T=2 show"
        )),
        "\"2\""
    );
    assert_eq!(inline(exec(&mut conn, "(env SHOAL_T).out")), "null");
    // An existing variable comes back to its value, also after an error.
    exec(&mut conn, "env.SHOAL_T = \"old\"");
    let e = exec(&mut conn, "SHOAL_T=new cat nosuch.txt");
    assert!(e.result.is_err());
    assert_eq!(inline(exec(&mut conn, "(env SHOAL_T).out")), "\"old\"");
}

/// Warnings never change a result: the value with a warning equals the
/// value of the same program written without the habit.
#[test]
fn warnings_do_not_change_results() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut conn = d.conn();
    conn.attach("w");
    let with = exec(&mut conn, "echo \"$HOME\"");
    let without = exec(&mut conn, "echo '$HOME'");
    assert_eq!(with.result.as_ref().ok(), without.result.as_ref().ok());
    assert_eq!(with.warnings, vec!["dollar_in_string".to_string()]);
    assert!(without.warnings.is_empty());
    // The warning points at the `$NAME` text and names the Shoal form.
    let w = &with.raw["result"]["warnings"][0];
    assert_eq!(w["span"], json!({"start": 6, "end": 11}), "{w}");
    assert!(w["hint"].as_str().unwrap().contains("{env.HOME}"), "{w}");
    assert!(w["message"].as_str().unwrap().contains("$HOME"), "{w}");
    // No warnings: no `warnings` key at all.
    assert!(without.raw["result"].get("warnings").is_none());
}

/// Through MCP: `structuredContent.warnings` and one text line per warning.
#[test]
fn mcp_exec_carries_warnings() {
    let root = Root::new();
    let d = Daemon::start(&root);
    let mut conn = d.conn();
    let init = conn.call(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "habits", "version": "0"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    conn.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let r = conn.call(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": "echo a && echo \"$USER\""}}),
    );
    let res = &r["result"];
    assert_eq!(res["isError"], json!(false), "{r}");
    let codes = codes(res["structuredContent"].get("warnings"));
    assert_eq!(codes, ["builtin_in_chain", "dollar_in_string"], "{r}");
    let text = res["content"][0]["text"].as_str().unwrap();
    assert_eq!(text.matches("\nwarning[").count(), 2, "{text}");
    assert!(text.contains("warning[dollar_in_string]"), "{text}");
    // The detailed output schema knows the field, and the result validates
    // against it and against the advertised one, as strict clients check.
    let detailed = shoal_proto::mcp::tools_detailed(shoal_proto::mcp::Caps {
        journal: true,
        events: true,
    });
    let exec = detailed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "shoal_exec")
        .unwrap()
        .clone();
    assert_eq!(
        exec["outputSchema"]["properties"]["warnings"]["type"],
        json!("array")
    );
    let v = jsonschema::validator_for(&exec["outputSchema"]).expect("schema compiles");
    assert!(v.is_valid(&res["structuredContent"]), "{r}");
}

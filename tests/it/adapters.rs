//! Adapters against the real tools installed here (each test makes its own
//! fixture), recorded output for tools that are missing or cannot reach
//! their service (tests/fixtures/adapters/), and the daemon's side: kernel
//! exec, MCP text, user files, `shoal status`, `shoal adapter`.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::common::*;
use serde_json::json;
use shoal_lang::adapters::{self, Catalog};
use shoal_lang::session::{Position, Session, SessionOptions};
use shoal_value::{render, Value};

mod recorded;

mod model_text;

fn catalog() -> Arc<Catalog> {
    static C: OnceLock<Arc<Catalog>> = OnceLock::new();
    C.get_or_init(|| Arc::new(Catalog::builtin())).clone()
}

fn session(dir: &Path) -> Session {
    Session::new(SessionOptions {
        cwd: dir.to_path_buf(),
        adapters: Some(catalog()),
        ..Default::default()
    })
}

fn eval(s: &mut Session, src: &str) -> Value {
    match s.exec(src, Position::Value) {
        Ok(v) => v,
        Err(e) => panic!("{src}: {e:?}"),
    }
}

fn inline(s: &mut Session, src: &str) -> String {
    render::inline(&eval(s, src))
}

fn sh(dir: &Path, script: &str) {
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .expect("sh");
    assert!(st.success(), "{script}");
}

/// The typed `.out` of an outcome.
fn out(v: &Value) -> Value {
    match v {
        Value::Outcome(o) => o
            .out
            .clone()
            .unwrap_or_else(|| panic!("untyped outcome {}", o.cmd)),
        other => other.clone(),
    }
}

fn columns(v: &Value) -> Vec<String> {
    match &out(v) {
        Value::Table(rows) => rows
            .first()
            .map(|r| r.keys().map(|k| k.to_string()).collect())
            .unwrap_or_default(),
        other => panic!("not a table: {}", render::inline(other)),
    }
}

fn rows(v: &Value) -> Vec<Arc<shoal_value::Record>> {
    match &out(v) {
        Value::Table(rows) => rows.as_ref().clone(),
        Value::List(items) => items
            .iter()
            .map(|x| match x {
                Value::Record(r) => r.clone(),
                other => panic!("not a row: {}", render::inline(other)),
            })
            .collect(),
        other => panic!("not a table: {}", render::inline(other)),
    }
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sha")
        .tempdir_in("/tmp")
        .expect("tempdir")
}

fn git_repo() -> tempfile::TempDir {
    let d = tmp();
    sh(
        d.path(),
        "git init -q -b main && git config user.email t@example.com && git config user.name Tess \
         && echo one > tracked.txt && echo r > old.txt && git add . && git commit -q -m 'first commit' \
         && echo two >> tracked.txt && git mv old.txt renamed.txt && echo s > staged.txt && git add staged.txt \
         && echo u > 'untracked file.txt'",
    );
    d
}

// ---- real tools ----------------------------------------------------------

#[test]
fn git_status_log_diff_stash_branch() {
    if !crate::common::have_tools("adapters::git_status_log_diff_stash_branch", &["git"]) {
        return;
    }
    let d = git_repo();
    let mut s = session(d.path());
    let st = eval(&mut s, "git status");
    assert_eq!(columns(&st), ["status", "state", "path", "orig"]);
    let by_path: Vec<(String, String, String)> = rows(&st)
        .iter()
        .map(|r| {
            (
                render::inline(&r["path"]),
                render::inline(&r["state"]),
                render::inline(&r["orig"]),
            )
        })
        .collect();
    assert!(
        by_path.contains(&(
            render::inline(&Value::path("tracked.txt")),
            "\"modified\"".into(),
            "null".into()
        )),
        "{by_path:?}"
    );
    assert!(
        by_path.contains(&(
            render::inline(&Value::path("staged.txt")),
            "\"added\"".into(),
            "null".into()
        )),
        "{by_path:?}"
    );
    assert!(
        by_path.contains(&(
            render::inline(&Value::path("renamed.txt")),
            "\"renamed\"".into(),
            render::inline(&Value::path("old.txt"))
        )),
        "{by_path:?}"
    );
    assert_eq!(
        inline(
            &mut s,
            r#"(git status).where(.state == "untracked").map(.path)"#
        ),
        format!("[{}]", render::inline(&Value::path("untracked file.txt")))
    );
    // .stdout keeps the raw porcelain bytes; ^git bypasses.
    let Value::Outcome(o) = &st else {
        panic!("not an outcome")
    };
    let raw = o.stdout.read_all().expect("stdout");
    assert!(
        String::from_utf8_lossy(&raw).contains("? \"untracked file.txt\"")
            || String::from_utf8_lossy(&raw).contains("? untracked file.txt")
    );
    assert!(matches!(&eval(&mut s, "(^git status).out"), Value::Str(t) if t.contains("Changes")));
    let first = eval(&mut s, "(git log).first()");
    assert!(matches!(
        eval(&mut s, "(git log).first().date"),
        Value::DateTime(_)
    ));
    assert_eq!(render::inline(&out(&first)), render::inline(&out(&first)));
    assert_eq!(
        inline(&mut s, "(git log).first().subject"),
        "\"first commit\""
    );
    assert_eq!(inline(&mut s, "(git log).first().author"), "\"Tess\"");
    assert_eq!(inline(&mut s, "(git log --limit=1).len()"), "1");
    let diff = eval(&mut s, "git diff");
    assert_eq!(columns(&diff)[..3], ["path", "old_path", "status"]);
    assert_eq!(inline(&mut s, "(git diff).first().added"), "1");
    assert_eq!(
        inline(
            &mut s,
            "(git diff --cached).where(.status == \"renamed\").first().old_path"
        ),
        render::inline(&Value::path("old.txt"))
    );
    assert!(
        matches!(&eval(&mut s, "git branch"), Value::Outcome(o) if matches!(&o.out, Some(Value::List(l)) if l.len() == 1))
    );
    assert_eq!(inline(&mut s, "(git remote).len()"), "0");
    assert_eq!(
        inline(&mut s, "(git show HEAD).map(.status)"),
        r#"["added", "added"]"#
    );
    // `--stat` is not modelled: git's text.
    assert!(inline(&mut s, "(git show --stat HEAD).out").starts_with("\"commit "));
    eval(&mut s, "git stash push -q");
    assert_eq!(inline(&mut s, "(git stash list).len()"), "1");
    // A failed run is a failed outcome (value position), not a parse error.
    let e = tmp();
    let mut s2 = session(e.path());
    assert!(matches!(&eval(&mut s2, "git status"), Value::Outcome(o) if !o.ok && o.out.is_none()));
    assert!(s2.exec("git status", Position::Stmt).is_err());
}

#[test]
fn ps_finds_this_process() {
    if !crate::common::have_tools("adapters::ps_finds_this_process", &["ps"]) {
        return;
    }
    let d = tmp();
    let mut s = session(d.path());
    let pid = std::process::id();
    let v = eval(&mut s, &format!("(ps).where(.pid == {pid})"));
    let rows = rows(&v);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(
        r.keys().map(|k| &**k).collect::<Vec<_>>(),
        ["pid", "ppid", "user", "cpu", "mem", "command"]
    );
    assert!(matches!(r["ppid"], Value::Int(_)));
    assert!(matches!(r["cpu"], Value::Float(_)));
    // This test binary's name (ps shows at most its first 15 bytes).
    let exe = std::env::current_exe().unwrap();
    let exe = exe.file_name().unwrap().to_string_lossy().into_owned();
    let Value::Str(command) = &r["command"] else {
        panic!("command: {}", render::inline(&r["command"]))
    };
    assert!(
        !command.is_empty() && exe.starts_with(&**command),
        "{exe}: {command}"
    );
}

#[test]
fn df_du_and_system_tables() {
    if !crate::common::have_tools(
        "adapters::df_du_and_system_tables",
        &[
            "df", "du", "vmstat", "ss", "who", "lscpu", "findmnt", "lsblk",
        ],
    ) {
        return;
    }
    let d = tmp();
    std::fs::write(d.path().join("blob"), vec![7u8; 64 << 10]).expect("write");
    let mut s = session(d.path());
    assert_eq!(
        inline(&mut s, r#"(df).where(.mounted == path("/")).len()"#),
        "1"
    );
    let df = eval(&mut s, "df");
    assert_eq!(
        columns(&df),
        ["filesystem", "size", "used", "avail", "use_pct", "mounted"]
    );
    assert!(matches!(rows(&df)[0]["size"], Value::Size(_)));
    let du = eval(&mut s, "du blob");
    assert_eq!(columns(&du), ["size", "path"]);
    let r = &rows(&du)[0];
    assert!(
        matches!(r["size"], Value::Size(n) if n >= 64 << 10),
        "{}",
        render::inline(&r["size"])
    );
    assert_eq!(
        render::inline(&r["path"]),
        render::inline(&Value::path("blob"))
    );
    let vm = eval(&mut s, "vmstat");
    assert_eq!(columns(&vm)[..5], ["r", "b", "swpd", "free", "buff"]);
    assert_eq!(rows(&vm).len(), 1);
    assert!(matches!(rows(&vm)[0]["free"], Value::Size(_)));
    assert!(matches!(rows(&vm)[0]["id"], Value::Int(_)));
    // ss: the daemon-free way to have a known row is a listener of our own.
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    let ss = eval(&mut s, "ss");
    assert_eq!(
        columns(&ss),
        ["netid", "state", "recv_q", "send_q", "local", "peer"]
    );
    let mine: Vec<_> = rows(&ss)
        .into_iter()
        .filter(|r| render::inline(&r["local"]) == format!("\"127.0.0.1:{port}\""))
        .collect();
    assert_eq!(mine.len(), 1);
    assert_eq!(render::inline(&mine[0]["state"]), "\"LISTEN\"");
    assert!(matches!(mine[0]["send_q"], Value::Int(_)));
    let who = eval(&mut s, "who");
    assert!(matches!(&out(&who), Value::Table(_)));
    assert!(matches!(&out(&eval(&mut s, "lscpu")), Value::Record(r) if r.contains_key("lscpu")));
    assert!(
        matches!(&out(&eval(&mut s, "findmnt")), Value::Record(r) if r.contains_key("filesystems"))
    );
    assert!(
        matches!(&out(&eval(&mut s, "lsblk")), Value::Record(r) if r.contains_key("blockdevices"))
    );
}

#[test]
fn ip_addr_route_link() {
    if !crate::common::have_tools("adapters::ip_addr_route_link", &["ip"]) {
        return;
    }
    let d = tmp();
    let mut s = session(d.path());
    let a = eval(&mut s, "ip addr");
    assert_eq!(columns(&a), ["ifname", "addr_info"]);
    assert_eq!(
        inline(&mut s, r#"(ip addr).where(.ifname == "lo").len()"#),
        "1"
    );
    let l = eval(&mut s, "ip link");
    assert_eq!(
        columns(&l),
        ["ifindex", "ifname", "mtu", "operstate", "address"]
    );
    assert_eq!(
        inline(
            &mut s,
            r#"(ip link).where(.ifname == "lo").first().mtu > 0"#
        ),
        "true"
    );
    let r = eval(&mut s, "ip route");
    assert!(matches!(&out(&r), Value::Table(_)));
}

#[test]
fn data_tools_jq_sqlite_yq() {
    if !crate::common::have_tools(
        "adapters::data_tools_jq_sqlite_yq",
        &["jq", "sqlite3", "yq"],
    ) {
        return;
    }
    let d = tmp();
    std::fs::write(d.path().join("f.json"), r#"{"a": 1, "b": [1, 2, 3]}"#).expect("write");
    std::fs::write(d.path().join("f.yml"), "name: shoal\nlist: [1, 2]\n").expect("write");
    let mut s = session(d.path());
    assert_eq!(inline(&mut s, "(jq .a f.json).out"), "1");
    assert_eq!(inline(&mut s, "(jq '.b[]' f.json).out"), "[1, 2, 3]");
    assert_eq!(inline(&mut s, "(yq .name f.yml).out"), "\"shoal\"");
    sh(d.path(), "sqlite3 t.db 'create table t(id integer, name text); insert into t values (1, \"ann\"), (2, \"bo\");'");
    let q = eval(&mut s, "sqlite3 t.db 'select id, name from t order by id'");
    assert_eq!(columns(&q), ["id", "name"]);
    assert_eq!(render::inline(&rows(&q)[1]["name"]), "\"bo\"");
    assert_eq!(
        inline(&mut s, "(sqlite3 t.db 'select 1 where 0').len()"),
        "0"
    );
}

#[test]
fn archives_tar_zip_unzip() {
    if !crate::common::have_tools("adapters::archives_tar_zip_unzip", &["tar", "zip", "unzip"]) {
        return;
    }
    let d = tmp();
    std::fs::create_dir(d.path().join("src")).expect("mkdir");
    std::fs::write(d.path().join("src/a.txt"), "a").expect("write");
    let mut s = session(d.path());
    assert!(matches!(&eval(&mut s, "tar -czf x.tgz src"), Value::Outcome(o) if o.ok));
    assert!(d.path().join("x.tgz").exists());
    assert!(matches!(&eval(&mut s, "zip -q x.zip src/a.txt"), Value::Outcome(o) if o.ok));
    assert_eq!(
        inline(&mut s, "(unzip list x.zip).out"),
        format!("[{}]", render::inline(&Value::path("src/a.txt")))
    );
    let cwd = d.path().to_string_lossy().into_owned();
    let e = adapters::effects_of(
        &catalog(),
        "tar",
        &["-czf".into(), "x.tgz".into(), "src".into()],
        d.path(),
        &|_| None,
        None,
    )
    .expect("adapted");
    assert!(
        e.contains(&adapters::Effect::FsWrite {
            paths: vec![format!("{cwd}/x.tgz")]
        }),
        "{e:?}"
    );
    assert!(
        e.contains(&adapters::Effect::FsRead {
            paths: vec![format!("{cwd}/src")]
        }),
        "{e:?}"
    );
}

#[test]
fn package_and_build_tools() {
    if !crate::common::have_tools(
        "adapters::package_and_build_tools",
        &[
            "pip",
            "rustup",
            "cargo",
            "npm",
            "python3",
            "node",
            "curl",
            "terraform",
        ],
    ) {
        return;
    }
    let d = tmp();
    let mut s = session(d.path());
    let pip = eval(&mut s, "pip list");
    assert_eq!(columns(&pip), ["name", "version"]);
    assert_eq!(
        inline(&mut s, r#"(pip list).where(.name == "pip").len()"#),
        "1"
    );
    assert!(
        matches!(&out(&eval(&mut s, "pip show pip")), Value::Record(r) if render::inline(&r["Name"]) == "\"pip\"")
    );
    assert!(
        matches!(&out(&eval(&mut s, "rustup toolchain list")), Value::List(l) if !l.is_empty())
    );
    std::fs::write(
        d.path().join("Cargo.toml"),
        "[package]\nname = \"fixture\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .expect("write");
    std::fs::create_dir(d.path().join("src")).expect("mkdir");
    std::fs::write(d.path().join("src/lib.rs"), "").expect("write");
    let md = out(&eval(&mut s, "cargo metadata --offline --no-deps"));
    let Value::Record(md) = &md else {
        panic!("not a record")
    };
    assert!(render::inline(&md["packages"]).contains("\"fixture\""));
    std::fs::write(
        d.path().join("package.json"),
        r#"{"name": "fixture-app", "version": "1.0.0"}"#,
    )
    .expect("write");
    let ls = out(&eval(&mut s, "npm ls"));
    assert!(
        matches!(&ls, Value::Record(r) if render::inline(&r["name"]) == "\"fixture-app\""),
        "{}",
        render::inline(&ls)
    );
    // Interpreters and curl run as written; their effects are declared.
    std::fs::write(d.path().join("hi.sh"), "echo hi\n").expect("write");
    assert_eq!(inline(&mut s, "(bash hi.sh).out"), "\"hi\"");
    assert_eq!(inline(&mut s, "(python3 -c 'print(6*7)').out"), "\"42\"");
    assert_eq!(inline(&mut s, "(node -e 'console.log(1+1)').out"), "\"2\"");
    assert_eq!(inline(&mut s, "(curl -s file:///dev/null).ok"), "true");
    let tf = out(&eval(&mut s, "terraform show"));
    assert!(
        matches!(&tf, Value::Record(r) if r.contains_key("format_version")),
        "{}",
        render::inline(&tf)
    );
}

#[test]
fn parse_failures_name_the_adapter_and_line() {
    let d = tmp();
    std::fs::write(d.path().join("l.json"), r#"["1", "x y"]"#).expect("write");
    // A user adapter whose tool does not print what it declares.
    let conf = tmp();
    std::fs::write(
        conf.path().join("lister.toml"),
        "bin = \"printf\"\nclass = \"data\"\noutput = { parse = \"ndjson\", type = \"table\" }\n",
    )
    .expect("write");
    let mut s = Session::new(SessionOptions {
        cwd: d.path().to_path_buf(),
        adapters: Some(Arc::new(Catalog::load(Some(conf.path())))),
        ..Default::default()
    });
    let e = s
        .exec(r#"lister '{"a": 1}\nnot json\n'"#, Position::Value)
        .unwrap_err();
    let msg = format!("{e:?}");
    assert!(
        msg.contains("AdapterParse") && msg.contains("adapter `lister`") && msg.contains("line 2"),
        "{msg}"
    );
    // The hint names the binary that runs it as written.
    assert!(msg.contains("`^printf ...`"), "{msg}");
    // jq `-r` prints raw text: not modelled, so it runs as written.
    if crate::common::have_tools(
        "adapters::parse_failures_name_the_adapter_and_line (jq)",
        &["jq"],
    ) {
        let mut s = session(d.path());
        assert_eq!(inline(&mut s, "(jq -r '.[]' l.json).out"), "\"1\\nx y\"");
    }
}

// ---- recorded output (tools missing here, or unable to reach their service) ----

fn exec(c: &mut Conn, src: &str) -> serde_json::Value {
    c.ok("exec", json!({"src": src, "position": "value"}))
}

#[test]
fn kernel_and_mcp_sessions_have_adapters() {
    let root = Root::new();
    let repo = git_repo();
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.ok(
        "session.attach",
        json!({"session": "k", "client": {"kind": "test", "tty": false}, "cwd": repo.path()}),
    );
    let r = exec(
        &mut c,
        r#"(git status).where(.state == "untracked").map(.path)"#,
    );
    assert_eq!(r["render"], json!("[\"untracked file.txt\"]"), "{r}");
    let r = exec(&mut c, "(git log).first().date");
    assert_eq!(r["value"]["$"], json!("datetime"), "{r}");
    let r = exec(&mut c, "(^git status).out");
    assert_eq!(r["value"]["$"], json!("str"), "{r}");
    let r = exec(&mut c, r#"(df).where(.mounted == path("/")).len()"#);
    assert_eq!(r["render"], json!("1"), "{r}");
    if crate::common::have_tools(
        "adapters::kernel_and_mcp_sessions_have_adapters (ps)",
        &["ps"],
    ) {
        let pid = d.pid();
        let r = exec(
            &mut c,
            &format!("(ps).where(.pid == {pid}).first().command"),
        );
        assert_eq!(r["render"], json!("shoal"), "{r}");
    }
    // Statement position: the block render of the typed value, under the
    // branch line and above the line naming the raw form.
    let r = c.ok("exec", json!({"src": "git status", "position": "stmt"}));
    let text = r["render"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("on branch main\nstatus") && text.contains("untracked"),
        "{text}"
    );
    assert!(
        text.ends_with("\ntyped by the git adapter; raw text: ^git status"),
        "{text}"
    );

    // MCP: the text content shows the table.
    let mut m = d.conn();
    m.ok("initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
    m.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let src = format!("cd '{}'; git status", repo.path().display());
    let r = m.ok(
        "tools/call",
        json!({"name": "shoal_exec", "arguments": {"src": src}}),
    );
    let text = r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        text.contains("state") && text.contains("renamed") && text.contains("untracked file.txt"),
        "{r}"
    );

    // The conformance harness measures the language without adapters.
    let mut k = d.conn();
    k.ok("session.attach", json!({"session": "conf", "client": {"kind": "conformance", "tty": false}, "cwd": repo.path()}));
    let r = exec(&mut k, "(git status --porcelain).out");
    assert_eq!(r["value"]["$"], json!("str"), "{r}");
}

#[test]
fn user_files_override_and_bad_ones_are_warnings_in_status() {
    let root = Root::new();
    let dir = root.path().join("config/shoal/adapters");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("hello.toml"),
        "bin = \"echo\"\nclass = \"data\"\ninvoke = [\"a b c\"]\noutput = { parse = \"lines\", type = \"list<str>\" }\n",
    )
    .expect("write");
    std::fs::write(
        dir.join("broken.toml"),
        "class = \"data\"\noutput = { parse = \"nope\", type = \"str\" }\n",
    )
    .expect("write");
    let d = Daemon::start(&root);
    let mut c = d.conn();
    c.attach("u");
    let r = exec(&mut c, "(hello).out");
    assert_eq!(r["render"], json!(r#"["a b c"]"#), "{r}");
    let st = c.ok("daemon.status", json!({}));
    let warnings = st["adapters"]["warnings"].to_string();
    assert!(
        warnings.contains("broken.toml:2:20: unknown parser `nope`"),
        "{st}"
    );
    assert_eq!(st["adapters"]["count"], json!(50));
    let sock = d.socket.to_string_lossy().into_owned();
    let (code, text, _) = run(&root, &["status", "--socket", &sock], &[]);
    assert_eq!(code, 0);
    assert!(
        text.contains("adapters   50 loaded") && text.contains("broken.toml"),
        "{text}"
    );
    let (code, listed, _) = run(&root, &["adapter", "list"], &[]);
    assert_eq!(code, 0);
    assert!(
        listed.contains("hello") && listed.contains("user"),
        "{listed}"
    );
}

#[test]
fn adapter_list_and_check() {
    let root = Root::new();
    let (code, text, _) = run(&root, &["adapter", "list", "--json"], &[]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    let list = v["adapters"].as_array().expect("adapters");
    assert!(list.len() >= 49, "{}", list.len());
    let forms: usize = list
        .iter()
        .map(|a| a["forms"].as_array().map_or(0, |f| f.len()))
        .sum();
    assert!(forms >= 85, "{forms}");
    let git = list.iter().find(|a| a["name"] == "git").expect("git");
    assert_eq!(git["source"], json!("built-in"));
    assert!(git["forms"]
        .as_array()
        .expect("forms")
        .iter()
        .any(|f| f["sub"] == "status" && f["parse"] == "porcelain-v2"));
    let bad = root.path().join("mine.toml");
    std::fs::write(
        &bad,
        "class = \"vcs\"\n[sub.x]\neffects = [\"fs.read($nope)\"]\n",
    )
    .expect("write");
    let (code, _, err) = run(
        &root,
        &["adapter", "check", bad.to_str().expect("utf8")],
        &[],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("mine.toml:3:12:") && err.contains("$nope"),
        "{err}"
    );
    let good = root.path().join("good.toml");
    std::fs::write(
        &good,
        "class = \"data\"\noutput = { parse = \"json\", type = \"value\" }\n",
    )
    .expect("write");
    let (code, out, _) = run(
        &root,
        &["adapter", "check", good.to_str().expect("utf8")],
        &[],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ok"));
}

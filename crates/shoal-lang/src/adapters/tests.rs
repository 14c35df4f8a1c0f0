//! Catalog, argument building and effects (the function the planner calls).

use std::ffi::OsString;
use std::path::Path;

use super::*;

fn cat() -> Catalog {
    Catalog::builtin()
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

fn argv(c: &Catalog, head: &str, args: &str) -> Vec<String> {
    let a = words(args);
    let (ad, f) = c.resolve(head, &a).expect("adapted");
    build(ad, f, &a)
        .expect("builds")
        .0
        .into_iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn builtin_files_load_without_warnings() {
    let c = cat();
    assert!(c.warnings.is_empty(), "{:#?}", c.warnings);
    assert_eq!(c.len(), 49);
    let forms: usize = c
        .list()
        .iter()
        .map(|a| a.subs.len() + usize::from(a.root.is_some()))
        .sum();
    assert!(forms >= 85, "{forms} forms");
}

#[test]
fn argv_pins_consumes_and_types_params() {
    let c = cat();
    assert_eq!(
        argv(&c, "git", "status -b"),
        ["status", "--porcelain=v2", "--branch"]
    );
    assert_eq!(argv(&c, "git", "stash list"), ["stash", "list"]);
    assert_eq!(
        argv(&c, "git", "log --limit=3"),
        [
            "log",
            "--pretty=format:%H%x00%an%x00%aI%x00%s",
            "-z",
            "-n",
            "3"
        ]
    );
    assert_eq!(argv(&c, "git", "log --limit 3")[3..], ["-n", "3"]);
    assert_eq!(argv(&c, "git", "show HEAD")[0], "show");
    assert_eq!(
        argv(&c, "git", "show HEAD").last().map(String::as_str),
        Some("HEAD")
    );
    assert_eq!(argv(&c, "df", "-kP /"), ["-kP", "/"]);
    assert_eq!(
        argv(&c, "du", "--max_depth=1 .")[..2],
        ["-k", "--max-depth=1"]
    );
    let a = words("log --limit=many");
    let (ad, f) = c.resolve("git", &a).expect("adapted");
    let e = build(ad, f, &a).unwrap_err();
    assert_eq!(e.code, ErrorCode::ArgError);
    // Not adapted: unknown tool, unknown sub-command, bare-only forms.
    assert!(c.resolve("frobnicate", &words("x")).is_none());
    assert!(c.resolve("git", &words("frobnicate")).is_none());
    assert!(c.resolve("systemctl", &words("restart x")).is_none());
    assert!(c.resolve("systemctl", &words("--all")).is_some());
    assert!(c.resolve("ps", &words("aux")).is_none());
}

/// Is `head args` typed (every flag modelled), or run as written?
fn typed(c: &Catalog, head: &str, args: &str) -> bool {
    let a = words(args);
    c.resolve(head, &a)
        .is_some_and(|(ad, f)| f.output.is_some() && modelled(ad, f, &a))
}

#[test]
fn the_agents_flags_win() {
    let c = cat();
    // Modelled: forwarded (`-5`, `--all`), value flags, params, the pin again.
    for (head, args) in [
        ("git", "log"),
        ("git", "log -5"),
        ("git", "log -n 5 --all --author=Tess"),
        ("git", "log --limit=2 --since 2024-01-01"),
        ("git", "log -- src/main.rs"),
        ("git", "status"),
        ("git", "status -b --untracked-files=no"),
        ("git", "diff"),
        ("git", "diff -p --cached"),
        ("git", "diff -U5 HEAD~1"),
        ("git", "show HEAD"),
        ("git", "branch -a -v"),
        ("cargo", "metadata --offline --no-deps"),
        ("jq", "-c .a f.json"),
        ("du", "-s -d 1 ."),
        ("rg", "-i -g '*.rs' foo"),
    ] {
        assert!(typed(&c, head, args), "{head} {args} should be typed");
    }
    // Anything else runs as written.
    for (head, args) in [
        ("git", "log --oneline -5"),
        ("git", "log -p"),
        ("git", "log --stat"),
        ("git", "log --format=%s"),
        ("git", "log --pretty=oneline"),
        ("git", "log --graph"),
        ("git", "status -s"),
        ("git", "status --porcelain"),
        ("git", "diff --stat"),
        ("git", "diff --numstat"),
        ("git", "diff --name-only"),
        ("git", "show --stat HEAD"),
        ("git", "show -s HEAD"),
        ("jq", "-r .a f.json"),
        ("df", "-h"),
        ("du", "-sh ."),
        ("ps", "-ef"),
        ("rg", "-n foo"),
        ("rg", "-l foo"),
        ("sqlite3", "-csv t.db 'select 1'"),
    ] {
        assert!(
            !typed(&c, head, args),
            "{head} {args} should run as written"
        );
    }
}

#[test]
fn raw_form_quotes_what_needs_it() {
    let a = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
    assert_eq!(raw_form("git", &a(&["log", "-5"])), "^git log -5");
    assert_eq!(
        raw_form("git", &a(&["log", "--author=Tess Ng", "--", "a b.txt"])),
        "^git log '--author=Tess Ng' -- 'a b.txt'"
    );
    assert_eq!(raw_form("echo", &a(&["it's {x}"])), r#"^echo "it's \{x\}""#);
    assert_eq!(raw_form("git", &a(&[""])), "^git ''");
}

fn env_none(_: &str) -> Option<String> {
    None
}

fn fx(c: &Catalog, head: &str, args: &str, cwd: &Path) -> Vec<serde_json::Value> {
    effects_of(c, head, &words(args), cwd, &env_none, None)
        .expect("adapted")
        .iter()
        .map(Effect::to_json)
        .collect()
}

#[test]
fn effects_are_concrete() {
    let c = cat();
    let cwd = Path::new("/w");
    assert_eq!(
        serde_json::Value::Array(fx(&c, "git", "status", cwd)),
        serde_json::json!([
            {"kind": "fs_read", "paths": ["/w"]},
            {"kind": "proc_spawn", "bin_hash": "", "argv0": "git"}
        ])
    );
    assert_eq!(
        fx(&c, "du", "a /abs", cwd)[0],
        serde_json::json!({"kind": "fs_read", "paths": ["/w/a", "/abs"]})
    );
    assert_eq!(
        fx(&c, "du", "", cwd)[0],
        serde_json::json!({"kind": "fs_read", "paths": ["/w"]})
    );
    let curl = fx(&c, "curl", "-o out.html https://example.org:8443/x", cwd);
    assert_eq!(
        curl[0],
        serde_json::json!({"kind": "net_connect", "host": "example.org", "port": 8443})
    );
    assert_eq!(
        curl[1],
        serde_json::json!({"kind": "fs_write", "paths": ["/w/out.html"]})
    );
    let tar = fx(&c, "tar", "-czf x.tgz -C /tmp src", cwd);
    assert!(
        tar.contains(&serde_json::json!({"kind": "fs_write", "paths": ["/w/x.tgz"]})),
        "{tar:?}"
    );
    assert!(
        tar.contains(&serde_json::json!({"kind": "fs_write", "paths": ["/tmp"]})),
        "{tar:?}"
    );
    assert!(
        tar.contains(&serde_json::json!({"kind": "fs_read", "paths": ["/w/src"]})),
        "{tar:?}"
    );
    assert!(effects_of(&c, "frobnicate", &[], cwd, &env_none, None).is_none());
    assert!(effects_of(&c, "git", &words("frobnicate"), cwd, &env_none, None).is_none());
}

#[test]
fn flags_that_read_options_or_run_programs_are_opaque() {
    let c = cat();
    let cwd = Path::new("/w");
    let opaque =
        |head: &str, args: &str| effects_of(&c, head, &words(args), cwd, &env_none, None).is_none();
    for args in [
        "-K c.cfg https://example.com/",
        "--config c.cfg https://example.com/",
        "--config=c.cfg https://example.com/",
        "--conf c.cfg https://example.com/",
        "-sK c.cfg https://example.com/",
        "-Kc.cfg https://example.com/",
        "-sKv c.cfg https://example.com/",
        "https://example.com/ -K c.cfg",
        "--alt-svc cache.txt https://example.com/",
    ] {
        assert!(opaque("curl", args), "curl {args}");
        assert!(c.opaque_flag("curl", &words(args)).is_some(), "curl {args}");
    }
    for args in [
        "-c core.sshCommand=x push",
        "--config-env=core.sshCommand=X fetch",
        "--exec-path=/w/bin status",
        "-C /w status",
        "push --receive-pack=/w/x /w/r",
        "push --exec /w/x /w/r",
        "fetch --upload-pack /w/x /w/r",
        "pull --upload-p=/w/x /w/r",
        "diff --ext-diff",
        "show --ext-diff HEAD",
    ] {
        assert!(opaque("git", args), "git {args}");
    }
    // What stays modelled: plain calls, look-alike flags and operands after `--`.
    for (head, args) in [
        ("curl", "-s -o out https://example.com/"),
        ("curl", "--compressed https://example.com/"),
        ("curl", "-o -- https://example.com/"),
        ("git", "diff --text"),
        ("git", "diff --exit-code"),
        ("git", "push origin main"),
        ("git", "fetch --unshallow origin"),
        ("git", "add -- --exec"),
    ] {
        assert!(!opaque(head, args), "{head} {args}");
    }
}

#[test]
fn git_push_connects_to_the_remote_host() {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(d.path().join(".git")).expect("mkdir");
    std::fs::write(
        d.path().join(".git/config"),
        "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = git@github.com:acme/app.git\n[remote \"mirror\"]\n\turl = https://gitlab.example.com/acme/app.git\n",
    )
    .expect("config");
    let sub = d.path().join("src");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let c = cat();
    for (args, host, port) in [
        ("push origin main", "github.com", 22),
        ("push", "github.com", 22),
        ("push -u mirror main", "gitlab.example.com", 443),
        ("push https://github.com/x/y main", "github.com", 443),
    ] {
        let e = fx(&c, "git", args, &sub);
        assert!(
            e.contains(&serde_json::json!({"kind": "net_connect", "host": host, "port": port})),
            "{args}: {e:?}"
        );
        assert!(!e.iter().any(|x| x["kind"] == "opaque"), "{args}: {e:?}");
    }
    let add = fx(&c, "git", "add a.rs", &sub);
    let index = d.path().join(".git/index").to_string_lossy().into_owned();
    assert!(
        add.contains(&serde_json::json!({"kind": "fs_write", "paths": [index]})),
        "{add:?}"
    );
}

#[test]
fn kube_endpoint_from_kubeconfig() {
    let d = tempfile::tempdir().expect("tempdir");
    let kc = d.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\ncurrent-context: dev\ncontexts:\n- name: dev\n  context: {cluster: c1, user: u}\nclusters:\n- name: c1\n  cluster: {server: 'https://10.1.2.3:6443'}\n",
    )
    .expect("write");
    let kcs = kc.to_string_lossy().into_owned();
    let env = move |k: &str| (k == "KUBECONFIG").then(|| kcs.clone());
    let e = effects_of(
        &cat(),
        "kubectl",
        &words("get pods"),
        Path::new("/w"),
        &env,
        None,
    )
    .expect("adapted");
    assert!(
        e.contains(&Effect::NetConnect {
            host: "10.1.2.3".into(),
            port: 6443
        }),
        "{e:?}"
    );
}

#[test]
fn run_adapted_types_the_outcome_and_keeps_stdout() {
    use shoal_value::{Outcome, OutputBytes};
    let c = cat();
    let mk = |status: i64, out: &[u8]| {
        let out = out.to_vec();
        move |_: &str, _: Vec<OsString>| -> Result<Value, ShoalError> {
            Ok(Value::Outcome(std::sync::Arc::new(Outcome {
                status: Some(status),
                ok: status == 0,
                signal: None,
                dur_ns: 0,
                pid: 1,
                cmd: "git status".into(),
                stdout: OutputBytes::from(out.clone()),
                stderr: OutputBytes::from(Vec::new()),
                out: None,
                span: None,
                truncated: false,
                typed: None,
            })))
        }
    };
    let args: Vec<OsString> = vec!["status".into()];
    let mut spawn = mk(0, b"? new.txt\n");
    let v = run_adapted(Some(&c), "git", &args, false, false, &mut spawn)
        .expect("adapted")
        .expect("runs");
    let Value::Outcome(o) = &v else { panic!() };
    assert!(matches!(&o.out, Some(Value::Table(t)) if t.len() == 1));
    assert_eq!(&*o.stdout.read_all().expect("bytes"), b"? new.txt\n");
    // The render says who typed it and names the raw form, last.
    let r = shoal_value::render::block(&v, 80);
    assert_eq!(
        r.lines().last(),
        Some("typed by the git adapter; raw text: ^git status"),
        "{r}"
    );
    // A flag the form does not model runs the tool as written.
    let short: Vec<OsString> = vec!["status".into(), "-s".into()];
    assert!(run_adapted(Some(&c), "git", &short, false, false, &mut spawn).is_none());
    // A parse failure is an error naming the adapter and the line.
    let mut spawn = mk(0, b"? ok\nZ bogus\n");
    let e = run_adapted(Some(&c), "git", &args, false, false, &mut spawn)
        .expect("adapted")
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::AdapterParse);
    assert!(
        e.msg.contains("git status") && e.msg.contains("line 2"),
        "{}",
        e.msg
    );
    // A failed run is not parsed; statement position raises cmd_failed.
    let mut spawn = mk(128, b"");
    let e = run_adapted(Some(&c), "git", &args, false, true, &mut spawn)
        .expect("adapted")
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::CmdFailed);
    // ok_codes: rg exit 1 (no match) is success.
    let mut spawn = mk(1, b"");
    let v = run_adapted(Some(&c), "rg", &["x".into()], false, true, &mut spawn)
        .expect("adapted")
        .expect("ok");
    assert!(matches!(&v, Value::Outcome(o) if o.ok));
    // Bypass and unknown heads run as written.
    let mut spawn = mk(0, b"");
    assert!(run_adapted(Some(&c), "git", &args, true, false, &mut spawn).is_none());
    assert!(run_adapted(Some(&c), "git", &["push".into()], false, false, &mut spawn).is_none());
    assert!(run_adapted(None, "git", &args, false, false, &mut spawn).is_none());
}

#[test]
fn user_files_override_and_bad_files_warn() {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        d.path().join("git.toml"),
        "class = \"vcs\"\n[sub.status]\noutput = { parse = \"lines\", type = \"list<str>\" }\n",
    )
    .expect("write");
    std::fs::write(
        d.path().join("mytool.toml"),
        "class = \"data\"\noutput = { parse = \"json\", type = \"value\" }\n",
    )
    .expect("write");
    std::fs::write(
        d.path().join("bad.toml"),
        "class = \"data\"\n[sub.x]\noutput = { parse = \"lines\", type = \"list<strng>\" }\n",
    )
    .expect("write");
    std::os::unix::fs::symlink(d.path().join("mytool.toml"), d.path().join("link.toml"))
        .expect("symlink");
    let c = Catalog::load(Some(d.path()));
    assert_eq!(c.len(), 50, "git overridden, mytool added");
    assert!(matches!(
        c.get("git").map(|a| &a.source),
        Some(Source::User(_))
    ));
    assert!(c
        .get("git")
        .and_then(|a| a.subs.first())
        .is_some_and(|f| f.invoke.is_empty()));
    assert!(c.get("mytool").is_some());
    assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
    let bad = c
        .warnings
        .iter()
        .find(|w| w.contains("bad.toml"))
        .expect("bad warned");
    assert!(bad.contains("bad.toml:3:42: unknown type `strng`"), "{bad}");
    assert!(
        c.warnings.iter().any(|w| w.contains("link.toml")),
        "symlink refused"
    );
}

#[test]
fn check_errors_are_located() {
    let cases = [
        ("clas = \"vcs\"\n", 1, 1, "unknown field"),
        (
            "class = \"vcs\"\n[sub.x]\noutput = { parse = \"xml\", type = \"record\" }\n",
            3,
            20,
            "unknown parser `xml`",
        ),
        (
            "class = \"nope\"\noutput = { parse = \"json\", type = \"record\" }\n",
            1,
            9,
            "unknown class",
        ),
        (
            "class = \"vcs\"\n[sub.x]\neffects = [\"fs.read($nope)\"]\n",
            3,
            12,
            "`$nope`",
        ),
        (
            "class = \"vcs\"\n[sub.x]\noutput = { parse = \"kv\", type = \"list<str>\" }\n",
            3,
            33,
            "cannot produce",
        ),
    ];
    for (text, line, col, msg) in cases {
        let e = format::load("t.toml", "t", text, Source::Builtin).unwrap_err();
        assert_eq!((e.line, e.column), (line, col), "{text}: {e}");
        assert!(e.message.contains(msg), "{text}: {e}");
    }
}

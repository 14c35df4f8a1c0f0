//! `shoal worker`, driven over its pair as the daemon drives it: the
//! process confines itself before it evaluates anything (seccomp mode 2,
//! `no_new_privs`, a pid of its own), then a token principal's builtins,
//! methods and children meet the kernel inside it, judged on disk; `out:N`
//! and `user.*` events cross back to the daemon's side, and the session's
//! views when they change; planning derives effects without running; an
//! approved plan's place holds; an interrupt ends a running job; closing
//! the pair ends the worker.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;

use crate::common::*;
use crate::redteam::{principal, SYSTEM_READ};
use serde_json::{json, Value};
use shoal_daemon::worker::pair::{Incoming, Pair};

/// The daemon's end of a session's line: one job out, its answer back.
struct Line {
    out: UnixStream,
    answers: BufReader<UnixStream>,
}

impl Line {
    fn new(s: UnixStream) -> Line {
        Line {
            answers: BufReader::new(s.try_clone().unwrap()),
            out: s,
        }
    }

    fn ask(&mut self, job: Value) -> Value {
        self.out.write_all(format!("{job}\n").as_bytes()).unwrap();
        let mut answer = String::new();
        self.answers.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap()
    }
}

/// The evaluation an exec's answer carries (`null`: it failed instead).
fn done(answer: &Value) -> &Value {
    &answer["outcome"]["Ok"]["done"]
}

/// A field of `/proc/PID/status` (empty: no such process or field).
pub fn status_field(pid: u32, name: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or("")
        .trim()
        .to_string()
}

#[test]
fn a_worker_confines_itself_and_evaluates_inside_the_kernels_bounds() {
    let root = Root::new();
    let base = root.path().canonicalize().unwrap();
    let (proj, outside) = (base.join("proj"), base.join("outside"));
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let secret = outside.join("secret");
    std::fs::write(&secret, "WORKER-SECRET-7731").unwrap();
    let mut read: Vec<String> = SYSTEM_READ.iter().map(|s| s.to_string()).collect();
    read.push(format!("{}/**", proj.display()));
    let grant = vec![format!("{}/**", proj.display())];
    let config = base.join("shoal.toml");
    let section = principal(
        "agent:w",
        "opaque = \"deny\"\nauto_apply = \"in-grant\"\nsession_write = true\nnamespaces = \"off\"\nproc_spawn = [\"cat\", \"sh\", \"sleep\"]",
        &read,
        &grant,
        &grant,
    );
    std::fs::write(&config, format!("[policy]\n{section}")).unwrap();

    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut child = Command::new(BIN)
        .arg("worker")
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .env("XDG_STATE_HOME", base.join("state"))
        .env("XDG_CONFIG_HOME", base.join("config"))
        .spawn()
        .unwrap();
    let init = json!({
        "principal": "agent:w",
        "config": std::fs::read_to_string(&config).unwrap(),
        "state_dir": base.join("state/shoal"),
        "protected": [base.join("state")],
    });
    (&ours).write_all(format!("{init}\n").as_bytes()).unwrap();
    let mut first = String::new();
    BufReader::with_capacity(1, &ours)
        .read_line(&mut first)
        .unwrap();
    let ready: Value = serde_json::from_str(&first).unwrap();
    let pid = ready["ready"]["pid"].as_u64().expect("ready") as u32;
    assert_eq!(pid, child.id());
    assert_ne!(pid, std::process::id());
    assert_eq!(
        status_field(pid, "Seccomp"),
        "2",
        "the worker runs under seccomp"
    );
    assert_eq!(status_field(pid, "NoNewPrivs"), "1");

    // The daemon's side: `out:N` lookups and published events.
    let (events_tx, events) = mpsc::channel::<Value>();
    let pair = Pair::start(ours, "test-pair", move |pair, i| match i {
        Incoming::Request { id, body, .. } => {
            assert_eq!(body["op"], "lookup");
            let n = body["n"].as_u64().unwrap();
            pair.reply(id, Ok(json!({"$": "int", "v": n * 100})));
        }
        Incoming::Note(body) => {
            let _ = events_tx.send(body);
        }
        Incoming::Abandoned { .. } | Incoming::Closed => {}
    })
    .unwrap();
    let open = json!({"op": "open", "session": "w1", "cwd": proj, "env": [["HOME", base]],
        "session_memory": 0, "spill_bytes": 0});
    // The session's line: its jobs and their answers, one at a time.
    let (ours_l, theirs_l) = UnixStream::pair().unwrap();
    pair.request_with_fds(open, &[std::os::fd::AsFd::as_fd(&theirs_l)])
        .unwrap();
    drop(theirs_l);
    let line = std::cell::RefCell::new(Line::new(ours_l));
    let job = std::cell::Cell::new(0);
    // `check: false` is an approved plan's apply: no gate on the derived
    // effects, so only the kernel stands in the way.
    let run = |src: String, check: bool| -> Value {
        job.set(job.get() + 1);
        line.borrow_mut().ask(
            json!({"exec": {"session": "w1", "job": job.get(), "src": src,
            "value_position": false, "tty": false, "width": 80, "caller": null, "check": check}}),
        )
    };
    let exec = |src: String| run(src, true);

    // Builtins, methods and children outside the grants: nothing happens on disk.
    let pwn = outside.join("PWNED");
    let attempts = [
        format!("{:?}.save({:?})", "x", pwn.display().to_string()),
        format!("rm({:?}, permanent: true)", secret.display().to_string()),
        format!(
            "cp({:?}, {:?})",
            secret.display().to_string(),
            pwn.display().to_string()
        ),
        format!("touch({:?})", pwn.display().to_string()),
        format!("sh(\"-c\", \"echo x > {}\")", pwn.display()),
    ];
    let reads = [
        format!("cat({:?})", secret.display().to_string()),
        format!("path({:?}).read()", secret.display().to_string()),
    ];
    for check in [true, false] {
        for src in &attempts {
            let r = run(src.clone(), check);
            assert!(!pwn.exists(), "{src}: {r}");
            assert_eq!(
                std::fs::read_to_string(&secret).unwrap(),
                "WORKER-SECRET-7731"
            );
        }
        for src in &reads {
            let r = run(src.clone(), check);
            assert!(!r.to_string().contains("WORKER-SECRET"), "{src}: {r}");
        }
    }
    // Inside the grant it works: the control.
    let made = proj.join("made.txt");
    let r = exec(format!("\"inside\".save({:?})", made.display().to_string()));
    assert!(done(&r).is_object(), "{r}");
    assert_eq!(std::fs::read_to_string(&made).unwrap(), "inside");
    let r = exec(format!("cat {:?}", made.display().to_string()));
    assert!(done(&r)["ran"]["value"]["shown"]["body"]
        .as_str()
        .unwrap()
        .contains("inside"));

    // Planning derives effects in the session, running nothing.
    let planned = proj.join("planned.txt");
    let d = line.borrow_mut().ask(json!({"derive": {"caller": null,
            "src": format!("\"p\".save({:?})", planned.display().to_string())}}));
    let effects = d["outcome"]["Ok"]["derived"]["effects"].to_string();
    assert!(
        effects.contains("fs_write") && effects.contains("planned.txt"),
        "{d}"
    );
    assert!(!planned.exists(), "planning ran the program");
    let bad = line
        .borrow_mut()
        .ask(json!({"derive": {"caller": null, "src": "let = ("}}));
    assert!(bad["outcome"].get("Err").is_some(), "{bad}");

    // Its trash is the principal's private directory: `rm` works in the grant.
    let gone = proj.join("gone.txt");
    std::fs::write(&gone, "x").unwrap();
    let r = exec(format!("rm({:?})", gone.display().to_string()));
    assert!(
        done(&r)["ran"].get("value").is_some() && !gone.exists(),
        "{r}"
    );

    // `out:N` is the daemon's; `user.*` events go to it.
    let r = exec("out:3 + 1".into());
    assert_eq!(
        done(&r)["ran"]["value"]["value"],
        json!({"$": "int", "v": 301}),
        "{r}"
    );
    exec("channel(\"user.t\").emit(42)".into());
    let ev = events.recv().unwrap();
    assert_eq!(
        (ev["op"].as_str(), ev["channel"].as_str()),
        (Some("publish"), Some("user.t"))
    );

    // The session's views cross when they change (`cd`), not otherwise.
    let r = exec("1 + 1".into());
    assert!(
        r.get("live").is_none(),
        "unchanged views crossed again: {r}"
    );
    std::fs::create_dir_all(proj.join("sub")).unwrap();
    let r = exec("cd sub".into());
    assert_eq!(r["live"]["cwd"], json!(proj.join("sub")), "{r}");
    // An approved plan's place: elsewhere it does not run.
    job.set(job.get() + 1);
    let elsewhere = line
        .borrow_mut()
        .ask(json!({"exec": {"session": "w1", "job": job.get(),
            "src": format!("\"moved\".save({:?})", proj.join("moved.txt").display().to_string()),
            "value_position": false, "tty": false, "width": 80, "caller": null, "check": false,
            "place": {"cwd": proj, "env": "0"}}}));
    assert_eq!(
        elsewhere["outcome"]["Err"]["rpc"]["data"]["moved"],
        json!(true),
        "{elsewhere}"
    );
    assert!(!proj.join("moved.txt").exists());

    // An interrupt reaches the running job: its reply comes back as a cancel,
    // not as the value of a finished `sleep`.
    let next = job.get() + 1;
    job.set(next);
    let mut line = line.into_inner();
    let long = std::thread::spawn(move || {
        line.ask(
            json!({"exec": {"session": "w1", "job": next, "src": "sleep 600; 7",
                "value_position": false, "tty": false, "width": 80, "caller": null, "check": true}}),
        )
    });
    // Interrupt until the reply comes (the first may land before the job starts).
    while !long.is_finished() {
        pair.note(json!({"op": "interrupt", "job": next}));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let r = long.join().unwrap();
    assert!(done(&r)["ran"].get("value").is_none(), "{r}");

    // A closed pair ends the worker.
    pair.close();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

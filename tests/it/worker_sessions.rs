//! A token principal's sessions evaluate in its worker process, started by
//! the daemon (docs/leash.md, "Layers"): one confined process per principal
//! (seccomp, `no_new_privs`), the parent of every program its sessions
//! start, while the local user's programs stay the daemon's children. The
//! session keeps its bindings, `out:N`, background tasks and `cmd &` across
//! the pair; a worker killed is replaced by the next exec (with fresh
//! bindings, and an error that says so); the daemon going ends the worker
//! and what it runs; none of the daemon's environment is the worker's.

use std::time::Duration;

use crate::common::*;
use crate::redteam::{principal, Arena, SYSTEM_READ};
use crate::worker::status_field;
use serde_json::{json, Value};

/// A daemon with `agent:w`: its project, no namespaces (so a child's parent
/// is the process that started it), any program.
fn arena() -> Arena {
    Arena::start(
        |proj, _| {
            let pj = Arena::proj_grant(proj);
            let mut read: Vec<String> = SYSTEM_READ.iter().map(|s| s.to_string()).collect();
            read.extend(pj.clone());
            read.push("/proc/**".into());
            principal(
                "agent:w",
                "opaque = \"allow\"\nauto_apply = \"in-grant\"\nsession_write = true\nnamespaces = \"off\"",
                &read,
                &pj,
                &pj,
            )
        },
        &[(API_KEY.0, API_KEY.1)],
    )
}

/// A variable of the daemon's own environment (the user's shell's).
const API_KEY: (&str, &str) = ("WORKER_TEST_API_KEY", "sk-daemon-only-4471");

/// The pid of the process that starts the session's programs.
fn parent_of_children(c: &mut Conn) -> i32 {
    let r = c.ok("exec", json!({"src": "sh { echo $PPID }"}));
    let text = r["render"].as_str().unwrap_or_default().to_string();
    text.lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {r}"))
}

fn attach(a: &Arena, token: Option<&str>, session: &str) -> Conn {
    let mut c = a.d.conn();
    let mut p =
        json!({"session": session, "cwd": a.proj, "client": {"kind": "test", "tty": false}});
    if let Some(t) = token {
        p["token"] = json!(t);
    }
    let r = c.call("session.attach", p);
    assert!(r.get("error").is_none(), "attach {session}: {r}");
    c
}

/// Start a `sleep` that left its process group (`setsid`) in `c`'s session
/// and wait until it runs: what lists its pids (tagged `tag`).
fn start_setsid(c: &mut Conn, tag: &str) -> impl Fn() -> Vec<i32> {
    let marker = format!("{tag}{}", std::process::id() % 1000);
    c.ok(
        "exec",
        json!({"src": format!("sh {{ setsid sleep {marker}.5 > /dev/null 2>&1 < /dev/null & }}")}),
    );
    let pids = move || pids_running(&format!("sleep {marker}.5"));
    eventually("the setsid program runs", Duration::from_secs(10), || {
        (!pids().is_empty()).then_some(())
    });
    pids
}

fn alive(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty() && !stat.contains(") Z ")
}

#[test]
fn a_tokens_sessions_evaluate_in_one_confined_worker_process() {
    let a = arena();
    let daemon = a.d.pid();
    let tok = create_token(&a.root, "agent:w");
    let mut w1 = attach(&a, Some(&tok), "w1");
    let worker = parent_of_children(&mut w1);
    assert_ne!(
        worker, daemon,
        "a token's program is not the daemon's child"
    );
    assert_eq!(status_field(worker as u32, "PPid"), daemon.to_string());
    assert_eq!(
        status_field(worker as u32, "Seccomp"),
        "2",
        "the worker is confined"
    );
    assert_eq!(status_field(worker as u32, "NoNewPrivs"), "1");
    let cmdline = std::fs::read(format!("/proc/{worker}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("worker"),
        "{cmdline:?}"
    );
    // None of the daemon's own environment is the worker's.
    let environ = std::fs::read(format!("/proc/{worker}/environ")).unwrap();
    let daemon_env = std::fs::read(format!("/proc/{daemon}/environ")).unwrap();
    assert!(String::from_utf8_lossy(&daemon_env).contains(API_KEY.1));
    assert!(!String::from_utf8_lossy(&environ).contains(API_KEY.1));
    // The principal's second session: the same process (one budget).
    let mut w2 = attach(&a, Some(&tok), "w2");
    assert_eq!(parent_of_children(&mut w2), worker);
    // The local user's programs stay the daemon's.
    let mut home = attach(&a, None, "home");
    assert_eq!(parent_of_children(&mut home), daemon);

    // Bindings, `out:N` and the session's views cross.
    w1.ok("exec", json!({"src": "let x = 41"}));
    let r = w1.ok("exec", json!({"src": "x + 1"}));
    assert_eq!(r["value"], json!({"$": "int", "v": 42}), "{r}");
    let n = r["ref"].as_str().unwrap().to_string();
    let r = w1.ok("exec", json!({"src": format!("{n} * 2")}));
    assert_eq!(r["value"], json!({"$": "int", "v": 84}), "{r}");
    let sub = a.p("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("noteshere.txt"), "").unwrap();
    w1.ok(
        "exec",
        json!({"src": format!("let limit_of_rows = 3; cd {}", sub.display())}),
    );
    // The local user beside the agent completes from the session's views
    // as the worker left them: its cwd and its names.
    let mut human = attach(&a, None, "w1@agent:w");
    let r = human.ok("complete", json!({"src": "cat notesh"}));
    assert_eq!(r["candidates"], json!(["noteshere.txt"]), "{r}");
    let r = human.ok("complete", json!({"src": "1 + limit_"}));
    assert_eq!(r["candidates"], json!(["limit_of_rows"]), "{r}");

    // A background task starts on a fork of the session there.
    let r = w1.ok("exec", json!({"src": "x + 2", "background": true}));
    let task = r["task"].as_str().unwrap().to_string();
    let rec = w1.ok("task.await", json!({"task": task, "timeout_ms": 20000}));
    assert_eq!(rec["state"], "completed", "{rec}");
    let v = w1.ok(
        "value.get",
        json!({"ref": rec["result_ref"], "format": "json"}),
    );
    assert_eq!(v["value"], json!({"$": "int", "v": 43}), "{v}");
    // So does `cmd &`, and `jobs` and `.await()` reach the session's tasks.
    let r = w1.ok(
        "exec",
        json!({"src": "let t = sh { echo from-task } &; t.await().out.trim()"}),
    );
    assert_eq!(r["value"], json!({"$": "str", "v": "from-task"}), "{r}");
    let r = w1.ok("exec", json!({"src": "jobs.len() >= 2"}));
    assert_eq!(r["value"], json!({"$": "bool", "v": true}), "{r}");
    // A wait there ends at a cancel of the waiter (the worker's pair wakes
    // on the interrupt), and the awaited task runs on.
    // The daemon's side of the wait ends with it: no thread of the daemon
    // waits on for the task.
    let answering = || {
        std::fs::read_dir(format!("/proc/{daemon}/task"))
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|c| c.trim() == "shoal-answer")
            .count()
    };
    crate::background::cancel_a_wait(&mut w1, &|| {
        eventually("the daemon's wait ended", Duration::from_secs(20), || {
            (answering() == 0).then_some(())
        })
    });
    let mut observer = attach(&a, None, "observer");
    crate::background::cancel_a_foreground_wait(&mut w1, &mut observer, "w1@agent:w");
}

#[test]
fn a_killed_worker_is_replaced_and_a_killed_daemon_takes_its_worker_along() {
    let mut a = arena();
    let tok = create_token(&a.root, "agent:w");
    let mut c = attach(&a, Some(&tok), "k");
    c.ok("exec", json!({"src": "let x = 1"}));
    let first = parent_of_children(&mut c);
    // A program that left its process group: it goes with the worker.
    let orphan = start_setsid(&mut c, "27");
    kill_pid(first);
    eventually("the worker is gone", Duration::from_secs(10), || {
        (!alive(first)).then_some(())
    });
    eventually("its setsid program too", Duration::from_secs(20), || {
        orphan().is_empty().then_some(())
    });
    // The next exec runs in a new worker, without the old bindings; at
    // most one call hears that the worker ended.
    let mut r = c.call("exec", json!({"src": "x"}));
    if r.to_string().contains("worker process ended") {
        r = c.call("exec", json!({"src": "x"}));
    }
    assert!(r["error"].to_string().contains('x'), "{r}");
    let second = parent_of_children(&mut c);
    assert_ne!(second, first);

    // A long program in a background task; then the daemon dies.
    let marker = format!("30{}", std::process::id() % 1000);
    let r = c.ok(
        "exec",
        json!({"src": format!("sh {{ sleep {marker}.5 }}"), "background": true}),
    );
    assert!(r["task"].is_string(), "{r}");
    let sleeping = || pids_running(&format!("sleep {marker}.5"));
    eventually("the program runs", Duration::from_secs(10), || {
        (!sleeping().is_empty()).then_some(())
    });
    a.d.signal(libc::SIGKILL);
    let _ = a.d.wait_timeout(Duration::from_secs(10));
    eventually(
        "the worker and its program end with the daemon",
        Duration::from_secs(20),
        || (!alive(second) && sleeping().is_empty()).then_some(()),
    );
}

/// A closed session leaves the worker; the principal's last one ends it.
#[test]
fn the_worker_ends_with_its_principals_last_session() {
    let a = arena();
    let tok = create_token(&a.root, "agent:w");
    let mut c1 = attach(&a, Some(&tok), "c1");
    let mut c2 = attach(&a, Some(&tok), "c2");
    let worker = parent_of_children(&mut c1);
    assert_eq!(parent_of_children(&mut c2), worker);
    let r: Value = c1.ok("session.close", json!({"session": "c1@agent:w"}));
    assert!(r.is_object(), "{r}");
    // c2 still evaluates there.
    assert_eq!(parent_of_children(&mut c2), worker);
    c2.ok("session.close", json!({"session": "c2@agent:w"}));
    eventually("the worker ends", Duration::from_secs(20), || {
        (!alive(worker)).then_some(())
    });
}

/// The state letter of `/proc/PID/stat` (`None`: gone or a zombie).
fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat.rsplit(") ").next()?.chars().next()?;
    (state != 'Z').then_some(state)
}

/// A token's background task runs in its worker; its record shows its
/// output as it comes, and suspend, resume and cancel reach its program.
#[test]
fn a_tokens_task_is_suspended_resumed_and_cancelled_in_its_worker() {
    let a = arena();
    let tok = create_token(&a.root, "agent:w");
    let mut c = attach(&a, Some(&tok), "s");
    let marker = format!("29{}", std::process::id() % 1000);
    let r = c.ok(
        "exec",
        json!({"src": format!("sh {{ echo up-{marker}; echo warm 1>&2; sleep {marker}.5 }}"), "background": true}),
    );
    let t = r["task"].as_str().unwrap().to_string();
    let pids = eventually("the program runs", Duration::from_secs(10), || {
        let p = pids_running(&format!("sleep {marker}.5"));
        (!p.is_empty()).then_some(p)
    });
    // Its output shows in the task's record while it runs.
    eventually("the tail", Duration::from_secs(10), || {
        let row = c.ok("task.get", json!({"task": t}));
        let tail = &row["tail"];
        (tail["stdout"] == json!(format!("up-{marker}\n")) && tail["stderr"] == json!("warm\n"))
            .then_some(())
    });
    let all = |want: fn(Option<char>) -> bool| pids.iter().all(|p| want(proc_state(*p)));
    let r = c.ok("task.suspend", json!({"task": t}));
    assert_eq!(r["state"], "suspended", "{r}");
    eventually("stopped", Duration::from_secs(20), || {
        all(|s| s == Some('T')).then_some(())
    });
    let r = c.ok("task.resume", json!({"task": t}));
    assert_eq!(r["state"], "running", "{r}");
    eventually("running again", Duration::from_secs(20), || {
        all(|s| matches!(s, Some('S') | Some('R'))).then_some(())
    });
    c.ok("task.suspend", json!({"task": t}));
    eventually("stopped again", Duration::from_secs(20), || {
        all(|s| s == Some('T')).then_some(())
    });
    c.ok("task.cancel", json!({"task": t}));
    let rec = c.ok("task.await", json!({"task": t, "timeout_ms": 20000}));
    assert_eq!(rec["state"], "cancelled", "{rec}");
    eventually("the program is gone", Duration::from_secs(20), || {
        all(|s| s.is_none()).then_some(())
    });
}

/// What a token's session started ends with the session, `setsid` ones
/// included (they are in the session's cgroup, not only in its process
/// groups).
#[test]
fn closing_a_tokens_session_ends_its_setsid_programs() {
    let a = arena();
    let tok = create_token(&a.root, "agent:w");
    // Another session keeps the principal's worker alive.
    let mut keep = attach(&a, Some(&tok), "keep");
    let worker = parent_of_children(&mut keep);
    let mut c = attach(&a, Some(&tok), "z");
    let escaped = start_setsid(&mut c, "28");
    // The session goes on: the program is still there after the exec.
    c.ok("exec", json!({"src": "1 + 1"}));
    assert!(!escaped().is_empty());
    c.ok("session.close", json!({"session": "z@agent:w"}));
    eventually(
        "the setsid program ends with the session",
        Duration::from_secs(20),
        || escaped().is_empty().then_some(()),
    );
    assert!(alive(worker), "the worker serves the other session still");
    assert_eq!(parent_of_children(&mut keep), worker);
}

/// A worker runs with the policy the daemon runs with, not with what the
/// config file says since: an edit that widens the grants waits for a
/// restart of the daemon, for the token's worker too.
#[test]
fn a_worker_takes_the_daemons_policy_not_the_files_later_text() {
    let a = arena();
    let cfg = a.root.path().join("shoal.toml");
    let wider = std::fs::read_to_string(&cfg).unwrap().replace(
        "write = [",
        &format!("write = [{:?}, ", a.outside.display().to_string() + "/**"),
    );
    std::fs::write(&cfg, wider).unwrap();
    let tok = create_token(&a.root, "agent:w");
    let mut c = attach(&a, Some(&tok), "late");
    let target = a.out("late.txt");
    let r = c.call(
        "exec",
        json!({"src": format!("sh {{ echo x > {} }}", target.display())}),
    );
    assert!(!target.exists(), "the file's later grant applied: {r}");
    // The daemon's own grant still works.
    let inside = a.p("late.txt");
    c.ok(
        "exec",
        json!({"src": format!("sh {{ echo x > {} }}", inside.display())}),
    );
    assert!(inside.exists());
}

/// A worker killed while its session is idle: the session's next exec runs
/// in a new worker and says that the session's bindings went with the old
/// one (the model reads it beside the result); the exec after it says
/// nothing more. Judged by the replies.
#[test]
fn an_exec_that_runs_in_a_replaced_worker_says_so() {
    let a = arena();
    let tok = create_token(&a.root, "agent:w");
    let mut c = attach(&a, Some(&tok), "w1");
    c.ok("exec", json!({"src": "let kept = 5"}));
    let worker = parent_of_children(&mut c);
    let pidfd = rustix::process::Pid::from_raw(worker)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok())
        .expect("a pidfd of the worker");
    kill_pid(worker);
    let mut pfd = [rustix::event::PollFd::new(
        &pidfd,
        rustix::event::PollFlags::IN,
    )];
    let t = rustix::event::Timespec {
        tv_sec: 30,
        tv_nsec: 0,
    };
    assert_eq!(rustix::event::poll(&mut pfd, Some(&t)).unwrap_or(0), 1);
    let r = c.ok("exec", json!({"src": "1 + 1"}));
    assert_eq!(r["value"], json!({"$": "int", "v": 2}), "{r}");
    assert_eq!(r["warnings"][0]["code"], json!("worker_replaced"), "{r}");
    let r = c.call("exec", json!({"src": "kept"}));
    assert!(r.get("error").is_some(), "the binding went: {r}");
    assert!(!r.to_string().contains("worker_replaced"), "said once: {r}");
}

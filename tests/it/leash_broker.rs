//! A token's worker and its namespace broker as processes: the worker
//! confined whole, the broker the parent of its programs and of the holders
//! of each principal's namespaces, and what happens when one of them ends.
//! Judged by `/proc` and by the replies.

use crate::common::*;
use crate::leash_namespaces::{conn, setup, setup_with, sleeps_running};
use serde_json::json;

/// The pids whose parent is `parent` and whose command line holds `needle`.
fn children_of(parent: i32, needle: &str) -> Vec<i32> {
    pids_running(needle)
        .into_iter()
        .filter(|p| crate::worker::status_field(*p as u32, "PPid") == parent.to_string())
        .collect()
}

/// A token's worker confines itself whole: not one of its threads is left
/// without its seccomp filter and `no_new_privs` (the namespaces are made
/// by a broker process of its own, started before the worker confined
/// itself). The token's program descends from that broker, not from the
/// worker. Judged by `/proc`.
#[test]
fn a_tokens_worker_keeps_no_unconfined_thread_and_its_broker_starts_its_programs() {
    if !have_tools(
        "a_tokens_worker_keeps_no_unconfined_thread_and_its_broker_starts_its_programs",
        &["bwrap"],
    ) {
        return;
    }
    let s = setup();
    let mut c = conn(&s, Some("agent:ns"), "ns");
    let marker = format!("33{}", std::process::id() % 1000);
    let r = c.call(
        "exec",
        json!({"src": format!("sh {{ sleep {marker}.5 }} &")}),
    );
    assert!(r.get("error").is_none(), "{r}");
    let program = sleeps_running(&marker, &[".5"])[0];
    let daemon = s.d.pid();
    let workers = children_of(daemon, "worker");
    assert_eq!(workers.len(), 1, "one worker: {workers:?}");
    let worker = workers[0];
    let threads: Vec<u32> = std::fs::read_dir(format!("/proc/{worker}/task"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    assert!(!threads.is_empty());
    for t in &threads {
        let st = std::fs::read_to_string(format!("/proc/{worker}/task/{t}/status")).unwrap();
        let field = |name: &str| {
            st.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        assert_eq!(field("Seccomp"), "2", "thread {t} of the worker: {st}");
        assert_eq!(field("NoNewPrivs"), "1", "thread {t} of the worker");
    }
    let brokers = children_of(worker, "broker");
    assert_eq!(brokers.len(), 1, "the worker's broker: {brokers:?}");
    // Up from the program: the broker comes before the worker.
    let mut at = program;
    let mut chain = vec![at];
    while at != brokers[0] && at != worker && at > 1 {
        at = crate::worker::status_field(at as u32, "PPid")
            .parse()
            .unwrap_or(0);
        chain.push(at);
    }
    assert_eq!(at, brokers[0], "the program's ancestors: {chain:?}");

    // A broker killed from outside: no program starts outside the
    // namespaces; the worker ends with it and the next exec runs in a new
    // worker with a new broker.
    kill_pid(brokers[0]);
    let again = format!("again-{marker}");
    let src = format!("sh {{ echo {again}; cat /proc/1/cmdline }}");
    let out = eventually("a new worker", std::time::Duration::from_secs(30), || {
        let r = c.call("exec", json!({"src": src}));
        let text = r.to_string();
        text.contains(&again).then_some(text)
    });
    assert!(
        out.contains("shoal-confine"),
        "the program runs in a pid namespace of its own: {out}"
    );
    let workers = children_of(daemon, "worker");
    assert_eq!(workers.len(), 1, "{workers:?}");
    assert_ne!(workers[0], worker, "the worker was replaced");
    assert_eq!(children_of(workers[0], "broker").len(), 1);
}

/// A program in namespaces cannot reach its pid 1 (`shoal-confine run`,
/// which stays beside it until it ends) through `/proc/1`: not the status
/// pipe it reports on (a forged status), nor a descriptor the daemon
/// inherited. Judged by the exit status the exec answers.
#[test]
fn a_program_in_namespaces_cannot_reach_its_confinement_step() {
    if !have_tools(
        "a_program_in_namespaces_cannot_reach_its_confinement_step",
        &["bwrap"],
    ) {
        return;
    }
    let s = setup();
    let mut c = conn(&s, Some("agent:ns"), "ns");
    let r = c.call(
        "exec",
        json!({"src": "sh { readlink /proc/1/fd/3 /proc/1/fd/0 2>/dev/null; true }"}),
    );
    assert_eq!(
        r["result"]["value"]["out"]["v"],
        json!(""),
        "pid 1's descriptors are out of reach: {r}"
    );
    let src = r"sh { printf '\000\000\000\000' > /proc/1/fd/3; exit 7 }";
    let r = c.call("exec", json!({"src": src}));
    assert_eq!(
        r["error"]["data"]["status"],
        json!(7),
        "the status is the program's: {r}"
    );
}

/// One principal's PTYs, opened from many connections, never end another
/// principal's namespaces (and with them the private `/tmp` it wrote):
/// each principal's holders are its own. Judged by the victim's file.
#[test]
fn one_principals_ptys_leave_anothers_private_tmp_alone() {
    if !have_tools(
        "one_principals_ptys_leave_anothers_private_tmp_alone",
        &["bwrap"],
    ) {
        return;
    }
    let s = setup();
    let mut victim = conn(&s, Some("agent:req"), "victim");
    let file = "${TMPDIR:-/tmp}/victim-file";
    let screen = victim.pty_screen_after(&format!("echo V-DATA-5 > {file}; cat {file}"), 80, 24);
    assert!(screen.to_string().contains("V-DATA-5"), "{screen}");
    let tok = create_token(&s.root, "agent:ns");
    let mut held = Vec::new();
    for _ in 0..18 {
        let mut c = s.d.conn();
        let r = c.attach_token("flood", &tok);
        assert!(r.get("error").is_none(), "{r}");
        c.pty_screen_after("true", 80, 24);
        held.push(c);
    }
    let screen = victim.pty_screen_after(&format!("cat {file}"), 80, 24);
    assert!(
        screen.to_string().contains("V-DATA-5"),
        "the victim's private /tmp went: {screen}"
    );
    // One holder per principal, however many connections it has.
    let brokers = children_of(s.d.pid(), "broker");
    assert_eq!(brokers.len(), 1, "the daemon's broker: {brokers:?}");
    let holders = children_of(brokers[0], ".shoal-confine hold");
    assert_eq!(holders.len(), 2, "{holders:?}");
}

/// A PTY program whose arguments are too long for the broker is refused
/// and the broker (shared by every principal's PTYs) stays: another
/// principal's PTY starts after it, through the same broker. A broker
/// that is gone all the same is started again at the next PTY.
#[test]
fn an_oversized_pty_spawn_leaves_the_shared_broker_running() {
    if !have_tools(
        "an_oversized_pty_spawn_leaves_the_shared_broker_running",
        &["bwrap"],
    ) {
        return;
    }
    let s = setup_with("[daemon]\nmax_frame_bytes = 104857600\n");
    let mut a = conn(&s, Some("agent:ns"), "a");
    let screen = a.pty_screen_after("echo FIRST-4", 80, 24);
    assert!(screen.to_string().contains("FIRST-4"), "{screen}");
    let brokers = children_of(s.d.pid(), "broker");
    assert_eq!(brokers.len(), 1, "{brokers:?}");
    let huge = "x".repeat(70 << 20);
    let r = a.call(
        "pty.open",
        json!({"cmd": "echo", "args": [huge], "cols": 80, "rows": 24}),
    );
    assert!(r.get("error").is_some(), "refused");
    let mut b = conn(&s, Some("agent:req"), "b");
    let screen = b.pty_screen_after("echo AFTER-4", 80, 24);
    assert!(screen.to_string().contains("AFTER-4"), "{screen}");
    assert_eq!(children_of(s.d.pid(), "broker"), brokers, "the same broker");
    // Killed from outside: the next PTY starts a new one.
    kill_pid(brokers[0]);
    let again = eventually("a new broker", std::time::Duration::from_secs(30), || {
        let p = b.call(
            "pty.open",
            json!({"cmd": "sh", "args": ["-c", "echo AGAIN-4; sleep 30"], "cols": 80, "rows": 24}),
        );
        p["result"]["pty_id"].as_str().map(str::to_string)
    });
    let r = b.ok(
        "pty.read",
        json!({"pty_id": again, "wait_for": "AGAIN-4", "timeout_ms": 10000}),
    );
    assert_eq!(r["matched"], json!(true), "{r}");
    let now = children_of(s.d.pid(), "broker");
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, brokers);
    assert!(
        std::fs::read_to_string(format!("/proc/{}/stat", brokers[0])).is_err(),
        "the dead broker was reaped"
    );
}

/// A worker killed from outside: the exec that finds it gone says so, and
/// the next one runs in a new worker, even when the daemon has not yet
/// noticed the old one's end (a race: looped). Judged by the replies.
#[test]
fn the_exec_after_the_one_that_found_its_worker_killed_runs() {
    if !have_tools(
        "the_exec_after_the_one_that_found_its_worker_killed_runs",
        &["bwrap"],
    ) {
        return;
    }
    let s = setup();
    let mut c = conn(&s, Some("agent:ns"), "ns");
    let daemon = s.d.pid();
    // Its children, as each thread of it lists them (fast: no /proc scan).
    let worker = || {
        std::fs::read_dir(format!("/proc/{daemon}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .flat_map(|k| {
                k.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                    .collect::<Vec<_>>()
            })
            .find(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| c.windows(6).any(|w| w == b"worker"))
            })
    };
    for round in 0..20 {
        let r = c.call("exec", json!({"src": "1 + 1"}));
        assert!(r.get("error").is_none(), "round {round}: {r}");
        kill_pid(worker().expect("the worker"));
        // It may have reached the worker already: its answer is either.
        c.call("exec", json!({"src": "sh { sleep 0.1 } &"}));
        let r = c.call("exec", json!({"src": "sh { sleep 0.1 } &"}));
        assert!(r.get("error").is_none(), "round {round}: {r}");
    }
}

/// A principal's spawns reuse its running namespace holder (the worker
/// names it by the spec it remembers); once that holder is gone, the next
/// spawn starts a new one from a spec made then, its roots checked for
/// links again (the broker starts none from a remembered spec). Judged by
/// the program's output and the broker's children.
#[test]
fn a_spawn_after_its_holder_ended_runs_in_a_new_one() {
    if !have_tools(
        "a_spawn_after_its_holder_ended_runs_in_a_new_one",
        &["bwrap"],
    ) {
        return;
    }
    let s = setup();
    let mut c = conn(&s, Some("agent:ns"), "held");
    let mut run = |n: u32| {
        let r = c.call("exec", json!({"src": format!("sh {{ echo HELD-{n} }}")}));
        assert!(r.to_string().contains(&format!("HELD-{n}")), "{r}");
    };
    run(1);
    let workers = children_of(s.d.pid(), "worker");
    assert_eq!(workers.len(), 1, "{workers:?}");
    let brokers = children_of(workers[0], "broker");
    assert_eq!(brokers.len(), 1, "{brokers:?}");
    let holders = || children_of(brokers[0], ".shoal-confine hold");
    let first = holders();
    assert_eq!(first.len(), 1, "{first:?}");
    run(2);
    assert_eq!(holders(), first, "the running holder is reused");
    kill_pid(first[0]);
    eventually(
        "the holder ends",
        std::time::Duration::from_secs(10),
        || {
            let state = crate::worker::status_field(first[0] as u32, "State");
            (state.is_empty() || state.starts_with('Z')).then_some(())
        },
    );
    run(3);
    let second = holders();
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(second, first, "a new holder");
}

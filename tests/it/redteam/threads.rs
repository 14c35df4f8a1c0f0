//! A token's one exec must not exhaust the daemon's threads (and the machine's pids):
//! `parallel` over a long list of thunks that all wait runs them on a bounded number of
//! threads, the local user's calls are served meanwhile, and the result is whole.

use super::*;

fn config(proj: &Path, _root: &Path) -> String {
    project_only("agent:rt", proj)
}

/// The daemon's thread count (`/proc/PID/status`).
fn threads(pid: i32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Thunks started: each appended one byte.
fn started(marks: &Path) -> usize {
    std::fs::metadata(marks)
        .map(|m| m.len() as usize)
        .unwrap_or(0)
}

#[test]
fn parallel_over_a_long_list_keeps_the_daemon_to_a_few_threads() {
    let a = Arena::start(config, &[]);
    let pid = a.d.pid();
    let marks = a.p("started");
    std::fs::write(&marks, "").expect("marks");
    let go = a.p("go");
    let mut local = a.kernel(None, "home", None);
    assert_eq!(local.exec("1 + 1")["result"]["render"], json!("2"));
    let before = threads(pid);

    // 400 thunks that each mark their start (a byte) and wait for `go`.
    let src = format!(
        "parallel((1..=400).map(i => () => {{ \"x\".append({marks}); \
         while !path({go}).exists() {{ sleep 20ms }}; i }})).len()",
        marks = lit(&marks),
        go = lit(&go)
    );
    let mut attacker = a.kernel(Some("agent:rt"), "rt", None);
    let probe = attacker.exec(&src.replace("400", "0"));
    assert_eq!(
        probe["result"]["render"],
        json!("0"),
        "the attack is allowed: {probe}"
    );
    let call = std::thread::spawn(move || attacker.exec(&src));
    eventually("thunks start", Duration::from_secs(30), || {
        (started(&marks) >= 2).then_some(())
    });
    // The local user is served meanwhile: a parallel of its own, and a child.
    assert_eq!(
        local.exec("parallel(() => 1, () => 2)")["result"]["render"],
        json!("[1, 2]")
    );
    let during = threads(pid);
    let running = started(&marks);
    assert!(
        running <= 16 && during < before + 40,
        "ESCAPED: one exec holds {running} thunks on {} more threads",
        during.saturating_sub(before)
    );
    std::fs::write(&go, "").expect("go");
    let r = call.join().expect("attacker thread");
    assert_eq!(r["result"]["render"], json!("400"), "every thunk ran: {r}");
    assert_eq!(started(&marks), 400);
}

/// Round two: a token holding every `parallel` thread it can get (background tasks whose
/// thunks wait) must not leave the local user's `parallel` to run its thunks in turn. The
/// local user's two thunks meet only when they run at the same time.
#[test]
fn a_token_holding_parallel_threads_leaves_the_local_user_its_own() {
    let a = Arena::start(config, &[]);
    let marks = a.p("started");
    std::fs::write(&marks, "").expect("marks");
    let go = a.p("go");
    let flag = a.out("met");
    let mut attacker = a.kernel(Some("agent:rt"), "rt", None);
    let hold = format!(
        "parallel((1..=16).map(i => () => {{ \"x\".append({marks}); \
         while !path({go}).exists() {{ sleep 20ms }}; i }})).len()",
        marks = lit(&marks),
        go = lit(&go)
    );
    for _ in 0..5 {
        let r = attacker
            .conn
            .call("exec", json!({"src": hold, "background": true}));
        assert!(r["result"]["task"].is_string(), "{r}");
    }
    // Every thread the tokens' pool gives, and the five tasks' own, are taken.
    eventually(
        "the token holds its threads",
        Duration::from_secs(30),
        || (started(&marks) >= 37).then_some(()),
    );
    let mut local = a.kernel(None, "home", None);
    // Thunk 1 waits (at most 5 s) for thunk 2's flag: met only when both run at once.
    let src = format!(
        "parallel(() => {{ var n = 0; while !path({f}).exists() && n < 250 {{ sleep 20ms; n += 1 }}; \
         if path({f}).exists() {{ \"met\" }} else {{ \"alone\" }} }}, \
         () => {{ \"x\".save({f}); \"set\" }})",
        f = lit(&flag)
    );
    let r = local.exec(&src);
    std::fs::write(&go, "").expect("go");
    assert_eq!(
        r["result"]["render"],
        json!("[\"met\", \"set\"]"),
        "ESCAPED: the local user's parallel ran its thunks in turn: {r}"
    );
}

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

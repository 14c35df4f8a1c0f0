//! `shoal status [--json] [--watch]`: the operator view of docs/protocol.md §7.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use shoal_proto::kernel::{
    ActorRow, AdaptersStatus, AttachParams, DaemonFacts, DaemonStatus, HttpStatus, JournalStatus,
    KernelRequest, LeashStatus, Limits, PtyEntry, SessionRow, TaskRow,
};

use super::client::{connect, Client};
use super::output;

pub fn run(socket: Option<PathBuf>, as_json: bool, watch: bool) -> i32 {
    let path = shoal_base::paths::socket_path(socket.as_deref());
    loop {
        let status = match fetch(&path) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("shoal status: no daemon answers on {}: {e}", path.display());
                return 1;
            }
        };
        if as_json {
            // The daemon's reply as it came.
            output::line(&serde_json::to_string(&status).unwrap_or_default());
        } else {
            let typed: DaemonStatus = match serde_json::from_value(status) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("shoal status: the daemon's status does not read: {e}");
                    return 1;
                }
            };
            if watch {
                output::text("\x1b[H\x1b[2J");
            }
            output::text(&human(&typed));
        }
        if !watch {
            return 0;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn fetch(path: &std::path::Path) -> Result<Value, String> {
    let stream = connect(path).map_err(|e| e.to_string())?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut c = Client::new(stream).map_err(|e| e.to_string())?;
    let attach = AttachParams::client(None, "status", false);
    c.call(&KernelRequest::Attach(attach))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.0.to_string())?;
    c.call(&KernelRequest::DaemonStatus)
        .map_err(|e| e.to_string())?
        .map_err(|e| e.0.to_string())
}

fn dur(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s / 60) % 60),
    }
}

/// `-` for what the daemon does not know.
fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// What the human view shows of either form of `daemon.status` (a token
/// principal's lacks the daemon's facts, actors, journal, sandbox, adapters).
struct View<'a> {
    version: &'a str,
    uptime_ms: u64,
    facts: Option<&'a DaemonFacts>,
    rss_bytes: Option<u64>,
    http: Option<&'a HttpStatus>,
    actors: &'a [ActorRow],
    leash: Option<&'a LeashStatus>,
    sessions: &'a [SessionRow],
    journal: Option<&'a JournalStatus>,
    limits: &'a Limits,
    adapters: Option<&'a AdaptersStatus>,
}

impl<'a> View<'a> {
    fn of(st: &'a DaemonStatus) -> Self {
        match st {
            DaemonStatus::Local(l) => View {
                version: &l.daemon.version,
                uptime_ms: l.daemon.uptime_ms,
                facts: Some(&l.daemon),
                rss_bytes: l.rss_bytes,
                http: l.http.as_ref(),
                actors: &l.actors,
                leash: Some(&l.leash),
                sessions: &l.sessions,
                journal: l.journal.as_ref(),
                limits: &l.limits,
                adapters: Some(&l.adapters),
            },
            DaemonStatus::Token(t) => View {
                version: &t.daemon.version,
                uptime_ms: t.daemon.uptime_ms,
                facts: None,
                rss_bytes: None,
                http: None,
                actors: &[],
                leash: None,
                sessions: &t.sessions,
                journal: None,
                limits: &t.limits,
                adapters: None,
            },
        }
    }
}

/// The human rendering: daemon facts, the actor tree, sessions.
pub fn human(st: &DaemonStatus) -> String {
    let v = View::of(st);
    let d = v.facts;
    let mut out = String::new();
    out.push_str(&format!(
        "shoal {} · pid {} · up {}\n",
        v.version,
        or_dash(d.map(|d| d.pid)),
        dur(v.uptime_ms)
    ));
    let rss = v
        .rss_bytes
        .map(|b| format!("{:.1} MB", b as f64 / 1e6))
        .unwrap_or("-".into());
    let activated = if d.is_some_and(|d| d.socket_activated) {
        " (socket-activated)"
    } else {
        ""
    };
    out.push_str(&format!(
        "  socket     {}{activated}\n",
        or_dash(d.map(|d| &d.socket))
    ));
    if let Some(h) = v.http {
        out.push_str(&format!(
            "  http       {} · connections {} · streams {} · sessions {} · requests {}\n",
            h.url, h.connections, h.streams, h.sessions, h.requests
        ));
    }
    out.push_str(&format!(
        "  state dir  {}\n",
        or_dash(d.map(|d| &d.state_dir))
    ));
    out.push_str(&format!(
        "  config     {}\n",
        d.and_then(|d| d.config.as_deref())
            .unwrap_or("(none; defaults)")
    ));
    out.push_str(&format!(
        "  logs       {}\n",
        or_dash(d.map(|d| &d.log_dir))
    ));
    out.push_str(&format!("  rss        {rss}\n\n"));

    out.push_str(&format!(
        "{:<44} {:<10} {:>7} {:>8} {:>8} {:>8}  {}\n",
        "ACTOR", "STATE", "MAILBOX", "HANDLED", "RESTARTS", "AGE", "LAST ERROR"
    ));
    let ids: Vec<u64> = v.actors.iter().map(|a| a.id).collect();
    fn walk(out: &mut String, a: &ActorRow, all: &[ActorRow], depth: usize) {
        let label = format!("{}{} {}", "  ".repeat(depth), a.kind, a.name);
        out.push_str(&format!(
            "{:<44} {:<10} {:>7} {:>8} {:>8} {:>8}  {}\n",
            label,
            a.state,
            a.mailbox,
            a.handled,
            a.restarts,
            dur(a.age_ms),
            or_dash(a.last_error.as_ref())
        ));
        for c in all.iter().filter(|c| c.parent == Some(a.id)) {
            walk(out, c, all, depth + 1);
        }
    }
    for r in v
        .actors
        .iter()
        .filter(|a| a.parent.is_none_or(|p| !ids.contains(&p)))
    {
        walk(&mut out, r, v.actors, 0);
    }

    if let Some(l) = v.leash {
        let ps: Vec<String> = l
            .principals
            .iter()
            .map(|p| {
                format!(
                    "{} (caps_enforced {}, opaque {})",
                    p.name, p.caps_enforced, p.opaque
                )
            })
            .collect();
        out.push_str(&format!(
            "\nleash     tier {} (Landlock ABI {}) · plans ttl {}s · {}\n",
            l.tier,
            l.landlock_abi,
            l.plan_ttl_s,
            ps.join(", ")
        ));
    }

    out.push_str(&format!(
        "\n{:<20} {:>7} {:>6} {:>10} {:>5} {:>4} {:>5} {:>10} {:>10} {:>5}  {}\n",
        "SESSION",
        "CLIENTS",
        "HUMANS",
        "TRANSCRIPT",
        "TASKS",
        "PTYS",
        "PROCS",
        "PTY MEM",
        "SPILL",
        "BUSY",
        "CWD"
    ));
    for sess in v.sessions {
        out.push_str(&format!(
            "{:<20} {:>7} {:>6} {:>10} {:>5} {:>4} {:>5} {:>10} {:>10} {:>5}  {}\n",
            sess.name,
            sess.clients,
            // People at a terminal (`shoal attach`, `shoal watch`).
            sess.humans.len(),
            sess.transcript,
            sess.tasks,
            sess.ptys,
            sess.procs,
            // What the session's PTYs hold of `[limits] session_memory`.
            bytes(sess.pty_memory),
            bytes(sess.spill_bytes),
            sess.busy,
            sess.cwd
        ));
    }
    for sess in v.sessions {
        for h in &sess.humans {
            out.push_str(&format!(
                "  human in {}: {} since {}\n",
                sess.name, h.client, h.since
            ));
        }
    }
    let ptys: Vec<(&str, &PtyEntry)> = v
        .sessions
        .iter()
        .flat_map(|sess| sess.pty_list.iter().map(|p| (sess.name.as_str(), p)))
        .collect();
    if !ptys.is_empty() {
        out.push_str(&format!(
            "\n{:<10} {:<20} {:>8} {:>9} {:>5} {:<14}  {}\n",
            "PTY", "SESSION", "PID", "SIZE", "ALIVE", "HUMAN", "CMD"
        ));
        for (sess, p) in ptys {
            out.push_str(&format!(
                "{:<10} {:<20} {:>8} {:>9} {:>5} {:<14}  {}\n",
                p.pty_id,
                sess,
                p.pid,
                format!("{}x{}", p.cols, p.rows),
                p.alive,
                pty_human(p),
                p.cmd
            ));
        }
    }
    let tasks: Vec<(&str, &TaskRow)> = v
        .sessions
        .iter()
        .flat_map(|sess| {
            sess.task_list
                .iter()
                .flatten()
                .map(|t| (sess.name.as_str(), t))
        })
        .collect();
    if !tasks.is_empty() {
        out.push_str(&format!(
            "\n{:<10} {:<20} {:<10} {:>9} {:>8}  {}\n",
            "TASK", "SESSION", "STATE", "AGE", "PID", "SRC"
        ));
        for (sess, t) in tasks {
            let src: String = t.src.chars().take(40).collect();
            out.push_str(&format!(
                "{:<10} {:<20} {:<10} {:>9} {:>8}  {}\n",
                t.task,
                sess,
                t.state,
                format!("{}ms", t.elapsed_ms),
                or_dash(t.pid),
                src.replace('\n', " ")
            ));
        }
    }
    match v.journal {
        None => out.push_str("\njournal    not running\n"),
        Some(j) => out.push_str(&journal(j)),
    }
    out.push_str(&limits(v.limits));
    if let Some(a) = v.adapters {
        out.push_str(&format!("adapters   {} loaded\n", a.count));
        for w in &a.warnings {
            out.push_str(&format!("  warning  {w}\n"));
        }
    }
    out
}

/// The journal's line and its health.
fn journal(j: &JournalStatus) -> String {
    let batched = j.durability == shoal_journal::Durability::Batched;
    let mut out = format!(
        "\njournal    {} entries, {} bytes, last commit {} µs{} ({}, {})\n",
        or_dash(j.entries),
        or_dash(j.bytes),
        j.last_commit_us,
        if batched {
            format!(
                ", durable within {} µs (worst {} µs, {} µs at risk now)",
                j.last_window_us, j.worst_window_us, j.at_risk_us
            )
        } else {
            String::new()
        },
        j.durability.as_str(),
        j.path
    );
    let health = match (j.health.as_ref(), j.last_error.as_deref()) {
        ("degraded", e) => format!(
            "DEGRADED (commits failing, retrying; {} reopens, {} ops dropped) last error: {}",
            j.reopens,
            j.dropped_ops,
            or_dash(e)
        ),
        (h, Some(e)) => format!("{h} (last error: {e})"),
        (h, None) => h.to_string(),
    };
    out.push_str(&format!("  health   {health}\n"));
    out
}

/// `limits     sessions 3/64 · connections 5/256 · spill per session 10.0 MiB/4.0 GiB · ...`:
/// each quota with its use where the daemon counts it (per-session and per-connection
/// quotas show the busiest one), else its maximum.
fn limits(l: &Limits) -> String {
    let quotas = [
        ("sessions", &l.sessions),
        ("sessions_per_principal", &l.sessions_per_principal),
        ("connections", &l.connections),
        (
            "subscriptions_per_connection",
            &l.subscriptions_per_connection,
        ),
        ("tasks_per_session", &l.tasks_per_session),
        ("ptys_per_session", &l.ptys_per_session),
        ("session_memory", &l.session_memory),
        ("spill_bytes", &l.spill_bytes),
    ];
    let parts: Vec<String> = quotas
        .into_iter()
        .filter_map(|(name, q)| q.as_ref().map(|q| (name, q)))
        .map(|(name, q)| {
            let in_bytes = name == "session_memory" || name == "spill_bytes";
            let label = match name {
                "spill_bytes" => "spill per session".to_string(),
                "session_memory" => "memory per session".to_string(),
                n => n.replace('_', " "),
            };
            let num = |n: u64| if in_bytes { bytes(n) } else { n.to_string() };
            match q.used {
                Some(u) => format!("{label} {}/{}", num(u), num(q.max)),
                None => format!("{label} max {}", num(q.max)),
            }
        })
        .collect();
    format!("\nlimits     {}\n", parts.join(" · "))
}

fn bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// Who sits at a PTY: `typing` when a human took it over (`pty.claim`),
/// and how many watch it; `-` for nobody.
fn pty_human(p: &PtyEntry) -> String {
    let typing = p.taken_over.is_some();
    let watching = p.watchers.unwrap_or(0);
    match (typing, watching) {
        (false, 0) => "-".into(),
        (true, 0 | 1) => "typing".into(),
        (true, n) => format!("typing +{} view", n - 1),
        (false, n) => format!("{n} watching"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::kernel::{Quota, TokenDaemonFacts, TokenStatus};

    #[test]
    fn a_token_principal_s_status_shows_what_it_has() {
        let st = DaemonStatus::Token(Box::new(TokenStatus {
            daemon: TokenDaemonFacts {
                version: "1.0".into(),
                uptime_ms: 70_000,
            },
            principal: "agent:a".into(),
            sessions: vec![],
            limits: Limits {
                sessions_per_principal: Some(Quota::used(1, 4, "max_sessions_per_principal")),
                ..Default::default()
            },
        }));
        let text = human(&st);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "shoal 1.0 · pid - · up 1m10s");
        assert_eq!(lines[1], "  socket     -");
        assert!(lines.contains(&"journal    not running"), "{text}");
        assert!(
            lines.contains(&"limits     sessions per principal 1/4"),
            "{text}"
        );
        assert!(
            !text.contains("leash") && !text.contains("adapters"),
            "{text}"
        );
    }
}

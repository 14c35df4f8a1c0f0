//! `shoal status [--json] [--watch]`: the operator view of docs/protocol.md §7.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

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
            output::line(&serde_json::to_string(&status).unwrap_or_default());
        } else {
            if watch {
                output::text("\x1b[H\x1b[2J");
            }
            output::text(&human(&status));
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
    let attach = json!({"session": "default", "client": {"kind": "status", "tty": false}});
    c.call("session.attach", attach)
        .map_err(|e| e.to_string())?
        .map_err(|e| e.0.to_string())?;
    c.call("daemon.status", json!({}))
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

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// The human rendering: daemon facts, the actor tree, sessions.
pub fn human(st: &Value) -> String {
    let d = &st["daemon"];
    let mut out = String::new();
    out.push_str(&format!(
        "shoal {} · pid {} · up {}\n",
        s(&d["version"]),
        s(&d["pid"]),
        dur(d["uptime_ms"].as_u64().unwrap_or(0))
    ));
    let rss = st["rss_bytes"]
        .as_u64()
        .map(|b| format!("{:.1} MB", b as f64 / 1e6))
        .unwrap_or("-".into());
    let activated = if d["socket_activated"].as_bool() == Some(true) {
        " (socket-activated)"
    } else {
        ""
    };
    out.push_str(&format!("  socket     {}{activated}\n", s(&d["socket"])));
    let h = &st["http"];
    if h.is_object() {
        let n = |k: &str| h[k].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "  http       {} · connections {} · streams {} · sessions {} · requests {}\n",
            s(&h["url"]),
            n("connections"),
            n("streams"),
            n("sessions"),
            n("requests")
        ));
    }
    out.push_str(&format!("  state dir  {}\n", s(&d["state_dir"])));
    out.push_str(&format!(
        "  config     {}\n",
        d["config"].as_str().unwrap_or("(none; defaults)")
    ));
    out.push_str(&format!("  logs       {}\n", s(&d["log_dir"])));
    out.push_str(&format!("  rss        {rss}\n\n"));

    out.push_str(&format!(
        "{:<44} {:<10} {:>7} {:>8} {:>8} {:>8}  {}\n",
        "ACTOR", "STATE", "MAILBOX", "HANDLED", "RESTARTS", "AGE", "LAST ERROR"
    ));
    let actors = st["actors"].as_array().cloned().unwrap_or_default();
    let ids: Vec<u64> = actors.iter().filter_map(|a| a["id"].as_u64()).collect();
    let roots: Vec<&Value> = actors
        .iter()
        .filter(|a| a["parent"].as_u64().is_none_or(|p| !ids.contains(&p)))
        .collect();
    fn walk(out: &mut String, a: &Value, all: &[Value], depth: usize) {
        let label = format!("{}{} {}", "  ".repeat(depth), s(&a["kind"]), s(&a["name"]));
        out.push_str(&format!(
            "{:<44} {:<10} {:>7} {:>8} {:>8} {:>8}  {}\n",
            label,
            s(&a["state"]),
            s(&a["mailbox"]),
            s(&a["handled"]),
            s(&a["restarts"]),
            dur(a["age_ms"].as_u64().unwrap_or(0)),
            s(&a["last_error"])
        ));
        for c in all.iter().filter(|c| c["parent"] == a["id"]) {
            walk(out, c, all, depth + 1);
        }
    }
    for r in roots {
        walk(&mut out, r, &actors, 0);
    }

    if let Some(l) = st.get("leash").filter(|l| l.is_object()) {
        let ps: Vec<String> = l["principals"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                format!(
                    "{} (caps_enforced {}, opaque {})",
                    s(&p["name"]),
                    s(&p["caps_enforced"]),
                    s(&p["opaque"])
                )
            })
            .collect();
        out.push_str(&format!(
            "\nleash     tier {} (Landlock ABI {}) · plans ttl {}s · {}\n",
            s(&l["tier"]),
            s(&l["landlock_abi"]),
            s(&l["plan_ttl_s"]),
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
    for sess in st["sessions"].as_array().cloned().unwrap_or_default() {
        out.push_str(&format!(
            "{:<20} {:>7} {:>6} {:>10} {:>5} {:>4} {:>5} {:>10} {:>10} {:>5}  {}\n",
            s(&sess["name"]),
            s(&sess["clients"]),
            // People at a terminal (`shoal attach`, `shoal watch`).
            sess["humans"].as_array().map_or(0, Vec::len),
            s(&sess["transcript"]),
            s(&sess["tasks"]),
            s(&sess["ptys"]),
            s(&sess["procs"]),
            // What the session's PTYs hold of `[limits] session_memory`.
            sess["pty_memory"].as_u64().map_or("-".into(), bytes),
            sess["spill_bytes"].as_u64().map_or("-".into(), bytes),
            s(&sess["busy"]),
            s(&sess["cwd"])
        ));
    }
    for sess in st["sessions"].as_array().into_iter().flatten() {
        for h in sess["humans"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  human in {}: {} since {}\n",
                s(&sess["name"]),
                s(&h["client"]),
                s(&h["since"])
            ));
        }
    }
    let ptys: Vec<(Value, Value)> = st["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|sess| {
            let name = sess["name"].clone();
            sess["pty_list"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |p| (name.clone(), p))
        })
        .collect();
    if !ptys.is_empty() {
        out.push_str(&format!(
            "\n{:<10} {:<20} {:>8} {:>9} {:>5} {:<14}  {}\n",
            "PTY", "SESSION", "PID", "SIZE", "ALIVE", "HUMAN", "CMD"
        ));
        for (sess, p) in ptys {
            out.push_str(&format!(
                "{:<10} {:<20} {:>8} {:>9} {:>5} {:<14}  {}\n",
                s(&p["pty_id"]),
                s(&sess),
                s(&p["pid"]),
                format!("{}x{}", s(&p["cols"]), s(&p["rows"])),
                s(&p["alive"]),
                pty_human(&p),
                s(&p["cmd"])
            ));
        }
    }
    let tasks: Vec<(Value, Value)> = st["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|sess| {
            let name = sess["name"].clone();
            sess["task_list"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |t| (name.clone(), t))
        })
        .collect();
    if !tasks.is_empty() {
        out.push_str(&format!(
            "\n{:<10} {:<20} {:<10} {:>9} {:>8}  {}\n",
            "TASK", "SESSION", "STATE", "AGE", "PID", "SRC"
        ));
        for (sess, t) in tasks {
            let src: String = t["src"].as_str().unwrap_or("").chars().take(40).collect();
            out.push_str(&format!(
                "{:<10} {:<20} {:<10} {:>9} {:>8}  {}\n",
                s(&t["task"]),
                s(&sess),
                s(&t["state"]),
                format!("{}ms", s(&t["elapsed_ms"])),
                s(&t["pid"]),
                src.replace('\n', " ")
            ));
        }
    }
    let j = &st["journal"];
    if j.is_null() {
        out.push_str("\njournal    not running\n");
    } else {
        out.push_str(&format!(
            "\njournal    {} entries, {} bytes, last commit {} µs{} ({}, {})\n",
            s(&j["entries"]),
            s(&j["bytes"]),
            s(&j["last_commit_us"]),
            if j["durability"] == "batched" {
                format!(
                    ", durable within {} µs (worst {} µs, {} µs at risk now)",
                    s(&j["last_window_us"]),
                    s(&j["worst_window_us"]),
                    s(&j["at_risk_us"])
                )
            } else {
                String::new()
            },
            s(&j["durability"]),
            s(&j["path"])
        ));
        let health = match j["health"].as_str() {
            Some("degraded") => format!(
                "DEGRADED (commits failing, retrying; {} reopens, {} ops dropped) last error: {}",
                s(&j["reopens"]),
                s(&j["dropped_ops"]),
                s(&j["last_error"])
            ),
            Some(h) => match j["last_error"].as_str() {
                Some(e) => format!("{h} (last error: {e})"),
                None => h.to_string(),
            },
            None => "-".into(),
        };
        out.push_str(&format!("  health   {health}\n"));
    }
    out.push_str(&limits(&st["limits"]));
    if let Some(n) = st["adapters"]["count"].as_u64() {
        out.push_str(&format!("adapters   {n} loaded\n"));
        for w in st["adapters"]["warnings"].as_array().into_iter().flatten() {
            out.push_str(&format!("  warning  {}\n", w.as_str().unwrap_or_default()));
        }
    }
    out
}

/// `limits     sessions 3/64 · connections 5/256 · spill per session 10.0 MiB/4.0 GiB · ...`:
/// each quota with its use where the daemon counts it (per-session and per-connection
/// quotas show the busiest one), else its maximum.
fn limits(l: &Value) -> String {
    let Some(m) = l.as_object() else {
        return String::new();
    };
    let parts: Vec<String> = m
        .iter()
        .map(|(name, v)| {
            let in_bytes = name == "session_memory" || name == "spill_bytes";
            let label = match name.as_str() {
                "spill_bytes" => "spill per session".to_string(),
                "session_memory" => "memory per session".to_string(),
                n => n.replace('_', " "),
            };
            let num = |n: u64| if in_bytes { bytes(n) } else { n.to_string() };
            let max = v["max"].as_u64().map_or("-".into(), num);
            match v["used"].as_u64() {
                Some(u) => format!("{label} {}/{max}", num(u)),
                None => format!("{label} max {max}"),
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
fn pty_human(p: &Value) -> String {
    let typing = p["taken_over"].is_object();
    let watching = p["watchers"].as_u64().unwrap_or(0);
    match (typing, watching) {
        (false, 0) => "-".into(),
        (true, 0 | 1) => "typing".into(),
        (true, n) => format!("typing +{} view", n - 1),
        (false, n) => format!("{n} watching"),
    }
}

//! Attacks through a token principal's sandboxed children (foreground, background task, PTY):
//! metadata changes of outside files (chmod, utime, chown), links made by the child, the
//! daemon's own environment in `/proc`, and the daemon's state dir (tokens, journal) read
//! by a child or by a builtin, also for a principal whose `fs.read` is empty or every path.

use super::*;

/// agent:kid: opaque allowed, reads the project and the system dirs, writes and deletes the
/// project; agent:wide: the same but reads every path; agent:blind: reads nothing (an empty
/// `fs.read`). The journal commits before each reply (so the state file holds what ran).
fn config(proj: &Path, _root: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    let keys = "opaque = \"allow\"\nauto_apply = \"in-grant\"\nsession_write = true";
    let mut sys = pj.clone();
    sys.extend(SYSTEM_READ.iter().map(|s| s.to_string()));
    "[journal]\ndurability = \"immediate\"\n".to_string()
        + &principal("agent:kid", keys, &sys, &pj, &pj)
        + &principal("agent:wide", keys, &["/**".to_string()], &pj, &pj)
        + &principal("agent:blind", keys, &[], &pj, &pj)
}

/// The longest string in `tokens.json` (a stored hash): what a reader of the file learns.
fn token_needle(state: &Path) -> String {
    let text = std::fs::read_to_string(state.join("tokens.json")).expect("tokens.json");
    let v: Value = serde_json::from_str(&text).expect("tokens.json is JSON");
    fn longest(v: &Value, best: &mut String) {
        match v {
            Value::String(s) if s.len() > best.len() => *best = s.clone(),
            Value::Array(a) => a.iter().for_each(|x| longest(x, best)),
            Value::Object(o) => o.values().for_each(|x| longest(x, best)),
            _ => {}
        }
    }
    let mut best = String::new();
    longest(&v, &mut best);
    assert!(best.len() >= 16, "no hash in tokens.json: {text}");
    best
}

/// `sh -c SCRIPT; echo END` on a PTY (kernel `pty.*` or the MCP `shoal_pty_*` tools), read
/// until `END` shows, then closed; every reply.
fn on_pty(ag: &mut Agent, script: &str) -> Vec<Value> {
    let args = json!({"cmd": "sh", "args": ["-c", format!("{script}; echo END; sleep 30")],
        "cols": 120, "rows": 20});
    let open = ag.tool("pty.open", "shoal_pty_open", args);
    let id = if ag.mcp {
        open["result"]["structuredContent"]["pty_id"].clone()
    } else {
        open["result"]["pty_id"].clone()
    };
    if id.is_null() {
        return vec![open];
    }
    let read = ag.tool(
        "pty.read",
        "shoal_pty_read",
        json!({"pty_id": id, "wait_for": "END", "timeout_ms": 10000}),
    );
    let close = ag.tool("pty.close", "shoal_pty_close", json!({"pty_id": id}));
    vec![open, read, close]
}

#[test]
fn sandboxed_children_stay_confined() {
    let dsecret = marker("D");
    let a = Arena::start(config, &[("RT_DAEMON_SECRET", dsecret.as_str())]);
    let state = a.root.state_dir();
    let od = a.outside.display().to_string();
    let pd = a.proj.display().to_string();
    let sd = state.display().to_string();
    let pid = a.d.pid();
    let jmark = marker("J");
    // What the attacker greps the journal for: the shape of the marker, not the marker.
    let jpat = "RTJX[0-9a-f]*Y[0-9a-f]*Z[0-9a-f]*";
    let mut local = a.kernel(None, "control", None);
    // The local user's command, now in the journal on disk.
    let r = local.exec(&format!("echo {jmark}"));
    assert!(leaks(&r, &jmark), "{r}");
    let mut kid = a.kernel(Some("agent:kid"), "kid", None);
    let mut kid_m = a.mcp(Some("agent:kid"), "kid-mcp", None);
    let mut wide = a.kernel(Some("agent:wide"), "wide", None);
    let mut wide_m = a.mcp(Some("agent:wide"), "wide-mcp", None);
    let mut blind = a.kernel(Some("agent:blind"), "blind", None);
    let tneedle = token_needle(&state);
    let me_root = std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false);
    let at = |name: &str, steps: Vec<String>, j: Judge| attempt(name, &steps, j);
    let meta = |n: &str| Judge::Meta(a.out(n));
    let mut list = vec![
        at(
            "11 child chmod of an outside file",
            vec![format!("sh {{ chmod 777 {od}/c1 }}")],
            meta("c1"),
        ),
        at(
            "11 child touch -d of an outside file",
            vec![format!("sh {{ touch -d 2001-01-01 {od}/c2 }}")],
            meta("c2"),
        ),
        at(
            "11 child os.utime of an outside file",
            vec![format!(
                "python3 {{\nimport os\nos.utime(\"{od}/c4\", (0, 0))\n}}"
            )],
            meta("c4"),
        ),
        at(
            "11 background child chmod",
            vec![format!("BG:sh {{ chmod 600 {od}/c5 }}")],
            meta("c5"),
        ),
        at(
            "11 child symlink to outside, then write through it",
            vec![format!(
                "sh {{ ln -sf {od}/c6 {pd}/l6; echo pwned > {pd}/l6 }}"
            )],
            Judge::Intact(a.out("c6")),
        ),
        at(
            "11 child hard link to outside, then append through it",
            vec![format!(
                "sh {{ ln -f {od}/c7 {pd}/h7; echo pwned >> {pd}/h7 }}"
            )],
            Judge::Intact(a.out("c7")),
        ),
        at(
            "11 child write outside",
            vec![format!("sh {{ echo x > {od}/c8 }}")],
            Judge::Absent(a.out("c8")),
        ),
        at(
            "11 child mv of an outside file into proj",
            vec![format!("sh {{ mv {od}/c9 {pd}/c9 }}")],
            Judge::Intact(a.out("c9")),
        ),
        at(
            "11 child reads /proc/<daemon>/environ",
            vec![format!("sh {{ cat /proc/{pid}/environ }}")],
            Judge::NoLeak(dsecret.clone()),
        ),
        at(
            "11 child reads the state dir's tokens.json",
            vec![format!("sh {{ cat {sd}/tokens.json }}")],
            Judge::NoLeak(tneedle.clone()),
        ),
        at(
            "11 child reads the state dir's journal.redb",
            vec![format!("sh {{ grep -ao '{jpat}' {sd}/journal.redb }}")],
            Judge::NoLeak(jmark.clone()),
        ),
        at(
            "11 child greps the state dir",
            vec![format!("sh {{ grep -rhao '{jpat}' {sd} }}")],
            Judge::NoLeak(jmark.clone()),
        ),
    ];
    if me_root {
        list.push(at(
            "11 child chown of an outside file",
            vec![format!("sh {{ chown 65534:65534 {od}/c3 }}")],
            meta("c3"),
        ));
    }
    let mut rep = Report::default();
    rep.run(
        &list,
        &mut [&mut kid, &mut kid_m, &mut wide, &mut wide_m],
        &mut local,
    );

    // Builtins of a principal that may read every path: still not the daemon's own files.
    let builtins = vec![
        at(
            "11 path(tokens.json).read() builtin",
            vec![format!("path(\"{sd}/tokens.json\").read()")],
            Judge::NoLeak(tneedle.clone()),
        ),
        at(
            "11 cat(tokens.json) builtin",
            vec![format!("cat(\"{sd}/tokens.json\")")],
            Judge::NoLeak(tneedle.clone()),
        ),
        at(
            "11 glob of the state dir through a builtin",
            vec![format!("glob(\"{sd}/*\").map(.name)")],
            Judge::NoLeak("tokens.json".into()),
        ),
        at(
            "11 /proc/<daemon>/environ through a builtin",
            vec![format!("path(\"/proc/{pid}/environ\").read()")],
            Judge::NoLeak(dsecret.clone()),
        ),
        at(
            "11 /proc/self/environ through a builtin (the daemon's)",
            vec!["cat /proc/self/environ".into()],
            Judge::NoLeak(dsecret.clone()),
        ),
    ];
    rep.run(&builtins, &mut [&mut wide, &mut wide_m], &mut local);

    // fs.read empty: children read the state dir.
    let blind_list = vec![
        at(
            "11 fs.read empty: child reads tokens.json",
            vec![format!("sh {{ cat {sd}/tokens.json }}")],
            Judge::NoLeak(tneedle.clone()),
        ),
        at(
            "11 fs.read empty: child reads journal.redb",
            vec![format!("sh {{ grep -ao '{jpat}' {sd}/journal.redb }}")],
            Judge::NoLeak(jmark.clone()),
        ),
        at(
            "11 fs.read empty: child reads /proc/<daemon>/environ",
            vec![format!("sh {{ cat /proc/{pid}/environ }}")],
            Judge::NoLeak(dsecret.clone()),
        ),
    ];
    rep.run(&blind_list, &mut [&mut blind], &mut local);

    // The same from a PTY the token opened (pty children are confined too).
    let pty_meta = format!("chmod 777 {od}/p1");
    rep.run_with(
        "11 pty child chmod outside",
        &meta("p1"),
        &mut [&mut kid, &mut kid_m],
        Some(&mut local),
        |ag| on_pty(ag, &pty_meta),
    );
    let pty_write = format!("echo pwned > {od}/p2; rm -f {od}/p2x");
    rep.run_with(
        "11 pty child write outside",
        &Judge::Absent(a.out("p2")),
        &mut [&mut kid, &mut kid_m],
        Some(&mut local),
        |ag| on_pty(ag, &pty_write),
    );
    // One variable per line, the marker's alone: a screen of 20 rows holds it
    // whatever else the daemon's environment carries.
    let pty_env = format!("tr '\\0' '\\n' < /proc/{pid}/environ | grep RT_DAEMON_SECRET");
    rep.run_with(
        "11 pty child reads /proc/<daemon>/environ",
        &Judge::NoLeak(dsecret.clone()),
        &mut [&mut wide, &mut wide_m],
        Some(&mut local),
        |ag| on_pty(ag, &pty_env),
    );
    let pty_state = format!(
        "tr ',' '\\n' < {sd}/tokens.json | grep -F -- '{}'",
        &tneedle[..12]
    );
    rep.run_with(
        "11 pty child reads tokens.json",
        &Judge::NoLeak(tneedle.clone()),
        &mut [&mut wide, &mut blind],
        Some(&mut local),
        |ag| on_pty(ag, &pty_state),
    );
    rep.finish("sandboxed children");
}

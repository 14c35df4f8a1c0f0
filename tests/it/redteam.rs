//! Red-team acceptance suite for Leash (docs/rules.md §21): a token principal gets nothing
//! its policy does not grant, whichever route it takes (builtins in call form, value methods,
//! unknown commands, links, `cd`, closures and aliases, scripts, `PATH`, other sessions,
//! `env`, sandboxed children, plans and approvals (and where they apply), event channels, state
//! files, blob hashes).
//!
//! Every attempt runs against a real daemon as the attacker would, through the kernel socket
//! and (where it makes sense) through MCP `shoal_exec`, and is judged only by its outcome: on
//! disk (the outside file still holds its bytes, no new file appeared, mode, mtime and owner
//! unchanged) and in the replies (a marker never appears in any reply text, value or
//! structuredContent). Error wording and error codes are never judged. Each attempt has a
//! control: the same source as the local uid, in its own session, does have the effect, so a
//! failure measures the policy and not a broken command. A run lists every attempt with
//! `BLOCKED` or `ESCAPED` on stderr and fails naming each attack that got through.
//!
//! The suite only creates and removes files under its own temporary roots and ends only the
//! daemons (and shims) it started.

mod approvals;
mod blobs;
mod bound;
mod children;
mod configs;
mod eval;
mod execs;
mod limits;
mod links;
mod place;
mod plans;
mod ptys;
mod reattach;
mod revoke;
mod sessions;
mod shared;
mod threads;
mod trash;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::common::*;
use serde_json::{json, Value};

/// A marker no file, path or source of the suite contains by chance.
pub fn marker(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let stack = &nanos as *const u128 as usize;
    format!("RT{tag}X{nanos:x}Y{:x}Z{stack:x}", std::process::id())
}

/// A daemon started for the attack, its project, an `outside` dir and a secret file.
pub struct Arena {
    pub root: Root,
    pub d: Daemon,
    pub proj: PathBuf,
    pub outside: PathBuf,
    pub secret: PathBuf,
    /// The secret file's content (and the value of `RT_SECRET` where an env is given).
    pub marker: String,
}

/// The system dirs a principal needs to read to execute anything at all.
pub const SYSTEM_READ: &[&str] = &["/usr/**", "/bin/**", "/lib/**", "/lib64/**", "/etc/**"];

/// A `[policy.principal."NAME"]` section: `keys` verbatim, then the fs grants.
pub fn principal(
    name: &str,
    keys: &str,
    read: &[String],
    write: &[String],
    del: &[String],
) -> String {
    let list = |v: &[String]| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "\n[policy.principal.\"{name}\"]\n{keys}\n\n[policy.principal.\"{name}\".fs]\nread = [{}]\nwrite = [{}]\ndelete = [{}]\n",
        list(read),
        list(write),
        list(del)
    )
}

/// `name`: opaque denied, plans inside its grants applied, fs read/write/delete = `proj`.
pub fn project_only(name: &str, proj: &Path) -> String {
    let pj = Arena::proj_grant(proj);
    principal(
        name,
        "opaque = \"deny\"\nauto_apply = \"in-grant\"",
        &pj,
        &pj,
        &pj,
    )
}

impl Arena {
    /// Start a daemon whose config `cfg(proj, root)` gives; `env` goes to the daemon.
    pub fn start(cfg: impl Fn(&Path, &Path) -> String, env: &[(&str, &str)]) -> Arena {
        let root = Root::new();
        let proj = root.path().join("proj");
        let outside = root.path().join("outside");
        std::fs::create_dir(&proj).expect("proj");
        std::fs::create_dir(&outside).expect("outside");
        let marker = marker("S");
        let secret = root.path().join("secret");
        std::fs::write(&secret, format!("{marker}\n")).expect("secret");
        let cfg_path = root.path().join("shoal.toml");
        std::fs::write(&cfg_path, cfg(&proj, root.path())).expect("config");
        let cfg_arg = cfg_path.to_string_lossy().into_owned();
        let d = Daemon::start_with(&root, &root.socket(), &["--config", &cfg_arg], env);
        Arena {
            root,
            d,
            proj,
            outside,
            secret,
            marker,
        }
    }

    /// `<proj>/**` as a one-grant list.
    pub fn proj_grant(proj: &Path) -> Vec<String> {
        vec![format!("{}/**", proj.display())]
    }

    pub fn out(&self, name: &str) -> PathBuf {
        self.outside.join(name)
    }

    pub fn p(&self, name: &str) -> PathBuf {
        self.proj.join(name)
    }

    /// A kernel connection attached to `session` as `principal`'s token (None: the local
    /// uid), starting in the project with `env` (if given); the attach must succeed.
    pub fn kernel(&self, principal: Option<&str>, session: &str, env: Option<Value>) -> Agent {
        let mut conn = self.d.conn();
        let mut p = json!({"session": session, "cwd": self.proj.display().to_string(),
            "client": {"kind": "redteam", "tty": false}});
        if let Some(e) = env {
            p["env"] = e;
        }
        if let Some(pr) = principal {
            p["token"] = json!(create_token(&self.root, pr));
        }
        let r = conn.call("session.attach", p);
        assert!(r.get("error").is_none(), "attach {session}: {r}");
        Agent {
            conn,
            mcp: false,
            who: principal.unwrap_or("local").to_string(),
            cd: format!("cd {}", self.proj.display()),
        }
    }

    /// The same over MCP (`shoal/attach` then the handshake, as the shim does it).
    pub fn mcp(&self, principal: Option<&str>, session: &str, env: Option<Value>) -> Agent {
        let tok = principal.map(|pr| create_token(&self.root, pr));
        let conn = mcp_conn(&self.d, session, tok.as_deref(), &self.proj, env, false);
        Agent {
            conn,
            mcp: true,
            who: principal.unwrap_or("local").to_string(),
            cd: format!("cd {}", self.proj.display()),
        }
    }

    pub fn sock(&self) -> String {
        self.root.socket().to_string_lossy().into_owned()
    }
}

/// An MCP connection on the daemon socket attached to `session` (with `token`), declaring
/// form elicitation when `elicit`.
pub fn mcp_conn(
    d: &Daemon,
    session: &str,
    token: Option<&str>,
    cwd: &Path,
    env: Option<Value>,
    elicit: bool,
) -> Conn {
    let mut c = d.conn();
    let mut p = json!({"session": session, "cwd": cwd.display().to_string()});
    if let Some(t) = token {
        p["token"] = json!(t);
    }
    if let Some(e) = env {
        p["env"] = e;
    }
    c.send(&json!({"jsonrpc": "2.0", "method": "shoal/attach", "params": p}));
    let caps = if elicit {
        json!({"elicitation": {}})
    } else {
        json!({})
    };
    c.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": caps,
            "clientInfo": {"name": "redteam", "version": "0"}}),
    );
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    c
}

/// One client of the daemon: the attacker (a token principal) or the control (local uid).
pub struct Agent {
    pub conn: Conn,
    pub mcp: bool,
    pub who: String,
    cd: String,
}

impl Agent {
    pub fn label(&self) -> String {
        format!(
            "{} via {}",
            self.who,
            if self.mcp { "mcp" } else { "kernel" }
        )
    }

    /// Run `src`; the whole response, whatever it is. A step starting with `BG:` runs as a
    /// background task (kernel `background: true`, awaited and read back).
    pub fn exec(&mut self, src: &str) -> Value {
        if let Some(bg) = src.strip_prefix("BG:") {
            return self.exec_bg(bg);
        }
        if self.mcp {
            self.conn.call(
                "tools/call",
                json!({"name": "shoal_exec", "arguments": {"src": src}}),
            )
        } else {
            self.conn.call("exec", json!({"src": src}))
        }
    }

    fn exec_bg(&mut self, src: &str) -> Value {
        if self.mcp {
            // MCP: a spawned task awaited in the same program.
            return self.exec(&format!("spawn {{ {src} }}.await()"));
        }
        let r = self
            .conn
            .call("exec", json!({"src": src, "background": true}));
        let Some(task) = r["result"]["task"].as_str().map(str::to_string) else {
            return r;
        };
        let rec = self
            .conn
            .call("task.await", json!({"task": task, "timeout_ms": 20000}));
        let v = match rec["result"]["result_ref"].as_str() {
            Some(rf) => self
                .conn
                .call("value.get", json!({"ref": rf, "format": "json"})),
            None => Value::Null,
        };
        json!([r, rec, v])
    }

    /// Back to the project (whatever an earlier attempt did to the cwd).
    pub fn home(&mut self) {
        let cd = self.cd.clone();
        self.exec(&cd);
    }

    /// A kernel call, or the MCP tool call that maps onto it; the whole response.
    pub fn tool(&mut self, kernel: &str, tool: &str, args: Value) -> Value {
        if self.mcp {
            self.conn
                .call("tools/call", json!({"name": tool, "arguments": args}))
        } else {
            self.conn.call(kernel, args)
        }
    }
}

/// Does `needle` appear in `reply`: its text, or the bytes of any tagged bytes value?
pub fn leaks(reply: &Value, needle: &str) -> bool {
    fn walk(v: &Value, needle: &str) -> bool {
        match v {
            Value::String(s) => s.contains(needle),
            Value::Array(a) => a.iter().any(|x| walk(x, needle)),
            Value::Object(o) => {
                if o.get("$") == Some(&json!("bytes")) {
                    if let Some(b) = o.get("v").and_then(Value::as_str).and_then(b64) {
                        if String::from_utf8_lossy(&b).contains(needle) {
                            return true;
                        }
                    }
                }
                o.iter().any(|(k, x)| k.contains(needle) || walk(x, needle))
            }
            _ => false,
        }
    }
    reply.to_string().contains(needle) || walk(reply, needle)
}

/// Standard base64 (padding optional); None if it is not base64.
fn b64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// How an attempt is judged.
#[derive(Clone, Debug)]
pub enum Judge {
    /// This outside file keeps its bytes (it is written fresh before each try).
    Intact(PathBuf),
    /// No file appears here (removed before each try).
    Absent(PathBuf),
    /// No reply of the attempt contains this text.
    NoLeak(String),
    /// This file's mode, mtime and owner stay as set before each try.
    Meta(PathBuf),
}

/// 2020-01-01T00:00:00Z, the mtime [`Judge::Meta`] files start with.
const META_MTIME: u64 = 1_577_836_800;

impl Judge {
    fn prepare(&self) {
        match self {
            Judge::Intact(p) => {
                // Written in place: a hard link made to it earlier keeps reaching it.
                if let Some(d) = p.parent() {
                    let _ = std::fs::create_dir_all(d);
                }
                std::fs::write(p, keep(p)).expect("write the victim");
            }
            Judge::Absent(p) => {
                if let Ok(m) = std::fs::symlink_metadata(p) {
                    if m.is_dir() {
                        let _ = std::fs::remove_dir_all(p);
                    } else {
                        let _ = std::fs::remove_file(p);
                    }
                }
            }
            Judge::NoLeak(_) => {}
            Judge::Meta(p) => {
                let _ = std::fs::remove_file(p);
                std::fs::write(p, "meta\n").expect("write the victim");
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o640))
                    .expect("chmod the victim");
                let f = std::fs::File::options()
                    .write(true)
                    .open(p)
                    .expect("open the victim");
                f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(META_MTIME))
                    .expect("set the victim's mtime");
            }
        }
    }

    /// Did the attempt (with these replies) have its effect? A description of it if so.
    fn effect(&self, replies: &[Value]) -> Option<String> {
        match self {
            Judge::Intact(p) => match std::fs::read(p) {
                Ok(b) if b == keep(p).as_bytes() => None,
                Ok(b) => Some(format!(
                    "{} now holds {:?}",
                    p.display(),
                    String::from_utf8_lossy(&b)
                )),
                Err(e) => Some(format!("{} is gone ({e})", p.display())),
            },
            Judge::Absent(p) => std::fs::symlink_metadata(p)
                .is_ok()
                .then(|| format!("{} was created", p.display())),
            Judge::NoLeak(n) => replies
                .iter()
                .find(|r| leaks(r, n))
                .map(|r| format!("the reply holds the marker: {}", clip(&r.to_string()))),
            Judge::Meta(p) => {
                let m = match std::fs::metadata(p) {
                    Ok(m) => m,
                    Err(e) => return Some(format!("{} is gone ({e})", p.display())),
                };
                let mode = m.permissions().mode() & 0o7777;
                let mtime = m.mtime() as u64;
                let me = std::fs::metadata("/proc/self")
                    .map(|s| s.uid())
                    .unwrap_or(0);
                (mode != 0o640 || mtime != META_MTIME || m.uid() != me).then(|| {
                    format!(
                        "{}: mode {mode:o}, mtime {mtime}, uid {} (was 640, {META_MTIME}, {me})",
                        p.display(),
                        m.uid()
                    )
                })
            }
        }
    }
}

fn keep(p: &Path) -> String {
    format!("keep {}\n", p.display())
}

pub fn clip(s: &str) -> String {
    if s.len() <= 400 {
        return s.to_string();
    }
    let mut end = 400;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// One attack: its name, the programs run one after the other, how it is judged.
pub struct Attempt {
    pub name: String,
    pub steps: Vec<String>,
    pub judge: Judge,
    /// Run the control (false only where the source has no effect for anyone: said in
    /// the name).
    pub control: bool,
}

pub fn attempt(name: &str, steps: &[String], judge: Judge) -> Attempt {
    Attempt {
        name: name.to_string(),
        steps: steps.to_vec(),
        judge,
        control: true,
    }
}

/// What got through, and controls that did not work; printed and asserted at the end.
#[derive(Default)]
pub struct Report {
    escapes: Vec<String>,
    broken: Vec<String>,
    tried: usize,
}

impl Report {
    /// Record the outcome of one attack judged outside [`Report::run`].
    pub fn judge(&mut self, name: &str, escaped: Option<String>) {
        self.tried += 1;
        match escaped {
            Some(how) => {
                eprintln!("ESCAPED  {name}: {how}");
                self.escapes.push(format!("{name}: {how}"));
            }
            None => eprintln!("BLOCKED  {name}"),
        }
    }

    /// Record a control that did not have its effect.
    pub fn control(&mut self, name: &str, worked: bool, detail: &str) {
        if !worked {
            eprintln!("CONTROL FAILED  {name}: {detail}");
            self.broken.push(format!("{name}: {detail}"));
        }
    }

    /// Each attempt by each attacker (the file prepared fresh each time), then its control.
    pub fn run(&mut self, attempts: &[Attempt], attackers: &mut [&mut Agent], control: &mut Agent) {
        for a in attempts {
            let steps = a.steps.clone();
            let run = |ag: &mut Agent| steps.iter().map(|s| ag.exec(s)).collect();
            let control = if a.control { Some(&mut *control) } else { None };
            self.run_with(&a.name, &a.judge, attackers, control, run);
        }
    }

    /// One attack done by `act` (its replies), by each attacker in turn from the project,
    /// the judged file prepared fresh each time; then by the control, if given.
    pub fn run_with(
        &mut self,
        name: &str,
        judge: &Judge,
        attackers: &mut [&mut Agent],
        control: Option<&mut Agent>,
        mut act: impl FnMut(&mut Agent) -> Vec<Value>,
    ) {
        for ag in attackers.iter_mut() {
            judge.prepare();
            ag.home();
            let replies = act(ag);
            let label = format!("{name} [{}]", ag.label());
            self.judge(&label, judge.effect(&replies));
        }
        if let Some(c) = control {
            judge.prepare();
            c.home();
            let replies = act(c);
            let worked = judge.effect(&replies).is_some();
            let detail = format!("no effect; replies {}", clip(&json!(replies).to_string()));
            self.control(name, worked, &detail);
        }
    }

    /// Fail naming every attack that got through and every control that did not work.
    pub fn finish(self, what: &str) {
        eprintln!(
            "{what}: {} attempts, {} escaped, {} broken controls",
            self.tried,
            self.escapes.len(),
            self.broken.len()
        );
        assert!(
            self.escapes.is_empty() && self.broken.is_empty(),
            "{what}: attacks that got through:\n  {}\ncontrols without their effect:\n  {}",
            self.escapes.join("\n  "),
            self.broken.join("\n  ")
        );
    }
}

/// `s` as a shoal string literal.
pub fn lit(s: &Path) -> String {
    format!("{:?}", s.display().to_string())
}

//! `shoal history [filters] [--json]` and `shoal history show ID [--json]`: the journal, through
//! the daemon (kernel `journal.query` / `journal.get` / `blob.get`) when one answers on the
//! socket, else read directly from `<state dir>/journal.redb` (redb locks the file, so this only
//! works while no daemon holds it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::client::{connect, Client};
use super::output;
use shoal_journal::{self as journal, Query, Scope, Store, StoreOptions};
use shoal_proto::kernel::{AttachParams, BlobGetParams, JournalGetParams, KernelRequest};

/// Filters of `shoal history` (the `journal.query` params).
#[derive(Debug, Clone, Default)]
pub struct Filters {
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub principal: Option<String>,
    pub ok: Option<bool>,
    pub effects: Vec<String>,
    pub head: Option<String>,
    pub limit: Option<usize>,
}

impl Filters {
    fn query(&self) -> Query {
        Query {
            since: self.since,
            until: self.until,
            principal: self.principal.clone(),
            ok: self.ok,
            effects: (!self.effects.is_empty()).then(|| self.effects.clone()),
            head: self.head.clone(),
            session: None,
            limit: self.limit,
        }
    }
}

/// Where the entries come from.
enum Source {
    Daemon(Client),
    Store(Store),
}

fn open_source(socket: &Path, state_dir: &Path) -> Result<Source, String> {
    if let Ok(stream) = connect(socket) {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let mut c = Client::new(stream).map_err(|e| e.to_string())?;
        // Every journal method needs an attached connection (docs/protocol.md §10).
        let attach = AttachParams::client(None, "history", false);
        remote(&mut c, &KernelRequest::Attach(attach))?;
        return Ok(Source::Daemon(c));
    }
    let path = state_dir.join("journal.redb");
    if !path.exists() {
        return Err(format!(
            "no daemon answers on {} and there is no journal at {}",
            socket.display(),
            path.display()
        ));
    }
    Store::open(&path, StoreOptions::default())
        .map(Source::Store)
        .map_err(|e| match e {
            journal::JournalError::Locked { .. } => format!(
                "{e} (a daemon holds it but does not answer on {}; pass --socket)",
                socket.display()
            ),
            e => e.to_string(),
        })
}

fn remote(c: &mut Client, req: &KernelRequest) -> Result<Value, String> {
    match c.call(req) {
        Err(e) => Err(e.to_string()),
        Ok(Err(e)) => Err(e
            .0
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("error")
            .to_string()),
        Ok(Ok(v)) => Ok(v),
    }
}

fn entries(src: &mut Source, f: &Filters) -> Result<Vec<Value>, String> {
    let q = f.query();
    match src {
        Source::Daemon(c) => {
            let v = remote(c, &KernelRequest::JournalQuery(q.clone()))?;
            Ok(v.as_array().cloned().unwrap_or_default())
        }
        Source::Store(s) => {
            let es = s.query(&q, &Scope::All).map_err(|e| e.to_string())?;
            es.into_iter()
                .map(|e| serde_json::to_value(e).map_err(|e| e.to_string()))
                .collect()
        }
    }
}

/// `shoal history`.
pub fn run(socket: Option<PathBuf>, state_dir: Option<PathBuf>, f: Filters, as_json: bool) -> i32 {
    let socket = shoal_base::paths::socket_path(socket.as_deref());
    let state = shoal_base::paths::state_dir(state_dir.as_deref());
    let result = open_source(&socket, &state).and_then(|mut s| entries(&mut s, &f));
    match result {
        Err(e) => {
            eprintln!("shoal history: {e}");
            1
        }
        Ok(list) => {
            if as_json {
                output::line(&Value::Array(list).to_string());
            } else {
                for e in &list {
                    output::line(&summary_line(e));
                }
            }
            0
        }
    }
}

/// `shoal history show ID`.
pub fn show(socket: Option<PathBuf>, state_dir: Option<PathBuf>, id: u64, as_json: bool) -> i32 {
    let socket = shoal_base::paths::socket_path(socket.as_deref());
    let state = shoal_base::paths::state_dir(state_dir.as_deref());
    let result = open_source(&socket, &state).and_then(|mut src| {
        let entry = match &mut src {
            Source::Daemon(c) => remote(c, &KernelRequest::JournalGet(JournalGetParams { id }))?,
            Source::Store(s) => match s.get_entry(id).map_err(|e| e.to_string())? {
                Some(e) => serde_json::to_value(e).map_err(|e| e.to_string())?,
                None => return Err(format!("no journal entry {id}")),
            },
        };
        // The stored render / stdout / stderr, for the human view.
        let mut texts = Vec::new();
        if !as_json {
            for o in entry["outputs"].as_array().cloned().unwrap_or_default() {
                let kind = o["kind"].as_str().unwrap_or("").to_string();
                if kind == "value" {
                    continue;
                }
                let hash = o["hash"].as_str().unwrap_or("").to_string();
                let text = match &mut src {
                    Source::Daemon(c) => remote(
                        c,
                        &KernelRequest::BlobGet(BlobGetParams {
                            hash: hash.to_string(),
                            max_bytes: Some(65536),
                        }),
                    )
                    .ok()
                    .map(|v| blob_text(&v["value"])),
                    Source::Store(s) => s
                        .blob_get(&hash)
                        .ok()
                        .flatten()
                        .map(|b| String::from_utf8_lossy(&b).into_owned()),
                };
                if let Some(t) = text.filter(|t| !t.is_empty()) {
                    texts.push((kind, t));
                }
            }
        }
        Ok((entry, texts))
    });
    match result {
        Err(e) => {
            eprintln!("shoal history: {e}");
            1
        }
        Ok((entry, texts)) => {
            if as_json {
                output::line(&entry.to_string());
            } else {
                output::text(&detail(&entry, &texts));
            }
            0
        }
    }
}

/// A blob as `blob.get` returned it, back to text (JSON-looking stdout was parsed).
fn blob_text(v: &Value) -> String {
    match v {
        Value::Object(m) if m.get("$") == Some(&json!("bytes")) => {
            use base64::Engine as _;
            m.get("v")
                .and_then(Value::as_str)
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default()
        }
        // Too big for one read: its head (the daemon bounds every read).
        Value::Object(m) if m.get("$") == Some(&json!("ref")) => m
            .get("render_head")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn time_of(ns: i64) -> String {
    jiff::Timestamp::from_nanosecond(ns as i128)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%SZ").to_string())
        .unwrap_or_else(|_| ns.to_string())
}

fn ok_word(e: &Value) -> &'static str {
    match e["ok"].as_bool() {
        Some(true) => "ok",
        Some(false) => "FAILED",
        None => "running",
    }
}

fn summary_line(e: &Value) -> String {
    let src = e["src"].as_str().unwrap_or("");
    let first = src.lines().next().unwrap_or("");
    let more = if src.lines().nth(1).is_some() {
        " …"
    } else {
        ""
    };
    format!(
        "{:>6}  {}  {:<7} {:<14} {:<10} {}{}",
        e["id"].as_u64().unwrap_or(0),
        time_of(e["ts"].as_i64().unwrap_or(0)),
        ok_word(e),
        e["principal"].as_str().unwrap_or(""),
        e["session"].as_str().unwrap_or(""),
        first,
        more
    )
}

fn detail(e: &Value, texts: &[(String, String)]) -> String {
    let mut out = String::new();
    out.push_str(&format!("entry      {}\n", e["id"]));
    out.push_str(&format!(
        "time       {}\n",
        time_of(e["ts"].as_i64().unwrap_or(0))
    ));
    if let Some(d) = e["dur_ns"].as_i64() {
        out.push_str(&format!("duration   {:.3} ms\n", d as f64 / 1_000_000.0));
    }
    out.push_str(&format!(
        "session    {}\nprincipal  {}\ncwd        {}\n",
        e["session"].as_str().unwrap_or(""),
        e["principal"].as_str().unwrap_or(""),
        e["cwd"]["display"].as_str().unwrap_or("")
    ));
    out.push_str(&format!(
        "status     {} ({})\n",
        ok_word(e),
        match e["status"].as_i64() {
            Some(s) => s.to_string(),
            None => "-".into(),
        }
    ));
    let effects: Vec<String> = e["effects"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|x| x["kind"].as_str().map(str::to_string))
        .collect();
    if !effects.is_empty() {
        out.push_str(&format!("effects    {}\n", effects.join(", ")));
    }
    out.push_str(&format!("src        {}\n", e["src"].as_str().unwrap_or("")));
    for o in e["outputs"].as_array().cloned().unwrap_or_default() {
        out.push_str(&format!(
            "output     {:<7} {} bytes  blake3:{}\n",
            o["kind"].as_str().unwrap_or(""),
            o["len"],
            o["hash"].as_str().unwrap_or("")
        ));
    }
    for (kind, t) in texts {
        out.push_str(&format!("\n--- {kind}\n{}", t));
        if !t.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

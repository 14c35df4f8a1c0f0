//! Clients of the daemon's Streamable HTTP endpoint for the tests (`http`, `http_sdk`,
//! `readme`): a daemon started with `--http 127.0.0.1:0` and a `--local` token, plain
//! requests (ureq), a 2025-era session client, and raw event streams over TCP.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;

/// A daemon serving HTTP, its URL and a `--local` token.
pub struct Served {
    pub d: Daemon,
    pub url: String,
    pub addr: String,
    pub token: String,
    pub root: Root,
}

pub fn serve(config: &str) -> Served {
    serve_in(|_| config.to_string())
}

/// [`serve`] with a config made from the root's path.
pub fn serve_in(config: impl FnOnce(&std::path::Path) -> String) -> Served {
    let root = Root::new();
    let cfg = root.path().join("shoal.toml");
    std::fs::write(&cfg, config(root.path())).unwrap();
    let d = Daemon::start_with(
        &root,
        &root.socket(),
        &["--config", cfg.to_str().unwrap(), "--http", "127.0.0.1:0"],
        &[],
    );
    let mut k = d.conn();
    k.attach("probe");
    let st = k.ok("daemon.status", json!({}));
    drop(k);
    let addr = st["http"]["listen"]
        .as_str()
        .expect("http listen")
        .to_string();
    let (code, out, err) = run(&root, &["token", "create", "--local"], &[]);
    assert_eq!(code, 0, "{err}");
    let token = out.lines().last().unwrap().to_string();
    Served {
        url: format!("http://{addr}/mcp"),
        addr,
        d,
        token,
        root,
    }
}

/// One HTTP answer: status, headers (lowercase names), body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    /// The JSON-RPC messages of an event-stream body.
    pub fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| !d.trim().is_empty())
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }
}

fn answer(r: ureq::Response) -> Answer {
    let status = r.status();
    let headers = r
        .headers_names()
        .into_iter()
        .map(|n| {
            let v = r.header(&n).unwrap_or("").to_string();
            (n.to_ascii_lowercase(), v)
        })
        .collect();
    let body = r.into_string().unwrap_or_default();
    Answer {
        status,
        headers,
        body,
    }
}

pub fn request(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Answer {
    let mut req = agent.request(method, url);
    for (k, v) in headers {
        req = req.set(k, v);
    }
    let r = match body {
        Some(b) => req.set("Content-Type", "application/json").send_string(b),
        None => req.call(),
    };
    match r {
        Ok(r) => answer(r),
        Err(ureq::Error::Status(_, r)) => answer(r),
        Err(e) => panic!("{method} {url}: {e}"),
    }
}

/// A 2025-era client: one session.
pub struct Client {
    pub agent: ureq::Agent,
    pub url: String,
    pub token: String,
    pub session: String,
    next: u64,
}

impl Client {
    pub fn new(s: &Served) -> Client {
        Client::with(s, &s.token, json!({}))
    }

    /// A session of `token`'s principal whose client declares `capabilities`.
    pub fn with(s: &Served, token: &str, capabilities: Value) -> Client {
        Client::try_with(s, token, capabilities)
            .unwrap_or_else(|a| panic!("no session: {}", a.body))
    }

    /// [`Client::with`], or the answer to an `initialize` that made no session
    /// (a limit refused it).
    pub fn try_with(s: &Served, token: &str, capabilities: Value) -> Result<Client, Answer> {
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(60))
            .build();
        let mut c = Client {
            agent,
            url: s.url.clone(),
            token: token.to_string(),
            session: String::new(),
            next: 1,
        };
        let a = c.post_raw(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "http-test", "version": "1"}}}),
        );
        assert_eq!(a.status, 200, "{}", a.body);
        let Some(session) = a.header("mcp-session-id") else {
            return Err(a);
        };
        c.session = session.to_string();
        assert_eq!(a.json()["result"]["protocolVersion"], "2025-11-25");
        let n = c.post_raw(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(n.status, 202, "{}", n.body);
        Ok(c)
    }

    pub fn post_raw(&self, v: &Value) -> Answer {
        let auth = format!("Bearer {}", self.token);
        let mut h = vec![
            ("Authorization", auth.as_str()),
            ("Accept", "application/json, text/event-stream"),
        ];
        if !self.session.is_empty() {
            h.push(("Mcp-Session-Id", self.session.as_str()));
            h.push(("MCP-Protocol-Version", "2025-11-25"));
        }
        request(&self.agent, "POST", &self.url, &h, Some(&v.to_string()))
    }

    /// A request's answer (from a JSON body or the end of an event stream).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let a =
            self.post_raw(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        assert_eq!(a.status, 200, "{}", a.body);
        let msg = if a.header("content-type") == Some("text/event-stream") {
            a.events()
                .into_iter()
                .find(|e| e["id"] == json!(id))
                .expect("an answer on the stream")
        } else {
            a.json()
        };
        assert_eq!(msg["id"], json!(id), "{msg}");
        msg
    }

    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }

    pub fn exec(&mut self, src: &str) -> Value {
        self.ok(
            "tools/call",
            json!({"name": "shoal_exec", "arguments": {"src": src}}),
        )
    }
}

/// A raw GET event stream: lines as they come.
pub struct Stream {
    reader: BufReader<TcpStream>,
    pub status: u16,
    /// Everything read so far (for messages).
    pub seen: String,
}

impl Stream {
    pub fn open(s: &Served, session: &str, last_event: Option<&str>) -> Stream {
        let mut req = format!(
            "GET /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n",
            s.addr, s.token
        );
        if let Some(l) = last_event {
            req.push_str(&format!("Last-Event-ID: {l}\r\n"));
        }
        req.push_str("\r\n");
        Stream::send(s, req.as_bytes())
    }

    /// A POST whose answer is read as it comes (an event stream).
    pub fn post(s: &Served, c: &Client, body: &Value) -> Stream {
        let body = body.to_string();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMcp-Session-Id: {}\r\nContent-Length: {}\r\n\r\n{body}",
            s.addr,
            c.token,
            c.session,
            body.len()
        );
        Stream::send(s, req.as_bytes())
    }

    fn send(s: &Served, req: &[u8]) -> Stream {
        let mut t = TcpStream::connect(&s.addr).unwrap();
        t.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        t.write_all(req).unwrap();
        let mut reader = BufReader::new(t);
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let status = line.split(' ').nth(1).unwrap_or("0").parse().unwrap_or(0);
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        Stream {
            reader,
            status,
            seen: String::new(),
        }
    }

    /// The next JSON-RPC message, with its event id.
    pub fn next(&mut self) -> (String, Value) {
        let mut id = String::new();
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).expect("stream read");
            assert!(n > 0, "the stream ended");
            self.seen.push_str(&line);
            if let Some(i) = line.strip_prefix("id: ") {
                id = i.trim().to_string();
            }
            if let Some(d) = line.strip_prefix("data: ") {
                if !d.trim().is_empty() {
                    return (id, serde_json::from_str(d.trim()).unwrap());
                }
            }
        }
    }
}

pub fn status(s: &Served) -> Value {
    let mut k = s.d.conn();
    k.attach("probe");
    k.ok("daemon.status", json!({}))
}

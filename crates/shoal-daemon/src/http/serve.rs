//! The `/mcp` endpoint: POST, GET and DELETE mapped onto frames of the MCP
//! connection (docs/http.md). A request is answered with `application/json`, or with
//! `text/event-stream` when messages about it (progress, an elicitation, a
//! `subscriptions/listen`) come before its result and the client accepts a stream.

// A refusal is an HttpResponse returned once per request, never stored: boxing it buys nothing.
#![allow(clippy::result_large_err)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::Value as Json;

use super::guard::{self, refusal};
use super::pipe::{Pipe, Routed};
use super::sse::{self, SseStream, StreamSlot};
use super::{Http, Session};
use shoal_base::sync::Locked;
use shoal_proto::kernel::AttachParams;
use shoal_proto::mcp_era;
use shoal_proto::rpc::{self, RpcError};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

fn header_str<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

fn accepts_sse(req: &HttpRequest) -> bool {
    header_str(req, "accept").is_some_and(|a| a.contains("text/event-stream"))
}

/// `?session=NAME` on the URL: the shoal session of a client that cannot set `_meta`.
fn session_query(req: &HttpRequest) -> Option<String> {
    req.query_string()
        .split('&')
        .find_map(|kv| kv.strip_prefix("session="))
        .map(percent_decode)
        .filter(|s| !s.is_empty())
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn checks(req: &HttpRequest, st: &Http) -> Result<(String, String), HttpResponse> {
    guard::check_origin(req, &st.listen, &st.cfg.allowed_origins)?;
    let t = guard::check_token(req)?;
    st.stats.requests.fetch_add(1, Ordering::Relaxed);
    Ok(t)
}

/// The body, at most the socket's frame limit (413 past it), within the request timeout.
async fn read_body(
    mut body: web::Payload,
    limit: usize,
    timeout: Duration,
) -> Result<Vec<u8>, HttpResponse> {
    let read = async {
        let mut buf = Vec::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                refusal(
                    StatusCode::BAD_REQUEST,
                    -32600,
                    &format!("bad request body: {e}"),
                )
            })?;
            if buf.len() + chunk.len() > limit {
                return Err(refusal(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    -32600,
                    &format!("request body larger than the frame limit ({limit} bytes, [daemon] max_frame_bytes)"),
                ));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf)
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(r) => r,
        Err(_) => Err(refusal(
            StatusCode::REQUEST_TIMEOUT,
            -32600,
            "the request body did not arrive in time ([http] request_timeout_ms)",
        )),
    }
}

fn json_response(bytes: Bytes, session: Option<&str>) -> HttpResponse {
    let mut r = HttpResponse::Ok();
    r.content_type("application/json");
    if let Some(s) = session {
        r.insert_header((SESSION_HEADER, s));
    }
    r.body(bytes)
}

fn sse_response(
    st: &Http,
    rx: tokio::sync::mpsc::UnboundedReceiver<Bytes>,
    session: Option<&str>,
    hold: impl Sized + 'static,
) -> HttpResponse {
    let mut r = HttpResponse::Ok();
    r.content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-cache"));
    if let Some(s) = session {
        r.insert_header((SESSION_HEADER, s));
    }
    let keepalive = Duration::from_millis(st.cfg.keepalive_ms);
    r.streaming(sse::body(rx, keepalive, StreamSlot::take(&st.stats), hold))
}

/// A frame on one line (the socket's framing), whatever the client's layout.
/// The frame passed to the daemon: the message as it was read and checked here, one line
/// (not the client's bytes, whose duplicate keys another parser could read otherwise).
fn one_line(msg: &Json) -> Vec<u8> {
    let mut v = msg.to_string().into_bytes();
    v.push(b'\n');
    v
}

/// A new `Mcp-Session-Id`: 16 bytes from the OS's random source (`getrandom(2)`), in hex.
fn session_id() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // Not expected on Linux. Unique still; and a session answers only its own
        // principal's token, so a guessed id gives nothing the token does not.
        b = *uuid::Uuid::now_v7().as_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The `shoal/attach` an HTTP session's connection opens with: the bearer's
/// token and the session the client names (the shim's attach, typed alike).
fn attach_frame(bearer: &str, session: Option<&str>) -> Vec<u8> {
    let attach = rpc::Notification {
        jsonrpc: "2.0",
        method: "shoal/attach",
        params: AttachParams {
            token: Some(bearer.to_string()),
            session: session.map(str::to_string),
            ..AttachParams::default()
        },
    };
    // Strings only: it always encodes.
    let mut v = serde_json::to_vec(&attach).unwrap_or_default();
    v.push(b'\n');
    v
}

fn internal(id: &Json, message: &str) -> HttpResponse {
    HttpResponse::InternalServerError()
        .content_type("application/json")
        .body(rpc::error_frame(id, &RpcError::internal(message)))
}

/// 429: the principal's clients hold `connections_per_principal` connections.
fn too_many(st: &Http, id: &Json) -> HttpResponse {
    let max = st.cfg.connections_per_principal;
    let message = format!(
        "resource limit reached: this principal's HTTP clients hold {max} daemon connections \
         ([http] connections_per_principal = {max}); end a session (DELETE /mcp) or wait for \
         a request to finish"
    );
    HttpResponse::TooManyRequests()
        .content_type("application/json")
        .body(rpc::error_frame(
            id,
            &RpcError::new(rpc::RESOURCE_LIMIT, message),
        ))
}

fn unreachable_daemon(e: std::io::Error) -> HttpResponse {
    refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        -32603,
        &format!("cannot reach the daemon's MCP connection: {e}"),
    )
}

fn no_session() -> HttpResponse {
    refusal(
        StatusCode::NOT_FOUND,
        -32001,
        "session not found: it ended or expired; initialize again",
    )
}

/// The next frame for a request, or `Err(())` once its client went away
/// (woken by the client's close of its side: [`super::Peer::closed`]).
async fn next_or_gone(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Routed>,
    peer: Option<&super::Peer>,
) -> Result<Option<Routed>, ()> {
    let Some(peer) = peer else {
        return Ok(rx.recv().await);
    };
    tokio::select! {
        r = rx.recv() => Ok(r),
        () = peer.closed() => Err(()),
    }
}

fn peer(req: &HttpRequest) -> Option<super::Peer> {
    req.conn_data::<super::Peer>().cloned()
}

pub async fn post(req: HttpRequest, body: web::Payload, st: web::Data<Http>) -> HttpResponse {
    let (bearer, principal) = match checks(&req, &st) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let timeout = Duration::from_millis(st.cfg.request_timeout_ms);
    let bytes = match read_body(body, st.limit, timeout).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let msg: Json = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                -32700,
                &format!("parse error: {e}"),
            );
        }
    };
    if !msg.is_object() {
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "invalid request: one JSON-RPC message per POST (batches are not supported)",
        );
    }
    let id = msg.get("id").filter(|v| !v.is_null()).cloned();
    let method = msg.get("method").and_then(Json::as_str);
    let frame = one_line(&msg);
    let sse = accepts_sse(&req);
    // `shoal/attach` names the connection's principal: only the bridge sends it (with the
    // bearer it checked), never a client's frame passed through.
    if method.is_some_and(|m| m.starts_with("shoal/")) {
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "invalid request: shoal/* methods are not served over HTTP",
        );
    }
    let progress = msg
        .pointer("/params/_meta/progressToken")
        .map(Json::to_string);
    if let Some(sid) = header_str(&req, SESSION_HEADER) {
        let Some(s) = st.session(sid) else {
            return no_session();
        };
        if s.principal != principal {
            return no_session();
        }
        if let Some(v) = header_str(&req, VERSION_HEADER) {
            if !shoal_proto::mcp::VERSIONS.contains(&v) && v != mcp_era::MODERN {
                return refusal(
                    StatusCode::BAD_REQUEST,
                    -32600,
                    &format!(
                        "unsupported MCP-Protocol-Version {v:?} (this session speaks {})",
                        s.version
                    ),
                );
            }
        }
        s.touch();
        return match (method, id) {
            (Some(_), Some(id)) => in_session(&st, peer(&req), &s, id, progress, sse, frame).await,
            _ => match s.pipe.send(frame) {
                Ok(()) => {
                    if method == Some("notifications/cancelled") {
                        if let Some(id) = msg.pointer("/params/requestId") {
                            s.pipe.cancelled(id);
                        }
                    }
                    HttpResponse::Accepted().finish()
                }
                Err(_) => no_session(),
            },
        };
    }
    match (method, id) {
        (Some("initialize"), Some(id)) => initialize(&st, &req, &bearer, &principal, id, frame).await,
        (Some(_), Some(id)) if msg.pointer("/params/_meta").and_then(|m| m.get(mcp_era::PROTOCOL_VERSION_KEY)).is_some() => {
            stateless(&st, &req, bearer, &principal, id, sse, frame).await
        }
        (Some(_), Some(_)) => refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "bad request: no Mcp-Session-Id; send initialize first, or a 2026-07-28 request with its _meta",
        ),
        // A notification or response that belongs to no session: nothing waits for it.
        _ => HttpResponse::Accepted().finish(),
    }
}

/// `initialize`: a new MCP connection, and a session once it answers.
async fn initialize(
    st: &web::Data<Http>,
    req: &HttpRequest,
    bearer: &str,
    principal: &str,
    id: Json,
    frame: Vec<u8>,
) -> HttpResponse {
    let q = session_query(req);
    // Held until the session is in the table (then it counts itself).
    let Some(_opening) = Running::reserve(st.clone().into_inner(), principal, true) else {
        return too_many(st, &id);
    };
    let pipe = match Pipe::connect(&st.socket, attach_frame(bearer, q.as_deref()), false).await {
        Ok(p) => p,
        Err(e) => return unreachable_daemon(e),
    };
    let Ok(mut rx) = pipe.request(id.to_string(), None, false, frame) else {
        return internal(&id, "the daemon closed the connection");
    };
    let answer = loop {
        match rx.recv().await {
            Some(Routed::Response(b)) => break b,
            Some(Routed::Message(_)) => continue,
            None => return internal(&id, "the daemon closed the connection"),
        }
    };
    let version = serde_json::from_slice::<Json>(&answer).ok().and_then(|v| {
        v.pointer("/result/protocolVersion")
            .and_then(Json::as_str)
            .map(str::to_string)
    });
    let Some(version) = version else {
        // Refused (a bad version, a limit): the answer says why; no session.
        return json_response(answer, None);
    };
    let sid = session_id();
    let s = Arc::new(Session {
        id: sid.clone(),
        principal: principal.to_string(),
        bearer: bearer.to_string(),
        pipe,
        version,
        get: Default::default(),
        streams: Default::default(),
        last_used: std::sync::Mutex::new(Instant::now()),
    });
    st.sessions.locked().insert(sid.clone(), s);
    st.stats.sessions.fetch_add(1, Ordering::SeqCst);
    tracing::debug!(session = %sid, "http session started");
    json_response(answer, Some(&sid))
}

/// Drops a request's route when the HTTP request goes away before its answer.
struct Forget {
    pipe: Arc<Pipe>,
    key: Option<String>,
}

impl Drop for Forget {
    fn drop(&mut self) {
        if let Some(k) = self.key.take() {
            self.pipe.forget(&k);
        }
    }
}

/// A request of a 2025-era session.
async fn in_session(
    st: &web::Data<Http>,
    peer: Option<super::Peer>,
    s: &Arc<Session>,
    id: Json,
    progress: Option<String>,
    sse: bool,
    frame: Vec<u8>,
) -> HttpResponse {
    let key = id.to_string();
    let Ok(mut rx) = s.pipe.request(key.clone(), progress, sse, frame) else {
        return no_session();
    };
    let mut forget = Forget {
        pipe: s.pipe.clone(),
        key: Some(key),
    };
    let first = match next_or_gone(&mut rx, peer.as_ref()).await {
        Ok(Some(f)) => f,
        Ok(None) => return internal(&id, "the session's connection to the daemon ended"),
        // The client went away: its answer is dropped (the call runs on, as the spec wants).
        Err(()) => return HttpResponse::NoContent().finish(),
    };
    let m = match first {
        Routed::Response(b) => return json_response(b, Some(&s.id)),
        Routed::Message(m) => m,
    };
    forget.key = None;
    let stream = SseStream::new();
    let reader = stream.attach(None, s.version.as_str() >= "2025-11-25");
    stream.push(&m);
    s.remember(stream.clone());
    let feed = stream.clone();
    actix_rt::spawn(async move {
        while let Some(r) = rx.recv().await {
            match r {
                Routed::Message(b) => feed.push(&b),
                Routed::Response(b) => {
                    feed.push(&b);
                    break;
                }
            }
        }
        feed.finish();
    });
    sse_response(st, reader, Some(&s.id), ())
}

/// A pipe lent to one stateless request: back to the pool when the request was
/// answered, dropped (the daemon cancels what it ran) when its client went away.
struct Lease {
    st: Arc<Http>,
    key: super::PoolKey,
    pipe: Option<Arc<Pipe>>,
    done: Arc<AtomicBool>,
    /// Counts the request as running for its principal until it ends.
    _running: Running,
}

/// A place [`Http::reserve`] took for a principal, given back when dropped.
struct Running {
    st: Arc<Http>,
    principal: String,
}

impl Running {
    /// A place for one more of `principal`'s daemon connections, if it has
    /// room (`evict`: ending its least recently used session to make some).
    fn reserve(st: Arc<Http>, principal: &str, evict: bool) -> Option<Running> {
        st.reserve(principal, evict).then(|| Running {
            st,
            principal: principal.to_string(),
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.st.release(&self.principal);
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(p) = self.pipe.take() else { return };
        if !self.done.load(Ordering::SeqCst) || p.is_closed() {
            return;
        }
        let mut pool = self.st.pool.locked();
        let idle = pool.entry(self.key.clone()).or_default();
        if idle.len() < super::POOL {
            idle.push(p);
        }
    }
}

/// A 2026-07-28 request: no session; served on a pooled connection of its bearer.
async fn stateless(
    st: &web::Data<Http>,
    req: &HttpRequest,
    bearer: String,
    principal: &str,
    id: Json,
    sse: bool,
    frame: Vec<u8>,
) -> HttpResponse {
    let Some(running) = Running::reserve(st.clone().into_inner(), principal, false) else {
        return too_many(st, &id);
    };
    let q = session_query(req);
    let key = (bearer, q);
    let idle = st.pool.locked().get_mut(&key).and_then(Vec::pop);
    let pipe = match idle {
        Some(p) => p,
        None => match Pipe::connect(&st.socket, attach_frame(&key.0, key.1.as_deref()), true).await
        {
            Ok(p) => p,
            Err(e) => return unreachable_daemon(e),
        },
    };
    let Ok(mut rx) = pipe.request(id.to_string(), None, sse, frame) else {
        return internal(&id, "the daemon closed the connection");
    };
    let done = Arc::new(AtomicBool::new(false));
    let lease = Lease {
        st: st.clone().into_inner(),
        key,
        pipe: Some(pipe),
        done: done.clone(),
        _running: running,
    };
    let peer = peer(req);
    let first = loop {
        match next_or_gone(&mut rx, peer.as_ref()).await {
            Ok(None) => return internal(&id, "the daemon closed the connection"),
            Ok(Some(Routed::Message(_))) if !sse => continue,
            Ok(Some(f)) => break f,
            // The client went away: dropping the lease closes the connection, which
            // cancels the call (a hang-up, as on the socket).
            Err(()) => return HttpResponse::NoContent().finish(),
        }
    };
    let m = match first {
        Routed::Response(b) => {
            done.store(true, Ordering::SeqCst);
            drop(lease);
            return json_response(b, None);
        }
        Routed::Message(m) => m,
    };
    let stream = SseStream::new();
    let reader = stream.attach(None, false);
    stream.push(&m);
    let feed = stream.clone();
    actix_rt::spawn(async move {
        while let Some(r) = rx.recv().await {
            match r {
                Routed::Message(b) => feed.push(&b),
                Routed::Response(b) => {
                    feed.push(&b);
                    done.store(true, Ordering::SeqCst);
                    break;
                }
            }
            if !feed.is_live() {
                break;
            }
        }
        feed.finish();
    });
    sse_response(st, reader, None, lease)
}

/// GET: the session's stream of server messages, or a stream taken up again with
/// `Last-Event-ID`.
pub async fn get(req: HttpRequest, st: web::Data<Http>) -> HttpResponse {
    let (_, principal) = match checks(&req, &st) {
        Ok(t) => t,
        Err(r) => return r,
    };
    if !accepts_sse(&req) {
        return refusal(
            StatusCode::NOT_ACCEPTABLE,
            -32600,
            "not acceptable: GET /mcp answers text/event-stream",
        );
    }
    let Some(sid) = header_str(&req, SESSION_HEADER) else {
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "bad request: GET /mcp needs the Mcp-Session-Id of an initialized session",
        );
    };
    let Some(s) = st.session(sid).filter(|s| s.principal == principal) else {
        return no_session();
    };
    s.touch();
    if let Some((stream, seq)) = header_str(&req, "last-event-id").and_then(sse::parse_event_id) {
        if let Some(old) = s.stream(stream) {
            if old.is_live() {
                return conflict();
            }
            let rx = old.attach(Some(seq), false);
            return sse_response(&st, rx, Some(&s.id), ());
        }
    }
    let mut get = s.get.locked();
    if get.as_ref().is_some_and(|g| g.is_live()) {
        return conflict();
    }
    let stream = SseStream::new();
    let rx = stream.attach(None, s.version.as_str() >= "2025-11-25");
    *get = Some(stream.clone());
    drop(get);
    s.remember(stream.clone());
    s.pipe.set_fallback(Some(stream));
    sse_response(&st, rx, Some(&s.id), ())
}

fn conflict() -> HttpResponse {
    refusal(
        StatusCode::CONFLICT,
        -32600,
        "conflict: this session's stream is being read by another request",
    )
}

/// DELETE: end the session (its subscriptions go; tasks stay, as on the socket).
pub async fn delete(req: HttpRequest, st: web::Data<Http>) -> HttpResponse {
    let (_, principal) = match checks(&req, &st) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let Some(sid) = header_str(&req, SESSION_HEADER) else {
        return refusal(
            StatusCode::BAD_REQUEST,
            -32600,
            "bad request: no Mcp-Session-Id",
        );
    };
    match st.session(sid) {
        Some(s) if s.principal == principal => {
            st.remove_session(sid);
            HttpResponse::Ok().finish()
        }
        _ => no_session(),
    }
}

/// Anything but `/mcp`.
pub async fn other(req: HttpRequest, st: web::Data<Http>) -> HttpResponse {
    if let Err(r) = guard::check_origin(&req, &st.listen, &st.cfg.allowed_origins) {
        return r;
    }
    if req.path() == "/mcp" {
        return HttpResponse::MethodNotAllowed()
            .insert_header((header::ALLOW, "GET, POST, DELETE"))
            .finish();
    }
    HttpResponse::NotFound().body("not found: MCP is served at /mcp\n")
}

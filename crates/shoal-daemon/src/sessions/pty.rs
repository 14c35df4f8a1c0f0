//! Pty: one actor per PTY, a child of its session's SessionSupervisor.
//!
//! State: the PTY's [`PtyHandle`] (child, I/O thread, screen). Messages:
//! [`PtyCall`] send / read / resize / close, each answered by a future that
//! never blocks the arbiter: the I/O thread writes and feeds the emulator,
//! reads wait on its change counter. Dropping the actor (its supervisor let
//! go of it) is a hard kill of the process group.
//!
//! Also here: the supervisor's PTY table and its `pty.*` handlers (open
//! spawns on a blocking thread, within `[limits] max_ptys_per_session`;
//! each PTY holds its bound in the session's memory budget from open, or
//! resize, to close: docs/protocol.md §8),
//! and the connection-side helpers the kernel and MCP connections call (one
//! arm each): requests, `shoal://pty` resources, screen subscriptions.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use crate::health::Registration;
use crate::msg::{PtyCall, PtyGet, PtyWatch};
use crate::peer::Writer;
use crate::sessions::handle::SessionHandle;
use crate::sessions::supervisor::SessionSupervisor;
use shoal_proto::kernel::{PtyRef, PtyRequest};
use shoal_proto::mcp::notify;
use shoal_proto::mcp::PtyAnswer;
use shoal_proto::rpc::RpcError;
use shoal_pty::api::{self, PtyOp};
use shoal_pty::{child_env, id_name, PtyHandle, SpawnSpec};
use shoal_value::memory::MemBudget;

/// Screen-update notifications of one subscription come at most this often.
pub const UPDATE_EVERY: Duration = Duration::from_millis(50);

pub struct Pty {
    handle: Arc<PtyHandle>,
    reg: Registration,
}

impl Pty {
    pub fn new(handle: Arc<PtyHandle>, reg: Registration) -> Pty {
        Pty { handle, reg }
    }
}

impl Actor for Pty {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.set_mailbox_capacity(64);
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        self.reg.stats.set_state("closed");
    }
}

type PtyReply = ResponseFuture<Result<PtyAnswer, RpcError>>;

impl Handler<PtyCall> for Pty {
    type Result = PtyReply;

    fn handle(&mut self, msg: PtyCall, ctx: &mut Context<Self>) -> PtyReply {
        self.reg.stats.handled();
        let h = self.handle.clone();
        // A human who took the PTY over types alone (docs/protocol.md §8);
        // reads go on for everyone.
        let what = match &msg.op {
            PtyOp::Send { .. } => Some("pty.send"),
            PtyOp::Resize { .. } => Some("pty.resize"),
            PtyOp::Close { .. } => Some("pty.close"),
            _ => None,
        };
        if let (Some(what), Some(id)) = (what, msg.op.id()) {
            if let Some(c) = h.claims().held_by_other(msg.caller) {
                return Box::pin(std::future::ready(Err(shoal_pty::claim::taken_over(
                    id, what, &c,
                ))));
            }
        }
        match msg.op {
            PtyOp::Send { id, bytes } => {
                let w = h.write(bytes);
                Box::pin(async move {
                    w.await
                        .map(|n| api::send_result(id, n))
                        .map_err(|e| RpcError::internal(format!("pty write failed: {e}")))
                })
            }
            PtyOp::Read { opts, .. } => {
                let r = h.read(opts);
                Box::pin(async move {
                    let r = r.await;
                    Ok(api::read_result(&h.info(), &r))
                })
            }
            PtyOp::Resize { id, rows, cols } => {
                let r = h.resize(rows, cols);
                Box::pin(async move {
                    let (rows, cols) = r
                        .await
                        .map_err(|e| RpcError::internal(format!("pty resize failed: {e}")))?;
                    // The forced change of a resize is consumed here (docs/protocol.md §8).
                    h.consume_changed();
                    Ok(api::resize_result(id, rows, cols))
                })
            }
            PtyOp::Close { id } => {
                let c = h.close();
                ctx.stop();
                Box::pin(async move { Ok(api::close_result(id, c.await)) })
            }
            PtyOp::Open(_) | PtyOp::List => Box::pin(std::future::ready(Err(RpcError::internal(
                "pty table request sent to a pty",
            )))),
        }
    }
}

/// What an open PTY holds of its session's memory budget: the bound of
/// its screen and buffers, charged at open and resize, released on drop.
struct Held {
    budget: &'static MemBudget,
    bytes: u64,
    /// How wide (cells) the emulator's rows may be allocated.
    row_cap: u16,
}

impl Held {
    /// Charge a new `rows` x `cols` PTY, or say what does not fit.
    fn open(
        budget: &'static MemBudget,
        (rows, cols): (u16, u16),
        ptys: usize,
    ) -> Result<Held, RpcError> {
        let bytes = shoal_pty::charge(rows, cols);
        budget
            .hold(bytes)
            .map_err(|_| api::memory_refused("opening", (cols, rows), bytes, budget, ptys))?;
        Ok(Held {
            budget,
            bytes,
            row_cap: cols,
        })
    }

    /// Charge the PTY at its new size (a growth must fit; a shrink gives
    /// back at once).
    fn resize(&mut self, (rows, cols): (u16, u16), ptys: usize) -> Result<(), RpcError> {
        let row_cap = shoal_pty::term::row_capacity(self.row_cap, cols);
        let bytes = shoal_pty::charge(rows, row_cap);
        if bytes > self.bytes {
            let more = bytes - self.bytes;
            self.budget.hold(more).map_err(|_| {
                api::memory_refused("resizing to", (cols, rows), bytes, self.budget, ptys)
            })?;
        } else {
            self.budget.release(self.bytes - bytes);
        }
        self.bytes = bytes;
        self.row_cap = row_cap;
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

/// One open PTY of the table.
struct Entry {
    addr: crate::health::Counted<Pty>,
    handle: Arc<PtyHandle>,
    held: Held,
}

/// A session's PTYs, kept by its SessionSupervisor.
pub struct PtyTable {
    entries: BTreeMap<u64, Entry>,
    /// Opens in flight (they count against the limit).
    opening: usize,
    max: usize,
}

impl PtyTable {
    pub fn new(max: usize) -> PtyTable {
        PtyTable {
            entries: BTreeMap::new(),
            opening: 0,
            max: max.max(1),
        }
    }

    /// `-32022` for `id`, naming the PTYs open here.
    fn unknown(&self, id: u64) -> RpcError {
        let open: Vec<String> = self.entries.keys().map(|k| id_name(*k)).collect();
        api::unknown_pty_among(&id_name(id), &open)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// End every PTY's process group (session close, daemon stop); the I/O
    /// threads reap.
    pub fn kill_all(&mut self) {
        for (_, e) in std::mem::take(&mut self.entries) {
            shoal_pty::spawn::kill_group(e.handle.pid);
        }
    }
}

/// The session's cwd and environment (as of its last exec, else what it
/// starts with).
fn session_env(
    shared: &crate::sessions::session::SessionShared,
) -> (std::path::PathBuf, Vec<(String, String)>) {
    match shared.live_state() {
        Some(l) => (l.cwd, l.env),
        // Before the first exec: what the session starts with (never the
        // daemon's own environment).
        None => (shared.cwd.clone(), shared.env.clone()),
    }
}

impl Handler<PtyCall> for SessionSupervisor {
    type Result = ResponseActFuture<Self, Result<PtyAnswer, RpcError>>;

    fn handle(&mut self, msg: PtyCall, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        let ready = |r| -> Self::Result { Box::pin(actix::fut::ready(r)) };
        match msg.op {
            PtyOp::Open(req) => {
                if self.ptys.entries.len() + self.ptys.opening >= self.ptys.max {
                    return ready(Err(api::limit_reached(self.ptys.max)));
                }
                // The Leash gate (docs/rules.md §21): a program on a PTY is an
                // opaque effect, checked like exec, before the spawn.
                if let Some(g) = &msg.gate {
                    let effects = [shoal_policy::Effect::Opaque];
                    let d = g.decide(&effects);
                    if let Some(e) = shoal_proto::rpc::refusal(&g.principal, &d, &effects) {
                        return ready(Err(e));
                    }
                }
                // The program runs as an exec of this caller here would: in a
                // token's session under the owner's sandbox, whoever opens it
                // (another principal then drives it with `pty.send`).
                let confined = self.shared.confining_gate(msg.gate.clone());
                let sandbox = confined.as_ref().and_then(|g| g.sandbox.clone());
                let run_gate = confined.as_ref().and_then(|g| g.run.clone());
                let (cwd, mut base) = session_env(&self.shared);
                // A token principal's program inherits what its children
                // may (docs/rules.md §21).
                if let Some(v) = confined
                    .as_deref()
                    .and_then(shoal_lang::env_view::EnvView::for_gate)
                {
                    base.retain(|(k, _)| v.inherits(k));
                }
                let spec = SpawnSpec {
                    cmd: req.cmd.clone(),
                    args: req.args,
                    cwd,
                    env: child_env(base, &req.env),
                    rows: req.rows,
                    cols: req.cols,
                };
                // The PTY's bound is held from now on (an open in flight
                // counts), given back if the spawn fails.
                let ptys = self.ptys.entries.len() + self.ptys.opening;
                let held = match Held::open(self.shared.memory, (req.rows, req.cols), ptys) {
                    Ok(h) => h,
                    Err(e) => return ready(Err(e)),
                };
                let (session, table) = (self.shared.name.clone(), self.shared.ptys.clone());
                self.ptys.opening += 1;
                let spawned = actix_rt::task::spawn_blocking(move || {
                    shoal_policy::run_gate::with_gate(run_gate, || {
                        shoal_policy::landlock::with_rules(sandbox, || {
                            PtyHandle::open(&spec, &session, &table)
                        })
                    })
                });
                let cmd = req.cmd;
                Box::pin(spawned.into_actor(self).map(move |r, act, _ctx| {
                    act.ptys.opening -= 1;
                    let h = match r {
                        Ok(Ok(h)) => h,
                        Ok(Err(e)) => return Err(api::spawn_failed(&cmd, &e)),
                        Err(e) => return Err(RpcError::internal(format!("pty spawn: {e}"))),
                    };
                    let reg = act
                        .registry
                        .register("pty", id_name(h.id), Some(act.reg.id()));
                    let stats = reg.stats.clone();
                    let addr = crate::health::Counted::new(Pty::new(h.clone(), reg).start(), stats);
                    let info = h.info();
                    tracing::info!(session = %act.shared.name, pty = %id_name(h.id), pid = h.pid, cmd = %h.cmd, "pty opened");
                    act.ptys.entries.insert(
                        h.id,
                        Entry {
                            addr,
                            handle: h,
                            held,
                        },
                    );
                    Ok(api::open_result(&info))
                }))
            }
            PtyOp::List => {
                let infos: Vec<_> = self
                    .ptys
                    .entries
                    .values()
                    .map(|e| e.handle.info())
                    .collect();
                ready(Ok(api::list_result(&infos)))
            }
            op => {
                let Some(id) = op.id() else {
                    return ready(Err(RpcError::internal("pty request without an id")));
                };
                let ptys = self.ptys.entries.len();
                // A close refused for a human's takeover keeps the entry.
                if let (PtyOp::Close { .. }, Some(e)) = (&op, self.ptys.entries.get(&id)) {
                    if let Some(c) = e.handle.claims().held_by_other(msg.caller) {
                        return ready(Err(shoal_pty::claim::taken_over(id, "pty.close", &c)));
                    }
                }
                // A closed PTY's charge is given back once its emulator is
                // gone (the close answers after that).
                let (addr, h, held) = if matches!(op, PtyOp::Close { .. }) {
                    match self.ptys.entries.remove(&id) {
                        Some(e) => (e.addr, e.handle, Some(e.held)),
                        None => return ready(Err(self.ptys.unknown(id))),
                    }
                } else {
                    let Some(e) = self.ptys.entries.get_mut(&id) else {
                        return ready(Err(self.ptys.unknown(id)));
                    };
                    if let PtyOp::Resize { rows, cols, .. } = op {
                        if let Some(c) = e.handle.claims().held_by_other(msg.caller) {
                            return ready(Err(shoal_pty::claim::taken_over(id, "pty.resize", &c)));
                        }
                        if let Err(err) = e.held.resize((rows, cols), ptys) {
                            return ready(Err(err));
                        }
                    }
                    (e.addr.clone(), e.handle.clone(), None)
                };
                let f = addr.send(PtyCall {
                    op,
                    gate: None,
                    caller: msg.caller,
                });
                Box::pin(
                    async move {
                        let r = match f.await {
                            Ok(r) => r,
                            // The actor is gone: answer a close from the handle.
                            Err(_) => Ok(api::close_result(id, h.close().await)),
                        };
                        drop(held);
                        r
                    }
                    .into_actor(self),
                )
            }
        }
    }
}

impl Handler<PtyGet> for SessionSupervisor {
    type Result = Result<Arc<PtyHandle>, RpcError>;

    fn handle(&mut self, msg: PtyGet, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        self.ptys
            .entries
            .get(&msg.id)
            .map(|e| e.handle.clone())
            .ok_or_else(|| api::unknown_pty(&id_name(msg.id)))
    }
}

impl Handler<PtyWatch> for SessionSupervisor {
    type Result = Result<tokio::sync::watch::Receiver<u64>, RpcError>;

    fn handle(&mut self, msg: PtyWatch, _ctx: &mut Context<Self>) -> Self::Result {
        self.reg.stats.handled();
        self.ptys
            .entries
            .get(&msg.id)
            .map(|e| e.handle.changes())
            .ok_or_else(|| api::unknown_pty(&id_name(msg.id)))
    }
}

/// A `pty.*` request from a connection: parse, ask the session.
pub fn call(
    handle: &SessionHandle,
    req: PtyRequest,
) -> impl std::future::Future<Output = Result<PtyAnswer, RpcError>> + 'static {
    call_as(handle, req, None, None)
}

/// [`call`] for a principal on connection `caller`: `pty.open` is gated by
/// its verdict; a PTY a human took over refuses another caller's input.
pub fn call_as(
    handle: &SessionHandle,
    req: PtyRequest,
    gate: Option<Arc<shoal_policy::Gate>>,
    caller: Option<u64>,
) -> impl std::future::Future<Output = Result<PtyAnswer, RpcError>> + 'static {
    let method = req.method();
    let op = api::parse(req);
    let handle = handle.clone();
    // A session shared read-only: its PTYs may be listed and read, never driven.
    let reads = matches!(op, Ok(PtyOp::Read { .. } | PtyOp::List));
    let who = gate
        .as_ref()
        .map(|g| g.principal.clone())
        .unwrap_or_default();
    async move {
        if !reads {
            handle.writable(&who, method)?;
        }
        let op = op?;
        let name = handle.name.clone();
        handle
            .send(PtyCall { op, gate, caller })
            .await
            .map_err(|_| crate::peer::session_error(crate::msg::SessionError::Closed(name)))?
    }
}

/// `resources/list` entries: `shoal://pty` and one `shoal://pty/N` per PTY.
pub async fn resource_entries(handle: Option<SessionHandle>) -> Vec<shoal_proto::mcp::Resource> {
    let entry =
        |uri: String, name: String, desc: &str| shoal_proto::mcp::Resource::json(uri, name, desc);
    let mut out = vec![entry(
        "shoal://pty".into(),
        "pty".into(),
        "The session's PTYs (no screen contents)",
    )];
    let Some(h) = handle else {
        return out;
    };
    if let Ok(PtyAnswer::List(list)) = call(&h, PtyRequest::List).await {
        for p in list.ptys {
            if let Some(id) = shoal_pty::parse_id(&p.pty_id) {
                out.push(entry(
                    format!("shoal://pty/{id}"),
                    id_name(id),
                    "A PTY screen (subscribable)",
                ));
            }
        }
    }
    out
}

/// `resources/read` of `shoal://pty` (the list) or `shoal://pty/N` (the
/// screen; consumes `changed`): the kernel result or its error.
pub fn read_resource(
    handle: &SessionHandle,
    seg: Option<&str>,
) -> impl std::future::Future<Output = Result<PtyAnswer, RpcError>> + 'static {
    let req = match seg {
        None => PtyRequest::List,
        Some(s) => PtyRequest::Read(shoal_proto::kernel::PtyReadParams {
            pty_id: PtyRef::Name(format!("pty:{}", s.strip_prefix("pty:").unwrap_or(s))),
            wait_for: None,
            stable_ms: None,
            timeout_ms: None,
            scrollback: None,
        }),
    };
    call(handle, req)
}

/// The PTY a subscribable `shoal://pty/N` names.
pub fn watch_uri(u: &str) -> Option<u64> {
    let p = shoal_proto::uri::parse(u).ok()?;
    match (p.root.as_str(), p.segs.as_slice()) {
        ("pty", [id]) => shoal_pty::parse_id(id),
        _ => None,
    }
}

/// PTY `id` of the session (a human's takeover and live view).
pub fn get(
    handle: &SessionHandle,
    id: u64,
) -> impl std::future::Future<Output = Result<Arc<PtyHandle>, RpcError>> + 'static {
    let f = handle.send(PtyGet { id });
    async move { f.await.map_err(|_| api::unknown_pty(&id_name(id)))? }
}

/// Start watching PTY `id` of the session: its change counter.
pub fn watch(
    handle: &SessionHandle,
    id: u64,
) -> impl std::future::Future<Output = Result<tokio::sync::watch::Receiver<u64>, RpcError>> + 'static
{
    let f = handle.send(PtyWatch { id });
    async move { f.await.map_err(|_| api::unknown_pty(&id_name(id)))? }
}

/// Deliver `notifications/resources/updated {uri, seq}` for every change of
/// the screen, coalesced to at most one per [`UPDATE_EVERY`]; a last one
/// when the PTY goes away. Runs until cancelled (unsubscribe) or then.
/// `listen`: the `subscriptions/listen` id the updates belong to (stamped
/// into `_meta`), `None` for a `resources/subscribe`.
pub async fn updates(
    tx: Writer,
    uri: String,
    mut changes: tokio::sync::watch::Receiver<u64>,
    listen: Option<serde_json::Value>,
) {
    let mut seq = 0u64;
    // `changes` saw the screen as it was when the subscription was made (a
    // new receiver has): a change between then and this loop's first poll
    // is still delivered.
    loop {
        let open = changes.changed().await.is_ok();
        changes.borrow_and_update();
        let update = notify::ResourceUpdated {
            uri: &uri,
            seq,
            payload: None,
            meta: listen.as_ref().map(|id| notify::ListenMeta {
                subscription_id: id,
            }),
        };
        seq += 1;
        if tx.send(notify::resource_updated(&update)).await.is_err() || !open {
            return;
        }
        tokio::time::sleep(UPDATE_EVERY).await;
    }
}

//! Stream methods (docs/rules.md §10): lazy combinators, sinks, list fallback.
//!
//! Non-callback combinators are lazy iterator adapters. Callback combinators
//! (`map where filter scan flat_map take_until(pred)`) need the host, which an
//! iterator cannot hold: on a bounded stream they are applied eagerly; on an
//! unbounded stream they are recorded as pending stages (in the new stream
//! itself) and applied while a sink or `take(n)` pulls items.
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{arity, coll, count_arg, no_named, other, req};
use crate::{json, ops, Args, ErrorCode, Host, SResult, ShoalError, StreamVal, Value};

type Src = Box<dyn Iterator<Item = SResult<Value>> + Send>;

#[derive(Clone)]
enum Stage {
    Map(Value),
    Where(Value),
    Scan(Value),
    FlatMap(Value),
    TakeUntil(Value),
}

/// The callback stages pending on an unbounded stream (kept in the stream itself), and the
/// accumulator of a `scan` among them.
#[derive(Default)]
pub struct PendingStages {
    stages: Vec<Stage>,
    acc: Option<Value>,
}

/// Take the stages pending on `s` (none left on it).
fn take_pending(s: &StreamVal) -> (Vec<Stage>, Option<Value>) {
    let Ok(mut p) = s.pending.lock() else {
        return (Vec::new(), None);
    };
    let p = std::mem::take(&mut *p);
    (p.stages, p.acc)
}

/// Make a stream value from an iterator.
pub fn make_stream(label: &str, bounded: bool, src: Src) -> Value {
    Value::Stream(Arc::new(StreamVal::new(label, bounded, src)))
}

fn consumed() -> ShoalError {
    ShoalError::new(ErrorCode::StreamConsumed, "stream already consumed").with_hint(
        "a stream has a single consumer: collect it once with `.collect()` and reuse the list",
    )
}

fn take_source(s: &StreamVal) -> SResult<Src> {
    let mut g = s
        .source
        .lock()
        .map_err(|_| ShoalError::custom("stream lock poisoned"))?;
    g.take().ok_or_else(consumed)
}

/// A consuming cursor over a stream: its source plus any pending callback
/// stages (`map`/`where`/… recorded on an unbounded stream). Use it to drain
/// streams in `for` loops: `let mut c = StreamCursor::open(&s)?; while let
/// Some(v) = c.next(host)? { … }`.
pub struct Staged {
    src: Src,
    stages: Vec<Stage>,
    acc: Option<Value>,
    buf: std::collections::VecDeque<Value>,
    done: bool,
}

impl Staged {
    /// Take the stream's source (`stream_consumed` if already taken).
    pub fn open(s: &Arc<StreamVal>) -> SResult<Staged> {
        let (stages, acc) = take_pending(s);
        let src = take_source(s)?;
        Ok(Staged {
            src,
            stages,
            acc,
            buf: Default::default(),
            done: false,
        })
    }

    /// The next item, applying pending stages; `None` at the end.
    pub fn next(&mut self, host: &mut dyn Host) -> SResult<Option<Value>> {
        loop {
            if let Some(v) = self.buf.pop_front() {
                return Ok(Some(v));
            }
            if self.done {
                return Ok(None);
            }
            let item = match self.src.next() {
                None => {
                    self.done = true;
                    return Ok(None);
                }
                Some(r) => r?,
            };
            let mut items = vec![item];
            for st in &self.stages {
                let mut next = Vec::new();
                for x in items {
                    match st {
                        Stage::Map(f) => next.push(host.call(f, vec![x])?),
                        Stage::Where(f) => {
                            if ops::truth(&host.call(f, vec![x.clone()])?)? {
                                next.push(x)
                            }
                        }
                        Stage::Scan(f) => {
                            let acc = self.acc.take().unwrap_or(Value::Null);
                            let a = host.call(f, vec![acc, x])?;
                            self.acc = Some(a.clone());
                            next.push(a);
                        }
                        Stage::FlatMap(f) => {
                            let r = host.call(f, vec![x])?;
                            next.extend(spread(host, &r)?);
                        }
                        Stage::TakeUntil(f) => {
                            if self.done {
                                continue;
                            }
                            if ops::truth(&host.call(f, vec![x.clone()])?)? {
                                self.done = true;
                            } else {
                                next.push(x);
                            }
                        }
                    }
                }
                items = next;
            }
            self.buf.extend(items);
        }
    }
}

fn spread(host: &mut dyn Host, v: &Value) -> SResult<Vec<Value>> {
    match v {
        Value::Stream(s) => collect_stream(host, s),
        other => match coll::Coll::from_value(other) {
            Some(c) => {
                crate::memory::reserve_items::<Value>(c.len())?;
                Ok(c.to_vec())
            }
            None => Err(ShoalError::type_error(format!(
                "flat_map: expected list or stream, found {}",
                other.type_name()
            ))),
        },
    }
}

fn unbounded(s: &StreamVal) -> ShoalError {
    ShoalError::new(
        ErrorCode::StreamUnbounded,
        format!("cannot collect an unbounded stream<{}>", s.label),
    )
    .with_hint("bound it first with `.take(n)`")
}

/// Drain a bounded stream into a list (`stream_unbounded` / `stream_consumed`).
pub fn collect_stream(host: &mut dyn Host, s: &Arc<StreamVal>) -> SResult<Vec<Value>> {
    if !s.bounded {
        return Err(unbounded(s));
    }
    let mut st = Staged::open(s)?;
    let mut out = Vec::new();
    while let Some(v) = st.next(host)? {
        if out.len() & 1023 == 1023 {
            host.check_interrupt()?;
        }
        out.push(v);
    }
    Ok(out)
}

fn dur_arg(v: &Value, name: &str) -> SResult<Duration> {
    match v {
        Value::Duration(d) if *d >= 0 => Ok(Duration::from_nanos(*d as u64)),
        other => Err(ShoalError::type_error(format!(
            ".{name}() expects a non-negative duration, got {}",
            other.type_name()
        ))),
    }
}

fn lazy(s: &StreamVal, bounded: bool, src: Src) -> Value {
    make_stream(&s.label, bounded, src)
}

pub fn call(
    host: &mut dyn Host,
    s: &Arc<StreamVal>,
    name: &str,
    args: &Args,
) -> SResult<Option<Value>> {
    // Callback combinators.
    if let "map" | "where" | "filter" | "scan" | "flat_map" | "take_until" = name {
        no_named(args, name)?;
        let (stage, acc) = match name {
            "map" => (Stage::Map(req(args, 0, name, "a function")?.clone()), None),
            "where" | "filter" => (
                Stage::Where(req(args, 0, name, "a predicate")?.clone()),
                None,
            ),
            "scan" => {
                let init = req(args, 0, name, "an initial value and a function")?.clone();
                (
                    Stage::Scan(req(args, 1, name, "a function")?.clone()),
                    Some(init),
                )
            }
            "flat_map" => (
                Stage::FlatMap(req(args, 0, name, "a function")?.clone()),
                None,
            ),
            _ => {
                let p = req(args, 0, name, "a predicate or stream")?;
                if let Value::Stream(other) = p {
                    // Stop when the other stream yields (checked between items).
                    let mut osrc = take_source(other)?;
                    let src = take_source(s)?;
                    let mut stopped = false;
                    let it = src.take_while(move |_| {
                        if !stopped && osrc.next().is_some() {
                            stopped = true;
                        }
                        !stopped
                    });
                    return Ok(Some(lazy(s, s.bounded, Box::new(it))));
                }
                (Stage::TakeUntil(p.clone()), None)
            }
        };
        if s.bounded {
            let items = collect_stream(host, s)?;
            let mut st = Staged {
                src: Box::new(items.into_iter().map(Ok)),
                stages: vec![stage],
                acc,
                buf: Default::default(),
                done: false,
            };
            let mut out = Vec::new();
            while let Some(v) = st.next(host)? {
                out.push(v);
            }
            return Ok(Some(lazy(s, true, Box::new(out.into_iter().map(Ok)))));
        }
        let (mut stages, old_acc) = take_pending(s);
        let src = take_source(s)?;
        stages.push(stage);
        let v = make_stream(&s.label, false, src);
        if let Value::Stream(ns) = &v {
            if let Ok(mut p) = ns.pending.lock() {
                *p = PendingStages {
                    stages,
                    acc: acc.or(old_acc),
                };
            }
        }
        return Ok(Some(v));
    }
    let v = match name {
        "take" => {
            arity(args, 1, name)?;
            let n = count_arg(req(args, 0, name, "a count")?, name)?;
            let (stages, acc) = take_pending(s);
            if stages.is_empty() {
                let src = take_source(s)?;
                lazy(s, true, Box::new(src.take(n)))
            } else {
                let src = take_source(s)?;
                let mut st = Staged {
                    src,
                    stages,
                    acc,
                    buf: Default::default(),
                    done: false,
                };
                let mut out = Vec::new();
                while out.len() < n {
                    match st.next(host)? {
                        Some(v) => out.push(v),
                        None => break,
                    }
                }
                lazy(s, true, Box::new(out.into_iter().map(Ok)))
            }
        }
        "collect" => {
            arity(args, 0, name)?;
            Value::list(collect_stream(host, s)?)
        }
        "each" => {
            no_named(args, name)?;
            let f = req(args, 0, name, "a function")?.clone();
            let mut st = Staged::open(s)?;
            let mut i = 0usize;
            while let Some(v) = st.next(host)? {
                i += 1;
                if i & 1023 == 0 {
                    host.check_interrupt()?;
                }
                host.call(&f, vec![v])?;
            }
            Value::Null
        }
        "save" | "append" => {
            let (path, ret) = other::stream_target(host, args, name)?;
            let mut st = Staged::open(s)?;
            let mut buf = Vec::new();
            while let Some(v) = st.next(host)? {
                match &v {
                    Value::Str(x) => buf.extend_from_slice(x.as_bytes()),
                    other => {
                        json::materialise_check(other)?;
                        buf.extend_from_slice(json::stringify(other).as_bytes())
                    }
                }
                buf.push(b'\n');
                if buf.len() > 1 << 16 {
                    other::write_file(&path, &buf, true)?;
                    buf.clear();
                }
            }
            other::write_file(&path, &buf, true)?;
            ret
        }
        "tee" => {
            arity(args, 1, name)?;
            let n = match args.pos.first() {
                Some(v) => count_arg(v, name)?,
                None => 2,
            };
            if n == 0 {
                return Err(ShoalError::arg_error(
                    ".tee() needs at least one branch (n > 0)",
                ));
            }
            if s.bounded {
                let items = collect_stream(host, s)?;
                Value::list(
                    (0..n)
                        .map(|_| {
                            make_stream(&s.label, true, Box::new(items.clone().into_iter().map(Ok)))
                        })
                        .collect(),
                )
            } else {
                live_tee(s, n)?
            }
        }
        "dedupe" | "distinct" | "buffer" | "enumerate" | "window" | "merge" | "zip"
        | "throttle" | "debounce" => {
            let (stages, _) = take_pending(s);
            if !stages.is_empty() {
                return Err(ShoalError::type_error(format!(
                    ".{name}() after a callback stage on an unbounded stream is not supported"
                ))
                .with_hint("bound the stream first with `.take(n)`"));
            }
            no_named(args, name)?;
            lazy_combinator(s, name, args)?
        }
        "stream" => {
            arity(args, 0, name)?;
            let src = take_source(s)?;
            lazy(s, s.bounded, src)
        }
        _ => {
            if !crate::names::COLL.contains(&name) {
                return Ok(None);
            }
            let items = collect_stream(host, s)?;
            return coll::call(host, &coll::Coll::List(Arc::new(items)), name, args);
        }
    };
    Ok(Some(v))
}

/// Per-fork queue capacity of a live `tee`.
const TEE_QUEUE: usize = 64;

struct TeeShared {
    src: Src,
    queues: Vec<std::collections::VecDeque<SResult<Value>>>,
    dropped: Vec<u64>,
    ended: bool,
}

/// Fork an unbounded stream into `n` live streams. Each fork has a 64-item
/// queue; items a slow fork misses are replaced by one `{dropped: n}` marker.
fn live_tee(s: &Arc<StreamVal>, n: usize) -> SResult<Value> {
    let (stages, _) = take_pending(s);
    if !stages.is_empty() {
        return Err(ShoalError::type_error(
            ".tee() after a callback stage on an unbounded stream is not supported",
        )
        .with_hint("bound the stream first with `.take(n)`"));
    }
    let src = take_source(s)?;
    let shared = Arc::new(Mutex::new(TeeShared {
        src,
        queues: (0..n).map(|_| Default::default()).collect(),
        dropped: vec![0; n],
        ended: false,
    }));
    let forks = (0..n)
        .map(|i| {
            let sh = shared.clone();
            let it = std::iter::from_fn(move || {
                let mut g = sh.lock().ok()?;
                if let Some(v) = g.queues[i].pop_front() {
                    return Some(v);
                }
                if g.dropped[i] > 0 {
                    let mut r = crate::Record::new();
                    r.insert("dropped".into(), Value::Int(g.dropped[i] as i64));
                    g.dropped[i] = 0;
                    return Some(Ok(Value::record(r)));
                }
                if g.ended {
                    return None;
                }
                match g.src.next() {
                    None => {
                        g.ended = true;
                        None
                    }
                    Some(item) => {
                        for j in 0..g.queues.len() {
                            if j == i {
                                continue;
                            }
                            if g.queues[j].len() >= TEE_QUEUE {
                                g.dropped[j] += 1;
                            } else {
                                let copy = match &item {
                                    Ok(v) => Ok(v.clone()),
                                    Err(e) => Err(e.clone()),
                                };
                                g.queues[j].push_back(copy);
                            }
                        }
                        Some(item)
                    }
                }
            });
            make_stream(&s.label, false, Box::new(it))
        })
        .collect();
    Ok(Value::list(forks))
}

fn lazy_combinator(s: &Arc<StreamVal>, name: &str, args: &Args) -> SResult<Value> {
    let v = match name {
        "dedupe" => {
            arity(args, 0, name)?;
            let src = take_source(s)?;
            let mut last: Option<Value> = None;
            let it = src.filter(move |r| match r {
                Ok(v) => {
                    let keep = !last.as_ref().is_some_and(|l| ops::equals(l, v));
                    last = Some(v.clone());
                    keep
                }
                Err(_) => true,
            });
            lazy(s, s.bounded, Box::new(it))
        }
        "distinct" => {
            arity(args, 0, name)?;
            let src = take_source(s)?;
            let mut seen: Vec<Value> = Vec::new();
            let mut fast: HashSet<String> = HashSet::new();
            let it = src.filter(move |r| match r {
                Ok(v) => match v {
                    Value::Int(_) | Value::Str(_) | Value::Bool(_) | Value::Null => {
                        fast.insert(format!("{}:{}", v.type_name(), crate::render::inline(v)))
                    }
                    _ => {
                        if seen.iter().any(|x| ops::equals(x, v)) {
                            false
                        } else {
                            seen.push(v.clone());
                            true
                        }
                    }
                },
                Err(_) => true,
            });
            lazy(s, s.bounded, Box::new(it))
        }
        "buffer" => {
            arity(args, 1, name)?;
            if let Some(n) = args.pos.first() {
                count_arg(n, name)?;
            }
            let src = take_source(s)?;
            lazy(s, s.bounded, src)
        }
        "enumerate" => {
            arity(args, 0, name)?;
            let src = take_source(s)?;
            let it = src
                .enumerate()
                .map(|(i, r)| r.map(|v| Value::list(vec![Value::Int(i as i64), v])));
            lazy(s, s.bounded, Box::new(it))
        }
        "window" => {
            arity(args, 1, name)?;
            let a = req(args, 0, name, "a size or duration")?;
            let mut src = take_source(s)?;
            match a {
                Value::Duration(_) => {
                    let d = dur_arg(a, name)?;
                    let mut pending: Option<Value> = None;
                    let it = std::iter::from_fn(move || {
                        let start = Instant::now();
                        let mut group = Vec::new();
                        if let Some(p) = pending.take() {
                            group.push(p);
                        }
                        loop {
                            match src.next() {
                                None => {
                                    return if group.is_empty() {
                                        None
                                    } else {
                                        Some(Ok(Value::list(group)))
                                    }
                                }
                                Some(Err(e)) => return Some(Err(e)),
                                Some(Ok(v)) => {
                                    if start.elapsed() >= d && !group.is_empty() {
                                        pending = Some(v);
                                        return Some(Ok(Value::list(group)));
                                    }
                                    group.push(v);
                                }
                            }
                        }
                    });
                    lazy(s, s.bounded, Box::new(it))
                }
                other => {
                    let n = count_arg(other, name)?;
                    if n == 0 {
                        return Err(ShoalError::arg_error(".window() size must be positive"));
                    }
                    let mut win: std::collections::VecDeque<Value> = Default::default();
                    let it = std::iter::from_fn(move || loop {
                        match src.next()? {
                            Err(e) => return Some(Err(e)),
                            Ok(v) => {
                                win.push_back(v);
                                if win.len() > n {
                                    win.pop_front();
                                }
                                if win.len() == n {
                                    return Some(Ok(Value::list(win.iter().cloned().collect())));
                                }
                            }
                        }
                    });
                    lazy(s, s.bounded, Box::new(it))
                }
            }
        }
        "merge" | "zip" => {
            arity(args, 1, name)?;
            let o = match req(args, 0, name, "a stream")? {
                Value::Stream(o) => o.clone(),
                other => {
                    return Err(ShoalError::type_error(format!(
                        ".{name}() expects a stream, got {}",
                        other.type_name()
                    )))
                }
            };
            let a = take_source(s)?;
            let b = take_source(&o)?;
            if name == "merge" {
                // Alternate between the two sources until both end.
                let mut srcs = [Some(a), Some(b)];
                let mut turn = 0usize;
                let it = std::iter::from_fn(move || {
                    for _ in 0..2 {
                        let i = turn % 2;
                        turn += 1;
                        if let Some(src) = srcs[i].as_mut() {
                            match src.next() {
                                Some(x) => return Some(x),
                                None => srcs[i] = None,
                            }
                        }
                    }
                    None
                });
                lazy(s, s.bounded && o.bounded, Box::new(it))
            } else {
                let it = a.zip(b).map(|(x, y)| Ok(Value::list(vec![x?, y?])));
                lazy(s, s.bounded || o.bounded, Box::new(it))
            }
        }
        "throttle" => {
            arity(args, 1, name)?;
            let d = dur_arg(req(args, 0, name, "a duration")?, name)?;
            let src = take_source(s)?;
            let mut last: Option<Instant> = None;
            let it = src.filter(move |r| {
                if r.is_err() {
                    return true;
                }
                let now = Instant::now();
                match last {
                    Some(t) if now.duration_since(t) < d => false,
                    _ => {
                        last = Some(now);
                        true
                    }
                }
            });
            lazy(s, s.bounded, Box::new(it))
        }
        _ => {
            // debounce
            arity(args, 1, name)?;
            let d = dur_arg(req(args, 0, name, "a duration")?, name)?;
            let mut src = take_source(s)?;
            let mut pending: Option<(Value, Instant)> = None;
            let mut ended = false;
            let it = std::iter::from_fn(move || loop {
                if ended {
                    return pending.take().map(|(v, _)| Ok(v));
                }
                match src.next() {
                    None => {
                        ended = true;
                    }
                    Some(Err(e)) => return Some(Err(e)),
                    Some(Ok(v)) => {
                        let now = Instant::now();
                        if let Some((p, t)) = pending.take() {
                            pending = Some((v, now));
                            if now.duration_since(t) >= d {
                                return Some(Ok(p));
                            }
                        } else {
                            pending = Some((v, now));
                        }
                    }
                }
            });
            lazy(s, s.bounded, Box::new(it))
        }
    };
    Ok(v)
}

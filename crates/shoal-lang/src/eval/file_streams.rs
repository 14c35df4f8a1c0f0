//! The timer and file streams: `every(d)`, `tail(path)`, `watch(path|glob)`.
//! Each waits for its next item on an event (its deadline, the interrupt's
//! hook, a file's change), not by waking periodically.

use std::collections::VecDeque;
use std::io::{BufRead, Seek};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::changes::Changes;
use super::task::{now_dt, stream};
use crate::eval::{EResult, Interp};
use crate::shell::builtins::io_msg;
use shoal_value::{ErrorCode, Record, ShoalError, Value};

/// Where inotify cannot follow a file, how often `tail` and `watch` look.
const TAIL_PERIOD: Duration = Duration::from_millis(50);
const WATCH_PERIOD: Duration = Duration::from_millis(100);

impl Interp {
    /// `every(d)`: an unbounded stream of datetimes, one per period.
    pub(crate) fn every_stream(&mut self, pos: Vec<Value>) -> EResult<Value> {
        let d = match pos.as_slice() {
            [Value::Duration(d)] if *d > 0 => Duration::from_nanos(*d as u64),
            [Value::Duration(_)] => {
                return Err(ShoalError::arg_error("every expects a positive duration").into())
            }
            [other] => {
                return Err(ShoalError::type_error(format!(
                    "every expects a duration, found {}",
                    other.type_name()
                ))
                .into())
            }
            _ => return Err(ShoalError::arg_error("every expects one duration").into()),
        };
        let intr = self.interrupter.clone();
        let mut next = Instant::now() + d;
        let iter = std::iter::from_fn(move || {
            if intr.sleep_until(next) {
                return Some(Err(Interp::cancelled()));
            }
            let now = Instant::now();
            next += d;
            if next < now {
                next = now + d;
            }
            Some(Ok(now_dt()))
        });
        Ok(stream("datetime", false, iter))
    }

    /// `tail(path, from_start: false)`: an unbounded stream of lines.
    pub(crate) fn tail_stream(
        &mut self,
        pos: Vec<Value>,
        named: Vec<(String, Value)>,
    ) -> EResult<Value> {
        let p = match pos.as_slice() {
            [Value::Str(s)] => PathBuf::from(s.as_ref()),
            [Value::Path(p)] => p.as_ref().clone(),
            _ => return Err(ShoalError::arg_error("tail expects one path").into()),
        };
        let mut from_start = false;
        for (k, v) in &named {
            match (k.as_str(), v) {
                ("from_start", Value::Bool(b)) => from_start = *b,
                _ => {
                    return Err(
                        ShoalError::arg_error(format!("tail: unknown argument `{k}`")).into(),
                    )
                }
            }
        }
        let abs = self.cwd.join(&p);
        shoal_policy::run_gate::fs(shoal_policy::run_gate::Access::Read, &self.cwd, &p)?;
        let mut f = std::fs::File::open(&abs)
            .map_err(|e| ShoalError::not_found(format!("tail: {}: {}", p.display(), io_msg(&e))))?;
        if !from_start {
            let _ = f.seek(std::io::SeekFrom::End(0));
        }
        // Followed before the first read: a write after it wakes the wait.
        let mut changes = Changes::new(&abs, TAIL_PERIOD);
        changes.follow_file(&abs);
        let mut reader = std::io::BufReader::new(f);
        let intr = self.interrupter.clone();
        let mut partial = String::new();
        let iter = std::iter::from_fn(move || loop {
            if intr.is_interrupted() {
                return Some(Err(Interp::cancelled()));
            }
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) => {
                    changes.wait(&intr);
                }
                Ok(_) => {
                    partial.push_str(&line);
                    if partial.ends_with('\n') {
                        let l = std::mem::take(&mut partial);
                        let l = l.trim_end_matches('\n').trim_end_matches('\r').to_string();
                        return Some(Ok(Value::str(l)));
                    }
                }
                Err(e) => {
                    return Some(Err(ShoalError::new(
                        ErrorCode::IoError,
                        format!("tail: {e}"),
                    )))
                }
            }
        });
        Ok(stream("value", false, iter))
    }

    /// `watch(path|glob, recursive: true)`: an unbounded stream of
    /// `{path, kind, ts}` change events: each change the directories under
    /// it report wakes a look at the files, which is compared with the last.
    pub(crate) fn watch_stream(
        &mut self,
        pos: Vec<Value>,
        named: Vec<(String, Value)>,
    ) -> EResult<Value> {
        let (root, pattern) = match pos.as_slice() {
            [Value::Str(s)] => (self.cwd.join(s.as_ref()), None),
            [Value::Path(p)] => (self.cwd.join(p.as_ref()), None),
            [Value::Glob(g)] => (g.cwd.clone(), Some((g.pattern.clone(), g.hidden))),
            _ => return Err(ShoalError::arg_error("watch expects a path or a glob").into()),
        };
        shoal_policy::run_gate::fs(shoal_policy::run_gate::Access::Read, &self.cwd, &root)?;
        let mut recursive = true;
        for (k, v) in &named {
            match (k.as_str(), v) {
                ("recursive", Value::Bool(b)) => recursive = *b,
                _ => {
                    return Err(
                        ShoalError::arg_error(format!("watch: unknown argument `{k}`")).into(),
                    )
                }
            }
        }
        // The directories to follow: the one holding a file (only it), the
        // root's tree for a glob that spans directories.
        let is_file = root.is_file();
        let tree = match &pattern {
            Some((pat, _)) => pat.contains('/') || pat.contains("**"),
            None => recursive && !is_file,
        };
        let base = if is_file {
            root.parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| root.clone())
        } else {
            root.clone()
        };
        let mut changes = Changes::new(&base, WATCH_PERIOD);
        let follow = move |changes: &mut Changes| {
            let mut v = vec![base.clone()];
            if tree {
                dirs(&base, &mut v);
            }
            for d in &v {
                changes.follow_dir(d);
            }
        };
        // Followed before the first look: a change after it wakes the wait.
        follow(&mut changes);
        let snapshot = move || -> std::collections::BTreeMap<PathBuf, SystemTime> {
            let mut out = std::collections::BTreeMap::new();
            let files: Vec<PathBuf> = match &pattern {
                Some((pat, hidden)) => crate::shell::glob::expand(pat, &root, *hidden)
                    .into_iter()
                    .map(|p| root.join(p))
                    .collect(),
                None => {
                    let mut v = Vec::new();
                    walk(&root, recursive, &mut v);
                    v
                }
            };
            for f in files {
                if let Ok(m) = std::fs::metadata(&f) {
                    out.insert(f, m.modified().unwrap_or(SystemTime::UNIX_EPOCH));
                }
            }
            out
        };
        let mut prev = snapshot();
        let mut pending: VecDeque<Value> = VecDeque::new();
        let intr = self.interrupter.clone();
        let iter = std::iter::from_fn(move || loop {
            if let Some(v) = pending.pop_front() {
                return Some(Ok(v));
            }
            if intr.is_interrupted() {
                return Some(Err(Interp::cancelled()));
            }
            changes.wait(&intr);
            if intr.is_interrupted() {
                return Some(Err(Interp::cancelled()));
            }
            // Directories made since the last look are followed before it.
            if changes.event_driven() {
                follow(&mut changes);
            }
            let cur = snapshot();
            let ev = |p: &PathBuf, kind: &str| {
                let mut r = Record::new();
                r.insert("path".into(), Value::path(p.clone()));
                r.insert("kind".into(), Value::str(kind));
                r.insert("ts".into(), now_dt());
                Value::record(r)
            };
            for (p, t) in &cur {
                match prev.get(p) {
                    None => pending.push_back(ev(p, "create")),
                    Some(old) if old != t => pending.push_back(ev(p, "modify")),
                    _ => {}
                }
            }
            for p in prev.keys() {
                if !cur.contains_key(p) {
                    pending.push_back(ev(p, "remove"));
                }
            }
            prev = cur;
        });
        Ok(stream("event", false, iter))
    }
}

fn walk(root: &std::path::Path, recursive: bool, out: &mut Vec<PathBuf>) {
    if root.is_file() {
        out.push(root.to_path_buf());
        return;
    }
    if let Ok(rd) = std::fs::read_dir(root) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                if recursive {
                    walk(&p, recursive, out);
                }
            } else {
                out.push(p);
            }
        }
    }
}

/// The directories under `root`, recursively.
fn dirs(root: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(root) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let p = e.path();
                out.push(p.clone());
                dirs(&p, out);
            }
        }
    }
}

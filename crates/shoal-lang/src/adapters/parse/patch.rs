//! The `patch` parser: a unified diff (`git diff`, `git show`) → a table of
//! files with their hunks. Lines outside a file (the commit header of `git
//! show`) are skipped; the outcome still renders as the patch text itself.
//!
//! Columns: `path` (the new path; the old one for a deleted file),
//! `old_path` (path?: set when renamed or copied), `status` (modified,
//! added, deleted, renamed, copied), `binary`, `added`, `deleted` (line
//! counts) and `hunks`: records `{header, old_start, old_lines, new_start,
//! new_lines, lines}` whose `lines` keep their `+`/`-`/` ` prefix.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use super::git::unquote;
use super::{fail, lines, Failure};
use shoal_value::{Record, Value};

struct Hunk {
    header: String,
    old: (i64, i64),
    new: (i64, i64),
    lines: Vec<Value>,
}

#[derive(Default)]
struct File {
    path: Option<Vec<u8>>,
    old_path: Option<Vec<u8>>,
    /// Paths from `diff --git a/X b/Y`, used when no `---`/`+++` follow.
    git_paths: Option<(Vec<u8>, Vec<u8>)>,
    status: &'static str,
    binary: bool,
    added: i64,
    deleted: i64,
    hunks: Vec<Hunk>,
}

impl File {
    fn into_row(self) -> Record {
        let (ga, gb) = self.git_paths.unwrap_or_default();
        let path = self
            .path
            .or_else(|| (!gb.is_empty()).then_some(gb))
            .or_else(|| self.old_path.clone())
            .unwrap_or(ga);
        let renamed = matches!(self.status, "renamed" | "copied");
        let old = self.old_path.filter(|_| renamed);
        let hunks: Vec<Value> = self
            .hunks
            .into_iter()
            .map(|h| {
                let r: Record = [
                    ("header", Value::str(h.header)),
                    ("old_start", Value::Int(h.old.0)),
                    ("old_lines", Value::Int(h.old.1)),
                    ("new_start", Value::Int(h.new.0)),
                    ("new_lines", Value::Int(h.new.1)),
                    ("lines", Value::list(h.lines)),
                ]
                .into_iter()
                .map(|(k, v)| (k.into(), v))
                .collect();
                Value::record(r)
            })
            .collect();
        [
            ("path", os_path(&path)),
            ("old_path", old.map_or(Value::Null, |o| os_path(&o))),
            ("status", Value::str(self.status)),
            ("binary", Value::Bool(self.binary)),
            ("added", Value::Int(self.added)),
            ("deleted", Value::Int(self.deleted)),
            ("hunks", Value::list(hunks)),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v))
        .collect()
    }
}

fn os_path(p: &[u8]) -> Value {
    Value::os_path(OsStr::from_bytes(p).to_os_string())
}

/// A path of a `---`/`+++`/`rename from` line: unquoted, its `a/` or `b/`
/// prefix and a trailing tab dropped; `None` for `/dev/null`.
fn header_path(raw: &[u8], prefix: Option<&[u8]>) -> Result<Option<Vec<u8>>, String> {
    let raw = raw.strip_suffix(b"\t").unwrap_or(raw);
    if raw == b"/dev/null" {
        return Ok(None);
    }
    let p = unquote(raw)?.into_owned();
    Ok(Some(match prefix {
        Some(x) => p.strip_prefix(x).map(<[u8]>::to_vec).unwrap_or(p),
        None => p,
    }))
}

/// `a/X b/Y` of a `diff --git` line (quoted or not; when both sides name
/// the same path with spaces, the halves are equal).
fn git_paths(rest: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    if rest.first() == Some(&b'"') {
        let end = rest[1..].iter().position(|c| *c == b'"')? + 2;
        let a = unquote(&rest[..end]).ok()?.into_owned();
        let b = rest.get(end + 1..)?;
        let b = unquote(b).ok()?.into_owned();
        return Some((strip(a, b"a/"), strip(b, b"b/")));
    }
    let n = rest.len();
    if n % 2 == 1 {
        let half = n / 2;
        let (a, b) = (&rest[..half], &rest[half + 1..]);
        if a.get(2..) == b.get(2..) && rest[half] == b' ' {
            return Some((strip(a.to_vec(), b"a/"), strip(b.to_vec(), b"b/")));
        }
    }
    let k = rest.windows(3).position(|w| w == b" b/")?;
    Some((
        strip(rest[..k].to_vec(), b"a/"),
        strip(rest[k + 1..].to_vec(), b"b/"),
    ))
}

fn strip(p: Vec<u8>, prefix: &[u8]) -> Vec<u8> {
    p.strip_prefix(prefix).map(<[u8]>::to_vec).unwrap_or(p)
}

/// A hunk's start line and line count.
type Range = (i64, i64);

/// `-a,b` / `+c` of a hunk header.
fn range(tok: &str) -> Option<Range> {
    let t = &tok[1..];
    match t.split_once(',') {
        Some((s, n)) => Some((s.parse().ok()?, n.parse().ok()?)),
        None => Some((t.parse().ok()?, 1)),
    }
}

/// `@@ -a,b +c,d @@ ctx` (or the `@@@` of a combined diff): old and new
/// ranges; `None` when malformed.
fn hunk_header(line: &str) -> Option<(Range, Range, bool)> {
    let marks = line.bytes().take_while(|c| *c == b'@').count();
    let combined = marks > 2;
    let body = &line[marks..];
    let close = body.find(&"@".repeat(marks))?;
    let toks: Vec<&str> = body[..close].split_whitespace().collect();
    let old = range(toks.iter().find(|t| t.starts_with('-'))?)?;
    let new = range(toks.iter().find(|t| t.starts_with('+'))?)?;
    Some((old, new, combined))
}

/// Parse a patch.
pub(super) fn patch(bytes: &[u8]) -> Result<Value, Failure> {
    let mut rows: Vec<Arc<Record>> = Vec::new();
    let mut file: Option<File> = None;
    // The open hunk: lines of old and new still to come (`None` for a
    // combined diff, which runs while lines carry a diff prefix).
    let mut open: Option<Option<(i64, i64)>> = None;
    let all: Vec<&[u8]> = lines(bytes).collect();
    for (i, raw) in all.iter().enumerate() {
        let n = i + 1;
        let line = String::from_utf8_lossy(raw);
        if let (Some(left), Some(f)) = (open, file.as_mut()) {
            let c = raw.first().copied();
            let in_hunk = match left {
                Some((o, w)) => o > 0 || w > 0 || c == Some(b'\\'),
                None => matches!(c, Some(b' ' | b'+' | b'-' | b'\\')),
            };
            if in_hunk {
                let h = f.hunks.last_mut().ok_or(Failure {
                    line: n,
                    msg: "hunk line without a hunk".into(),
                })?;
                let left = match (left, c) {
                    (_, Some(b'\\')) => left,
                    (Some((o, w)), Some(b' ')) => Some((o - 1, w - 1)),
                    (Some((o, w)), Some(b'-')) => Some((o - 1, w)),
                    (Some((o, w)), Some(b'+')) => Some((o, w - 1)),
                    // An empty context line some tools write without its space.
                    (Some((o, w)), None) => Some((o - 1, w - 1)),
                    (None, _) => None,
                    (Some(_), Some(_)) => {
                        return fail(n, "a hunk line must start with ` `, `+`, `-` or `\\`")
                    }
                };
                if left.is_some_and(|(o, w)| o < 0 || w < 0) {
                    return fail(n, "more lines than the hunk header counts");
                }
                match c {
                    Some(b'+') => f.added += 1,
                    Some(b'-') => f.deleted += 1,
                    // Combined: the parents' columns tell (`+ `, ` +`).
                    Some(b' ') if left.is_none() && raw[..2.min(raw.len())].contains(&b'+') => {
                        f.added += 1
                    }
                    _ => {}
                }
                h.lines.push(Value::str(line.as_ref()));
                open = Some(left);
                continue;
            }
            open = None;
        }
        if let Some(rest) = raw.strip_prefix(b"diff --git ") {
            if let Some(f) = file.take() {
                rows.push(Arc::new(f.into_row()));
            }
            file = Some(File {
                git_paths: git_paths(rest),
                status: "modified",
                ..File::default()
            });
            continue;
        }
        if let Some(rest) = raw
            .strip_prefix(b"diff --cc ")
            .or_else(|| raw.strip_prefix(b"diff --combined "))
        {
            if let Some(f) = file.take() {
                rows.push(Arc::new(f.into_row()));
            }
            let p = header_path(rest, None).or_else(|e| fail(n, e))?;
            file = Some(File {
                path: p,
                status: "modified",
                ..File::default()
            });
            continue;
        }
        let Some(f) = file.as_mut() else {
            continue; // a commit header (`git show`), a stat line, ...
        };
        if raw.starts_with(b"@@") {
            let Some((old, new, combined)) = hunk_header(&line) else {
                return fail(n, format!("malformed hunk header `{line}`"));
            };
            f.hunks.push(Hunk {
                header: line.into_owned(),
                old,
                new,
                lines: Vec::new(),
            });
            open = Some((!combined).then_some((old.1, new.1)));
            continue;
        }
        let path_of = |rest: &[u8], prefix: Option<&[u8]>| header_path(rest, prefix);
        if let Some(rest) = raw.strip_prefix(b"--- ") {
            let p = path_of(rest, Some(b"a/")).or_else(|e| fail(n, e))?;
            if p.is_none() {
                f.status = "added";
            } else if f.old_path.is_none() {
                f.old_path = p;
            }
        } else if let Some(rest) = raw.strip_prefix(b"+++ ") {
            match path_of(rest, Some(b"b/")).or_else(|e| fail(n, e))? {
                Some(p) => f.path = Some(p),
                None => f.status = "deleted",
            }
        } else if raw.starts_with(b"new file mode") {
            f.status = "added";
        } else if raw.starts_with(b"deleted file mode") {
            f.status = "deleted";
        } else if let Some(rest) = raw
            .strip_prefix(b"rename from ")
            .or_else(|| raw.strip_prefix(b"copy from "))
        {
            f.status = if raw.starts_with(b"copy") {
                "copied"
            } else {
                "renamed"
            };
            f.old_path = path_of(rest, None).or_else(|e| fail(n, e))?;
        } else if let Some(rest) = raw
            .strip_prefix(b"rename to ")
            .or_else(|| raw.strip_prefix(b"copy to "))
        {
            f.path = path_of(rest, None).or_else(|e| fail(n, e))?;
        } else if raw.starts_with(b"Binary files ") || raw.starts_with(b"GIT binary patch") {
            f.binary = true;
        }
        // index, mode, similarity lines and anything else: nothing to keep.
    }
    if let Some(Some((o, w))) = open {
        if o > 0 || w > 0 {
            return fail(all.len(), "the patch ends inside a hunk");
        }
    }
    if let Some(f) = file.take() {
        rows.push(Arc::new(f.into_row()));
    }
    Ok(Value::Table(Arc::new(rows)))
}

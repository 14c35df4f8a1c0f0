//! Structured builtins that need no evaluator state beyond cwd and
//! environment (docs/rules.md §9): `echo ls cat mkdir touch cp mv rm stat env
//! sleep head ln which`. Each returns the builtin's structured result (the
//! outcome's `.out`); the evaluator wraps it in an outcome. Filesystem
//! failures raise `custom`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use indexmap::IndexMap;

use crate::shell::words;
use shoal_base::lookup;
use shoal_value::{render, ErrorCode, Record, SResult, ShoalError, Value};

/// One evaluated builtin argument.
#[derive(Clone, Debug)]
pub enum BArg {
    Val(Value),
    /// `--name` / `--name=value` (name with `-` already turned into `_`).
    Long {
        name: String,
        value: Option<Value>,
    },
    /// `-abc` (without the dash).
    Short(String),
}

/// What builtins may see of the session.
pub struct Ctx<'a> {
    pub cwd: &'a Path,
    pub env: &'a IndexMap<String, String>,
    pub interrupter: &'a crate::interrupt::Interrupter,
}

/// Heads handled by [`run`].
pub const FS_BUILTINS: &[&str] = &[
    "echo", "ls", "cat", "mkdir", "touch", "cp", "mv", "rm", "stat", "env", "sleep", "head", "ln",
    "which",
];

pub fn is_fs_builtin(name: &str) -> bool {
    FS_BUILTINS.contains(&name)
}

/// The flags a builtin models; a flag outside them runs the program of the
/// same name as written (the agent's flags win: `touch -t`, `mkdir -m`,
/// `cp -p`, `mv -n`, `ln -sf`, `stat -c` do what they say, never a file
/// named after the flag's value). `None`: the builtin reads its flags itself
/// (`head`, `which`, `echo` drops them) or refuses the ones it does not take
/// (`rm`, which moves to the trash: [`RM_FLAGS`]).
pub fn modeled_flags(head: &str) -> Option<&'static [&'static str]> {
    match head {
        "ls" => Some(&["a", "A", "all", "almost_all", "l", "h", "1", "t", "S", "r"]),
        "cat" | "stat" | "touch" | "env" => Some(&[]),
        "mkdir" => Some(&["p", "parents"]),
        "cp" => Some(&["r", "R", "recursive"]),
        // The builtin overwrites without asking, as `-f` says.
        "mv" => Some(&["f", "force"]),
        "ln" => Some(&["s", "symbolic"]),
        _ => None,
    }
}

/// The flags `rm` takes: `-r`, `-f` (a missing path is no error), `-v`
/// (the result lists every path anyway), `-i`/`-I` (nothing is asked: the
/// trash keeps what goes) and `--permanent`. Any other is refused rather
/// than run by the system's `rm`, which deletes for good.
pub const RM_FLAGS: &[&str] = &[
    "r",
    "R",
    "recursive",
    "f",
    "force",
    "v",
    "verbose",
    "i",
    "I",
    "interactive",
    "permanent",
];

struct Parsed {
    vals: Vec<Value>,
    flags: HashSet<String>,
}

impl Parsed {
    fn has(&self, names: &[&str]) -> bool {
        names.iter().any(|n| self.flags.contains(*n))
    }
}

fn split(args: Vec<BArg>) -> Parsed {
    let mut vals = Vec::new();
    let mut flags = HashSet::new();
    for a in args {
        match a {
            BArg::Val(v) => vals.push(v),
            BArg::Long { name, value } => {
                flags.insert(name.clone());
                if let Some(v) = value {
                    // `--name=value` keeps its value positionally available
                    // only for flags that take one; none of ours do.
                    let _ = v;
                }
            }
            BArg::Short(s) => {
                for c in s.chars() {
                    flags.insert(c.to_string());
                }
            }
        }
    }
    Parsed { vals, flags }
}

fn custom(msg: impl Into<String>) -> ShoalError {
    ShoalError::new(ErrorCode::Custom, msg)
}

fn to_path(v: &Value, head: &str) -> SResult<PathBuf> {
    match v {
        Value::Str(s) => Ok(PathBuf::from(words::expand_tilde(s))),
        Value::Path(p) => Ok(p.as_ref().clone()),
        other => Err(ShoalError::type_error(format!(
            "{head}: expected a path, found {}",
            other.type_name()
        ))),
    }
}

fn paths(vals: &[Value], head: &str) -> SResult<Vec<PathBuf>> {
    vals.iter().map(|v| to_path(v, head)).collect()
}

/// An I/O error as a short lowercase phrase, without the OS error number.
pub fn io_msg(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::AlreadyExists => "already exists".to_string(),
        _ => {
            let s = e.to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_lowercase(),
                None => s,
            }
        }
    }
}

/// Leash at the site of the effect (docs/rules.md §21): `p` (relative to
/// the evaluator's current cwd) must be granted for `access` to a gated
/// principal; nothing is checked for the local uid.
fn gate(access: shoal_policy::run_gate::Access, ctx: &Ctx, p: &Path) -> SResult<()> {
    shoal_policy::run_gate::fs(access, ctx.cwd, p)
}

use shoal_policy::run_gate::Access;

fn fs_err(head: &str, p: &Path, e: &std::io::Error) -> ShoalError {
    custom(format!("{head}: {}: {}", p.display(), io_msg(e)))
}

fn datetime_of(t: SystemTime) -> Option<Value> {
    let ts = jiff::Timestamp::try_from(t).ok()?;
    Some(Value::DateTime(Arc::new(
        ts.to_zoned(jiff::tz::TimeZone::UTC),
    )))
}

/// The row shape shared by `ls` and `stat`.
pub fn file_row(abs: &Path) -> std::io::Result<Record> {
    let meta = std::fs::symlink_metadata(abs)?;
    let ft = meta.file_type();
    let ty = if ft.is_symlink() {
        "symlink"
    } else if ft.is_dir() {
        "dir"
    } else if ft.is_file() {
        "file"
    } else {
        "other"
    };
    let mut r = Record::new();
    r.insert("path".into(), Value::path(abs));
    let name = abs
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| abs.display().to_string());
    r.insert("name".into(), Value::str(name));
    r.insert("type".into(), Value::str(ty));
    r.insert("size".into(), Value::Size(meta.len()));
    r.insert(
        "modified".into(),
        meta.modified()
            .ok()
            .and_then(datetime_of)
            .unwrap_or(Value::Null),
    );
    Ok(r)
}

fn table(rows: Vec<Record>) -> Value {
    Value::Table(Arc::new(rows.into_iter().map(Arc::new).collect()))
}

pub use shoal_base::paths::normalize;

/// Run a structured builtin; returns its `.out` value.
pub fn run(head: &str, args: Vec<BArg>, ctx: &Ctx) -> SResult<Value> {
    match head {
        "echo" => Ok(echo(&args)),
        "ls" => ls(split(args), ctx),
        "cat" => cat(split(args), ctx),
        "mkdir" => mkdir(split(args), ctx),
        "touch" => touch(split(args), ctx),
        "cp" => cp(split(args), ctx),
        "mv" => mv(split(args), ctx),
        "rm" => rm(split(args), ctx),
        "stat" => stat(split(args), ctx),
        "env" => env(split(args), ctx),
        "sleep" => sleep(split(args), ctx),
        "head" => head_cmd(args, ctx),
        "ln" => ln(split(args), ctx),
        "which" => which(split(args), ctx),
        _ => Err(ShoalError::not_found(format!("unknown builtin `{head}`"))),
    }
}

/// `echo`: values joined by one space; str/path raw, null empty, others
/// display form. Flag tokens are dropped.
pub fn echo(args: &[BArg]) -> Value {
    let mut parts = Vec::new();
    for a in args {
        if let BArg::Val(v) = a {
            parts.push(echo_piece(v));
        }
    }
    Value::str(parts.join(" "))
}

fn echo_piece(v: &Value) -> String {
    render::echo_display(v)
}

fn ls(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    let all = a.has(&["a", "A", "all", "almost_all"]);
    let targets = if a.vals.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        paths(&a.vals, "ls")?
    };
    let mut rows = Vec::new();
    for t in &targets {
        gate(Access::Read, ctx, t)?;
    }
    for t in targets {
        let abs = normalize(&ctx.cwd.join(&t));
        let meta = std::fs::metadata(&abs)
            .or_else(|_| std::fs::symlink_metadata(&abs))
            .map_err(|e| fs_err("ls", &t, &e))?;
        if meta.is_dir() {
            let rd = std::fs::read_dir(&abs).map_err(|e| fs_err("ls", &t, &e))?;
            for e in rd.flatten() {
                let name = e.file_name();
                if !all && name.to_string_lossy().starts_with('.') {
                    continue;
                }
                if let Ok(r) = file_row(&abs.join(&name)) {
                    rows.push(r);
                }
            }
        } else {
            rows.push(file_row(&abs).map_err(|e| fs_err("ls", &t, &e))?);
        }
    }
    rows.sort_by_key(path_key);
    // `-t` newest first, `-S` largest first (stable: ties keep path order),
    // `-r` the other way round.
    let newer = |k: &str, x: &Record, y: &Record| match (x.get(k), y.get(k)) {
        (Some(x), Some(y)) => shoal_value::ops::compare(y, x).unwrap_or(std::cmp::Ordering::Equal),
        _ => std::cmp::Ordering::Equal,
    };
    if a.has(&["t"]) {
        rows.sort_by(|x, y| newer("modified", x, y));
    } else if a.has(&["S"]) {
        rows.sort_by(|x, y| newer("size", x, y));
    }
    if a.has(&["r"]) {
        rows.reverse();
    }
    Ok(table(rows))
}

fn path_key(r: &Record) -> String {
    match r.get("path") {
        Some(Value::Path(p)) => p.to_string_lossy().into_owned(),
        _ => String::new(),
    }
}

fn stat(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    if a.vals.is_empty() {
        return Err(ShoalError::arg_error("stat: expected at least one path"));
    }
    let ps = paths(&a.vals, "stat")?;
    for p in &ps {
        gate(Access::Read, ctx, p)?;
    }
    let mut rows = Vec::new();
    for p in &ps {
        let abs = normalize(&ctx.cwd.join(p));
        rows.push(file_row(&abs).map_err(|e| fs_err("stat", p, &e))?);
    }
    if rows.len() == 1 {
        Ok(Value::record(rows.remove(0)))
    } else {
        Ok(table(rows))
    }
}

fn cat(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    if a.vals.is_empty() {
        return Err(ShoalError::arg_error("cat: expected at least one path"));
    }
    let ps = paths(&a.vals, "cat")?;
    for p in &ps {
        gate(Access::Read, ctx, p)?;
    }
    let mut out = Vec::new();
    for p in ps {
        let abs = ctx.cwd.join(&p);
        if abs.is_dir() {
            return Err(custom(format!("cat: {}: is a directory", p.display())));
        }
        let bytes = std::fs::read(&abs).map_err(|e| fs_err("cat", &p, &e))?;
        out.extend_from_slice(&bytes);
    }
    Ok(Value::bytes(out))
}

fn mkdir(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    if a.vals.is_empty() {
        return Err(ShoalError::arg_error("mkdir: expected at least one path"));
    }
    let parents = a.has(&["p", "parents"]);
    let ps = paths(&a.vals, "mkdir")?;
    for p in &ps {
        gate(Access::Write, ctx, p)?;
    }
    let mut out = Vec::new();
    for p in ps {
        let abs = ctx.cwd.join(&p);
        let r = if parents {
            std::fs::create_dir_all(&abs)
        } else {
            std::fs::create_dir(&abs)
        };
        r.map_err(|e| fs_err("mkdir", &p, &e))?;
        out.push(Value::path(p));
    }
    Ok(Value::list(out))
}

fn touch(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    if a.vals.is_empty() {
        return Err(ShoalError::arg_error("touch: expected at least one path"));
    }
    let ps = paths(&a.vals, "touch")?;
    for p in &ps {
        gate(Access::Write, ctx, p)?;
    }
    let mut out = Vec::new();
    for p in ps {
        let abs = ctx.cwd.join(&p);
        let f = if abs.is_dir() {
            std::fs::File::open(&abs)
        } else {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&abs)
        }
        .map_err(|e| fs_err("touch", &p, &e))?;
        let _ = f.set_modified(SystemTime::now());
        out.push(Value::path(p));
    }
    Ok(Value::list(out))
}

fn copy_recursive(src: &Path, dst: &Path) -> std::io::Result<()> {
    // Each file of a tree is its own read and write (a tree may hold links).
    let root = Path::new("/");
    for (access, p) in [(Access::Read, src), (Access::Write, dst)] {
        shoal_policy::run_gate::fs(access, root, p)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.msg))?;
    }
    let meta = std::fs::symlink_metadata(src)?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(src)?;
        std::os::unix::fs::symlink(target, dst)
    } else if meta.is_dir() {
        std::fs::create_dir_all(dst)?;
        for e in std::fs::read_dir(src)? {
            let e = e?;
            copy_recursive(&e.path(), &dst.join(e.file_name()))?;
        }
        Ok(())
    } else {
        std::fs::copy(src, dst).map(|_| ())
    }
}

fn cp(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    if a.vals.len() < 2 {
        return Err(ShoalError::arg_error(
            "cp: expected a source and a destination",
        ));
    }
    let recursive = a.has(&["r", "R", "recursive"]);
    let mut ps = paths(&a.vals, "cp")?;
    let dest = ps.pop().unwrap_or_default();
    let dest_abs = ctx.cwd.join(&dest);
    let dest_is_dir = dest_abs.is_dir();
    if ps.len() > 1 && !dest_is_dir {
        return Err(ShoalError::arg_error(format!(
            "cp: target {} is not a directory",
            dest.display()
        )));
    }
    for src in &ps {
        gate(Access::Read, ctx, src)?;
        let target = if dest_is_dir {
            dest.join(src.file_name().unwrap_or(src.as_os_str()))
        } else {
            dest.clone()
        };
        gate(Access::Write, ctx, &target)?;
    }
    let mut out = Vec::new();
    for src in ps {
        let src_abs = ctx.cwd.join(&src);
        let meta = std::fs::metadata(&src_abs).map_err(|e| fs_err("cp", &src, &e))?;
        if meta.is_dir() && !recursive {
            return Err(ShoalError::arg_error(format!(
                "cp: {} is a directory (use -r)",
                src.display()
            )));
        }
        let target = if dest_is_dir {
            dest.join(src.file_name().unwrap_or(src.as_os_str()))
        } else {
            dest.clone()
        };
        let target_abs = ctx.cwd.join(&target);
        let r = if meta.is_dir() {
            copy_recursive(&src_abs, &target_abs)
        } else {
            std::fs::copy(&src_abs, &target_abs).map(|_| ())
        };
        r.map_err(|e| fs_err("cp", &src, &e))?;
        out.push(Value::path(target));
    }
    Ok(Value::list(out))
}

/// Rename, falling back to copy + delete across filesystems.
fn move_path(src: &Path, dst: &Path) -> std::io::Result<()> {
    match std::fs::rename(src, dst) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            copy_recursive(src, dst)?;
            let meta = std::fs::symlink_metadata(src)?;
            if meta.is_dir() {
                std::fs::remove_dir_all(src)
            } else {
                std::fs::remove_file(src)
            }
        }
        Err(e) => Err(e),
    }
}

fn mv(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    if a.vals.len() < 2 {
        return Err(ShoalError::arg_error(
            "mv: expected a source and a destination",
        ));
    }
    let mut ps = paths(&a.vals, "mv")?;
    let dest = ps.pop().unwrap_or_default();
    let dest_abs = ctx.cwd.join(&dest);
    let dest_is_dir = dest_abs.is_dir();
    if ps.len() > 1 && !dest_is_dir {
        return Err(ShoalError::arg_error(format!(
            "mv: target {} is not a directory",
            dest.display()
        )));
    }
    for src in &ps {
        gate(Access::Delete, ctx, src)?;
        gate(Access::Read, ctx, src)?;
        let target = if dest_is_dir {
            dest.join(src.file_name().unwrap_or(src.as_os_str()))
        } else {
            dest.clone()
        };
        gate(Access::Write, ctx, &target)?;
    }
    let mut out = Vec::new();
    for src in ps {
        let src_abs = ctx.cwd.join(&src);
        std::fs::symlink_metadata(&src_abs).map_err(|e| fs_err("mv", &src, &e))?;
        let target = if dest_is_dir && normalize(&src_abs) != normalize(&dest_abs) {
            dest.join(src.file_name().unwrap_or(src.as_os_str()))
        } else {
            dest.clone()
        };
        let target_abs = ctx.cwd.join(&target);
        if normalize(&src_abs) != normalize(&target_abs) {
            move_path(&src_abs, &target_abs).map_err(|e| fs_err("mv", &src, &e))?;
        }
        out.push(Value::path(target));
    }
    Ok(Value::list(out))
}

pub use super::trash::{trash_dir, trash_dir_path};

fn rm(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    if a.vals.is_empty() {
        return Err(ShoalError::new(
            ErrorCode::NoMatches,
            "rm: no paths to remove",
        ));
    }
    if let Some(f) = a.flags.iter().find(|f| !RM_FLAGS.contains(&f.as_str())) {
        // As written: long flags are read with `_` for `-` (`--one-file-system`).
        let f = f.replace('_', "-");
        let dash = if f.chars().count() == 1 { "-" } else { "--" };
        let system = shoal_base::lookup::find_program(
            "rm",
            ctx.env.get("PATH").map(String::as_str),
            ctx.cwd,
        )
        .map_or_else(
            || "the system's rm by its path".to_string(),
            |p| format!("`{}`", p.display()),
        );
        return Err(ShoalError::arg_error(format!(
            "rm: {dash}{f} is not a flag shoal's rm takes (it takes -r, -f, -v, -i and --permanent; without --permanent it moves paths to the trash)"
        ))
        .with_hint(format!("to run the system's rm, which deletes for good, call {system}")));
    }
    let permanent = a.has(&["permanent"]);
    let recursive = a.has(&["r", "R", "recursive"]);
    let force = a.has(&["f", "force"]);
    let mut ps = paths(&a.vals, "rm")?;
    if force {
        // `-f`: a path that is not there is nothing to remove, not an error.
        ps.retain(|p| std::fs::symlink_metadata(ctx.cwd.join(p)).is_ok());
    }
    // Validate everything first so a bad argument removes nothing.
    for p in &ps {
        gate(Access::Delete, ctx, p)?;
    }
    for p in &ps {
        let meta = std::fs::symlink_metadata(ctx.cwd.join(p)).map_err(|e| fs_err("rm", p, &e))?;
        if permanent && meta.is_dir() && !recursive {
            return Err(ShoalError::arg_error(format!(
                "rm: {} is a directory (use -r)",
                p.display()
            )));
        }
    }
    let mut out = Vec::new();
    for p in ps {
        let abs = ctx.cwd.join(&p);
        if permanent {
            let meta = std::fs::symlink_metadata(&abs).map_err(|e| fs_err("rm", &p, &e))?;
            let r = if meta.is_dir() {
                std::fs::remove_dir_all(&abs)
            } else {
                std::fs::remove_file(&abs)
            };
            r.map_err(|e| fs_err("rm", &p, &e))?;
            out.push(Value::path(p));
        } else {
            let dir = trash_dir()
                .map_err(|e| ShoalError::custom(format!("rm: no private trash directory: {e}")))?;
            let put = super::trash::put(&abs, &dir, move_path).map_err(|e| fs_err("rm", &p, &e))?;
            let mut r = Record::new();
            r.insert("path".into(), Value::path(normalize(&abs)));
            match put {
                super::trash::Put::Trashed(trash) => {
                    r.insert("trash".into(), Value::path(trash));
                }
                super::trash::Put::Deleted { cap } => {
                    r.insert("trash".into(), Value::Null);
                    r.insert("permanent".into(), Value::Bool(true));
                    r.insert(
                        "why".into(),
                        Value::str(format!(
                            "larger than this principal's trash may hold ([limits] token_trash, {cap} bytes): deleted for good"
                        )),
                    );
                }
            }
            out.push(Value::record(r));
        }
    }
    Ok(Value::list(out))
}

fn ln(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    if a.vals.len() != 2 {
        return Err(ShoalError::arg_error(
            "ln: expected exactly a target and a link name",
        ));
    }
    let symbolic = a.has(&["s", "symbolic"]);
    let target = to_path(&a.vals[0], "ln")?;
    let link = to_path(&a.vals[1], "ln")?;
    let link_abs = ctx.cwd.join(&link);
    gate(Access::Write, ctx, &link)?;
    if !symbolic {
        // Another name for a file is a way to write it later.
        gate(Access::Read, ctx, &target)?;
        gate(Access::Write, ctx, &target)?;
    }
    let r = if symbolic {
        std::os::unix::fs::symlink(&target, &link_abs)
    } else {
        std::fs::hard_link(ctx.cwd.join(&target), &link_abs)
    };
    r.map_err(|e| fs_err("ln", &link, &e))?;
    let mut rec = Record::new();
    rec.insert("target".into(), Value::path(target));
    rec.insert("link".into(), Value::path(link));
    rec.insert("symbolic".into(), Value::Bool(symbolic));
    Ok(Value::record(rec))
}

fn env(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    match a.vals.len() {
        0 => {
            let mut r = Record::new();
            for (k, v) in ctx.env {
                r.insert(k.as_str().into(), Value::str(v));
            }
            Ok(Value::record(r))
        }
        1 => {
            let name = match &a.vals[0] {
                Value::Str(s) => s.to_string(),
                other => render::display(other),
            };
            Ok(ctx.env.get(&name).map(Value::str).unwrap_or(Value::Null))
        }
        _ => Err(ShoalError::arg_error("env: expected at most one name")),
    }
}

fn sleep(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    if a.vals.len() != 1 {
        return Err(ShoalError::arg_error("sleep: expected one duration"));
    }
    let ns = match &a.vals[0] {
        Value::Duration(d) => *d,
        Value::Int(n) => n.saturating_mul(1_000_000_000),
        Value::Float(f) => (f * 1e9) as i64,
        Value::Str(s) => words::parse_duration_word(s).ok_or_else(|| {
            ShoalError::type_error(format!("sleep: expected a duration, found \"{s}\""))
        })?,
        other => {
            return Err(ShoalError::type_error(format!(
                "sleep: expected a duration, found {}",
                other.type_name()
            )))
        }
    };
    if ns < 0 {
        return Err(ShoalError::type_error(
            "sleep: duration must not be negative",
        ));
    }
    let deadline = Instant::now() + Duration::from_nanos(ns as u64);
    if ctx.interrupter.sleep_until(deadline) {
        return Err(ShoalError::new(ErrorCode::Cancelled, "interrupted"));
    }
    Ok(Value::Null)
}

/// The resolution record of `which` for an ambient program.
pub fn which_record(name: &str, path: Option<&Path>, scope: &str) -> Value {
    let mut r = Record::new();
    r.insert("name".into(), Value::str(name));
    r.insert("scope".into(), Value::str(scope));
    r.insert("constraint".into(), Value::Null);
    r.insert("version".into(), Value::Null);
    r.insert("path".into(), path.map(Value::path).unwrap_or(Value::Null));
    r.insert("hash8".into(), Value::Null);
    r.insert("provider".into(), Value::Null);
    r.insert("chain".into(), Value::list(vec![]));
    Value::record(r)
}

fn which(a: Parsed, ctx: &Ctx) -> SResult<Value> {
    if a.vals.len() != 1 {
        return Err(ShoalError::arg_error("which: expected exactly one name"));
    }
    let name = match &a.vals[0] {
        Value::Str(s) => s.to_string(),
        Value::Path(p) => p.to_string_lossy().into_owned(),
        other => {
            return Err(ShoalError::type_error(format!(
                "which: expected a name, found {}",
                other.type_name()
            )))
        }
    };
    let path_var = ctx.env.get("PATH").map(|s| s.as_str());
    if a.has(&["a", "all"]) {
        let mut rows = Vec::new();
        for dir in path_var.unwrap_or("").split(':') {
            if let Some(p) = lookup::find_program(&name, Some(dir), ctx.cwd) {
                if let Value::Record(r) = &which_record(&name, Some(&p), "ambient") {
                    rows.push(r.as_ref().clone());
                }
            }
        }
        return Ok(table(rows));
    }
    Ok(match lookup::find_program(&name, path_var, ctx.cwd) {
        Some(p) => which_record(&name, Some(&p), "ambient"),
        None => Value::Null,
    })
}

mod head;
use head::head_cmd;

#[cfg(test)]
mod tests;

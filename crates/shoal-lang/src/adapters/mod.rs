//! Adapters: declarative typed outputs and concrete effects for everyday
//! command-line tools (docs/protocol.md §11).
//!
//! An adapter is a TOML file ([`format`]); the built-in ones are embedded
//! from `config/adapters/` ([`builtin`]), user files in
//! `$XDG_CONFIG_HOME/shoal/adapters/*.toml` add to or override them. A
//! [`Catalog`] resolves a command head and its words to a [`Form`], builds
//! the argv (pinned `invoke`, `consumed` flags dropped, typed `params`), and
//! parses stdout with the form's parser into its declared type ([`parse`],
//! [`types`]). The agent's flags win: a flag the form does not model runs
//! the tool as written, untyped. A typed outcome carries [`Typed`], whose
//! render line names the raw form (`^git log -5`). [`effects_of`] is what the planner calls: the concrete effects
//! of an adapted command, never `opaque`.
//!
//! Nothing here spawns: the evaluator hands [`run_adapted`] a closure that
//! runs the program.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod builtin;
pub mod effects;
mod fastjson;
pub mod format;
pub mod parse;
pub mod types;

#[cfg(test)]
mod tests;

pub use effects::Effect;
pub use format::{Adapter, FileError, Form, Source};

use shoal_value::{methods, ErrorCode, Outcome, ShoalError, Typed, Value};

/// Every adapter of a session: built-ins plus user files.
#[derive(Debug, Default)]
pub struct Catalog {
    adapters: Vec<Adapter>,
    by_name: HashMap<String, usize>,
    /// Problems with user files (`file:line:column: message`).
    pub warnings: Vec<String>,
}

impl Catalog {
    /// The built-in adapters only.
    pub fn builtin() -> Catalog {
        let mut c = Catalog::default();
        for (name, text) in builtin::FILES {
            let file = format!("config/adapters/{name}.toml");
            match format::load(&file, name, text, Source::Builtin) {
                Ok(a) => c.insert(a),
                // A test validates every built-in file; never stop on one.
                Err(e) => c.warnings.push(e.to_string()),
            }
        }
        c
    }

    /// Built-ins plus the `*.toml` files of `dir` (which may be missing).
    /// A bad user file is a warning and leaves the built-in in place.
    pub fn load(dir: Option<&Path>) -> Catalog {
        let mut c = Catalog::builtin();
        if let Some(dir) = dir {
            for (path, r) in read_user_dir(dir) {
                match r {
                    Ok(a) => c.insert(a),
                    Err(msg) => {
                        tracing::warn!("adapter file ignored: {msg}");
                        c.warnings.push(msg);
                        let _ = path;
                    }
                }
            }
        }
        c
    }

    fn insert(&mut self, a: Adapter) {
        match self.by_name.get(&a.name) {
            Some(&i) => self.adapters[i] = a,
            None => {
                self.by_name.insert(a.name.clone(), self.adapters.len());
                self.adapters.push(a);
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&Adapter> {
        self.by_name.get(name).map(|&i| &self.adapters[i])
    }

    /// Adapters in name order.
    pub fn list(&self) -> Vec<&Adapter> {
        let mut v: Vec<&Adapter> = self.adapters.iter().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    pub fn len(&self) -> usize {
        self.adapters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.adapters.is_empty()
    }

    /// The form `head args...` invokes, and how many words name its
    /// sub-command.
    pub fn resolve<'a, S: AsRef<OsStr>>(
        &'a self,
        head: &str,
        args: &[S],
    ) -> Option<(&'a Adapter, &'a Form)> {
        let a = self.get(head)?;
        for f in &a.subs {
            if f.words.len() <= args.len()
                && f.words
                    .iter()
                    .zip(args)
                    .all(|(w, x)| x.as_ref().as_bytes() == w.as_bytes())
            {
                return Some((a, f));
            }
        }
        let root = a.root.as_ref()?;
        if root.bare
            && args
                .iter()
                .any(|x| !x.as_ref().as_bytes().starts_with(b"-"))
        {
            return None;
        }
        Some((a, root))
    }
}

/// The user adapter directory: `$XDG_CONFIG_HOME/shoal/adapters`.
pub fn user_dir() -> Option<PathBuf> {
    let (file, _) = shoal_base::paths::config_file(None);
    file.parent().map(|p| p.join("adapters"))
}

/// Each `*.toml` of `dir` loaded (sorted by name). Symlinks are not
/// followed and files over 256 KiB are refused.
fn read_user_dir(dir: &Path) -> Vec<(PathBuf, Result<Adapter, String>)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let r = load_user_file(&p);
            (p, r)
        })
        .collect()
}

/// Load one user adapter file (`shoal adapter check` uses this too).
pub fn load_user_file(p: &Path) -> Result<Adapter, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let shown = p.display().to_string();
    let name = format::name_of(p).ok_or_else(|| format!("{shown}:1:1: not a .toml file"))?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(p)
        .map_err(|e| format!("{shown}:1:1: cannot open: {e}"))?;
    let meta = f
        .metadata()
        .map_err(|e| format!("{shown}:1:1: cannot stat: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}:1:1: not a regular file"));
    }
    const MAX: u64 = 256 << 10;
    if meta.len() > MAX {
        return Err(format!("{shown}:1:1: larger than 256 KiB"));
    }
    let mut text = String::new();
    f.take(MAX)
        .read_to_string(&mut text)
        .map_err(|e| format!("{shown}:1:1: cannot read: {e}"))?;
    format::load(&shown, &name, &text, Source::User(p.to_path_buf())).map_err(|e| e.to_string())
}

/// The arguments of one invocation, bound to the form's names.
#[derive(Debug, Default)]
pub struct Bound {
    /// name → values (positional names, flag names, parameter names).
    pub vars: Vec<(String, Vec<String>)>,
    /// Flags the form does not model (forwarded as written): a typed form
    /// with any of them runs the tool as written instead.
    pub unmodelled: Vec<String>,
}

impl Bound {
    pub fn get(&self, name: &str) -> Vec<String> {
        self.vars
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.iter().cloned())
            .collect()
    }
}

fn lossy(s: &OsStr) -> String {
    s.to_string_lossy().into_owned()
}

/// Is `arg` one of the `consumed` spellings (`--pretty=*` matches a prefix)?
fn is_consumed(form: &Form, arg: &[u8]) -> bool {
    form.consumed.iter().any(|c| match c.strip_suffix('*') {
        Some(prefix) => arg.starts_with(prefix.as_bytes()),
        None => arg == c.as_bytes(),
    })
}

/// Is `arg` one the form forwards and still types (`accepts`)? `*` is a
/// prefix match (`*` alone: every flag), `-<n>` a numeric flag (`-5`).
fn is_accepted(form: &Form, arg: &[u8]) -> bool {
    form.accepts.iter().any(|c| {
        if c == "-<n>" {
            return arg.len() > 1 && arg[0] == b'-' && arg[1..].iter().all(u8::is_ascii_digit);
        }
        match c.strip_suffix('*') {
            Some(prefix) => arg.starts_with(prefix.as_bytes()),
            None => arg == c.as_bytes(),
        }
    })
}

/// A flag's value: `-o F`, `-oF`, `--output F`, `--output=F`.
fn flag_value<'a>(spell: &str, arg: &'a [u8]) -> Option<Option<&'a [u8]>> {
    let s = spell.as_bytes();
    if arg == s {
        return Some(None);
    }
    if spell.starts_with("--") {
        if arg.len() > s.len() && arg.starts_with(s) && arg[s.len()] == b'=' {
            return Some(Some(&arg[s.len() + 1..]));
        }
    } else if spell.len() == 2 && arg.len() > 2 && arg.starts_with(s) {
        return Some(Some(&arg[2..]));
    } else if spell.len() == 2
        && arg.len() > 2
        && !arg.starts_with(b"--")
        && arg[1..].iter().all(u8::is_ascii_alphabetic)
        && arg.last() == s.last()
    {
        // A bundle ending in the flag (`tar -czf out.tgz`): the value follows.
        return Some(None);
    }
    None
}

/// The argv for `form` from the user's words after the sub-command, and the
/// names bound for effect templates. A parameter whose value does not have
/// its declared type is an `arg_error`.
pub fn build<S: AsRef<OsStr>>(
    adapter: &Adapter,
    form: &Form,
    words: &[S],
) -> Result<(Vec<OsString>, Bound), ShoalError> {
    let user = &words[form.words.len().min(words.len())..];
    let mut argv: Vec<OsString> = Vec::with_capacity(form.invoke.len() + user.len() + 2);
    if form.invoke.is_empty() {
        argv.extend(form.words.iter().map(OsString::from));
    } else {
        argv.extend(form.invoke.iter().map(OsString::from));
    }
    let mut bound = Bound::default();
    let mut positional: Vec<String> = Vec::new();
    let mut only_positional = false;
    let mut i = 0;
    while i < user.len() {
        let a = user[i].as_ref();
        let b = a.as_bytes();
        i += 1;
        if !only_positional && is_consumed(form, b) {
            continue;
        }
        if only_positional || !b.starts_with(b"-") || b == b"-" {
            positional.push(lossy(a));
            argv.push(a.to_os_string());
            continue;
        }
        if b == b"--" {
            only_positional = true;
            argv.push(a.to_os_string());
            continue;
        }
        if let Some(p) = b.strip_prefix(b"--").and_then(|rest| {
            let name = rest.split(|c| *c == b'=').next().unwrap_or_default();
            form.params.iter().find(|p| p.name.as_bytes() == name)
        }) {
            let inline = b.iter().position(|c| *c == b'=').map(|k| &b[k + 1..]);
            let value: Vec<u8> = match inline {
                Some(v) => v.to_vec(),
                None if p.ty == types::Ty::Bool => b"true".to_vec(),
                None => match user.get(i) {
                    Some(v) => {
                        i += 1;
                        v.as_ref().as_bytes().to_vec()
                    }
                    None => {
                        return Err(ShoalError::arg_error(format!(
                            "{} {}: `--{}` needs a {} value",
                            adapter.name,
                            form.words.join(" "),
                            p.name,
                            p.ty
                        )))
                    }
                },
            };
            let typed = types::from_text(&value, &p.ty).map_err(|e| {
                ShoalError::arg_error(format!("`--{}` of {}: {e}", p.name, adapter.name))
            })?;
            let text = String::from_utf8_lossy(&value).into_owned();
            match typed {
                Value::Bool(false) => {}
                Value::Bool(true) => argv.push(OsString::from(&p.flag)),
                _ if p.flag.ends_with('=') => {
                    argv.push(OsString::from(format!("{}{text}", p.flag)))
                }
                _ => {
                    argv.push(OsString::from(&p.flag));
                    argv.push(OsString::from(&text));
                }
            }
            bound.vars.push((p.name.clone(), vec![text]));
            continue;
        }
        let mut matched = false;
        for (name, spellings) in &form.flags {
            if let Some(v) = spellings.iter().find_map(|s| flag_value(s, b)) {
                argv.push(a.to_os_string());
                let value = match v {
                    Some(v) => Some(String::from_utf8_lossy(v).into_owned()),
                    None => user.get(i).map(|v| {
                        i += 1;
                        argv.push(v.as_ref().to_os_string());
                        lossy(v.as_ref())
                    }),
                };
                if let Some(v) = value {
                    bound.vars.push((name.clone(), vec![v]));
                }
                matched = true;
                break;
            }
        }
        if !matched {
            if !is_accepted(form, b) {
                bound.unmodelled.push(lossy(a));
            }
            argv.push(a.to_os_string());
        }
    }
    let n = form.positional.len();
    for (k, name) in form.positional.iter().enumerate() {
        if k + 1 == n && form.rest {
            let rest: Vec<String> = positional.iter().skip(k).cloned().collect();
            if !rest.is_empty() {
                bound.vars.push((name.clone(), rest));
            }
        } else if let Some(v) = positional.get(k) {
            bound.vars.push((name.clone(), vec![v.clone()]));
        }
    }
    Ok((argv, bound))
}

/// The concrete effects of `head args...` run in `cwd`, or `None` when no
/// adapter knows the command (the planner then records `opaque`).
/// `bin_hash` is the BLAKE3 of the resolved binary, when the caller has it.
pub fn effects_of(
    catalog: &Catalog,
    head: &str,
    args: &[String],
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    bin_hash: Option<&str>,
) -> Option<Vec<Effect>> {
    let (adapter, form) = catalog.resolve(head, args)?;
    if opaque_flag(form, args).is_some() {
        // It reads options from a file or runs a program: none of the
        // form's effects says what it does.
        return None;
    }
    let (_, bound) = build(adapter, form, args).ok()?;
    let get = |n: &str| bound.get(n);
    let sc = effects::Scope {
        cwd,
        env,
        bound: &get,
    };
    let mut out = effects::expand(&form.effects, &sc);
    let spawn = Effect::ProcSpawn {
        bin_hash: bin_hash.unwrap_or("").to_string(),
        argv0: adapter.bin.clone(),
    };
    if !out.contains(&spawn) {
        out.push(spawn);
    }
    Some(out)
}

pub use shoal_policy::bin_id::bin_hash;

/// The first of `form`'s `opaque` flags that `words` (the sub-command's
/// words first) use, as the user wrote it. Wide on purpose: a long flag
/// matches any abbreviation of it (tools such as git take unique prefixes)
/// and `--flag=value`; a short one anywhere in a bundle of letters (`-sK`,
/// `-Kfile`). Words after `--` are operands.
pub fn opaque_flag<'a, S: AsRef<OsStr>>(form: &Form, words: &'a [S]) -> Option<&'a OsStr> {
    if form.opaque.is_empty() {
        return None;
    }
    let user = &words[form.words.len().min(words.len())..];
    for w in user {
        let b = w.as_ref().as_bytes();
        if b == b"--" {
            break;
        }
        let hit = if let Some(rest) = b.strip_prefix(b"--") {
            let name = rest.split(|c| *c == b'=').next().unwrap_or_default();
            !name.is_empty()
                && form
                    .opaque
                    .iter()
                    .filter_map(|f| f.strip_prefix("--"))
                    .any(|f| f.as_bytes().starts_with(name))
        } else if let Some(bundle) = b.strip_prefix(b"-") {
            form.opaque
                .iter()
                .filter(|f| f.len() == 2 && !f.starts_with("--"))
                .any(|f| {
                    let c = f.as_bytes()[1];
                    bundle
                        .iter()
                        .position(|x| *x == c)
                        .is_some_and(|k| bundle[..k].iter().all(u8::is_ascii_alphanumeric))
                })
        } else {
            false
        };
        if hit {
            return Some(w.as_ref());
        }
    }
    None
}

impl Catalog {
    /// The opaque flag (see [`opaque_flag`]) `head args...` uses, if its
    /// adapter names one.
    pub fn opaque_flag<'a, S: AsRef<OsStr>>(&self, head: &str, args: &'a [S]) -> Option<&'a OsStr> {
        let (_, form) = self.resolve(head, args)?;
        opaque_flag(form, args)
    }
}

/// How the evaluator asks [`run_adapted`] to run the program: the binary
/// name and the argv after it; the result is the outcome (never raised for
/// a non-zero exit).
pub type Spawn<'a, E> = dyn FnMut(&str, Vec<OsString>) -> Result<Value, E> + 'a;

/// The evaluator's hook (docs/rules.md §8): when `head args...` is
/// an adapted command, run it with the adapter's argv and return the
/// outcome whose `.out` is the typed value (`.stdout` keeps the bytes).
/// `None`: not adapted, or a typed form given a flag it does not model
/// (the agent's flags win): run it as written. `bypass` covers `^tool`, a
/// path head and a redirected stdout. In statement position a failed outcome
/// raises `cmd_failed`; a parse failure is an `adapter_parse` error.
pub fn run_adapted<E: From<ShoalError>>(
    catalog: Option<&Catalog>,
    head: &str,
    args: &[OsString],
    bypass: bool,
    statement: bool,
    spawn: &mut Spawn<'_, E>,
) -> Option<Result<Value, E>> {
    if bypass {
        return None;
    }
    let (adapter, form) = catalog?.resolve(head, args)?;
    let plain = form.output.is_none()
        && form.invoke.is_empty()
        && form.consumed.is_empty()
        && form.params.is_empty()
        && form.ok_codes == [0];
    if plain && adapter.bin == adapter.name {
        return None;
    }
    if form.output.is_some() && !modelled(adapter, form, args) {
        return None;
    }
    Some(run_form(adapter, form, args, statement, spawn))
}

/// Does the form model every flag of `args` (so typing it overrides
/// nothing the agent asked for)? A build error is left to `run_form`.
pub fn modelled<S: AsRef<OsStr>>(adapter: &Adapter, form: &Form, args: &[S]) -> bool {
    build(adapter, form, args).map_or(true, |(_, b)| b.unmodelled.is_empty())
}

/// `^head args...` with each word quoted when it needs to be, so the line
/// can be run as it stands.
pub fn raw_form(head: &str, args: &[OsString]) -> String {
    let mut s = format!("^{head}");
    for a in args {
        let w = a.to_string_lossy();
        s.push(' ');
        let plain = !w.is_empty()
            && w.chars().all(|c| {
                c.is_ascii_alphanumeric()
                    || matches!(
                        c,
                        '-' | '_' | '.' | '/' | '=' | ':' | ',' | '@' | '+' | '%' | '~'
                    )
            });
        if plain {
            s.push_str(&w);
        } else if !w.contains('\'') {
            s.push('\'');
            s.push_str(&w);
            s.push('\'');
        } else {
            s.push('"');
            for c in w.chars() {
                if matches!(c, '"' | '\\' | '{' | '}') {
                    s.push('\\');
                }
                s.push(c);
            }
            s.push('"');
        }
    }
    s
}

fn run_form<E: From<ShoalError>>(
    adapter: &Adapter,
    form: &Form,
    args: &[OsString],
    statement: bool,
    spawn: &mut Spawn<'_, E>,
) -> Result<Value, E> {
    let (argv, _) = build(adapter, form, args)?;
    let v = spawn(&adapter.bin, argv)?;
    let Value::Outcome(o) = &v else {
        return Ok(v);
    };
    let ok = o.status.is_some_and(|s| form.ok_codes.contains(&s));
    let mut typed = None;
    let out = match (&form.output, ok) {
        (Some(spec), true) => {
            let bytes = o.stdout.read_all().map_err(|e| {
                ShoalError::new(
                    ErrorCode::IoError,
                    format!("cannot read the output of `{}`: {e}", o.cmd),
                )
            })?;
            match parse::parse(spec, &bytes) {
                Ok(v) => {
                    typed = Some(Arc::new(Typed {
                        adapter: adapter.name.clone(),
                        // `^name` would find no binary when the two differ.
                        raw: raw_form(&adapter.bin, args),
                        summary: parse::summary(spec, &bytes, &v),
                        render_text: spec.render_text,
                    }));
                    Some(v)
                }
                Err(f) => return Err(parse_error(adapter, form, &f).into()),
            }
        }
        _ => None,
    };
    let o = Outcome {
        status: o.status,
        ok,
        signal: o.signal.clone(),
        dur_ns: o.dur_ns,
        pid: o.pid,
        cmd: o.cmd.clone(),
        stdout: o.stdout.clone(),
        stderr: o.stderr.clone(),
        out,
        span: o.span,
        truncated: o.truncated,
        typed,
    };
    if statement && !ok {
        return Err(methods::cmd_failed(&o).into());
    }
    Ok(Value::Outcome(Arc::new(o)))
}

/// `adapter_parse`: the adapter (and form) and the line.
pub fn parse_error(adapter: &Adapter, form: &Form, f: &parse::Failure) -> ShoalError {
    let what = if form.words.is_empty() {
        adapter.name.clone()
    } else {
        format!("{} {}", adapter.name, form.words.join(" "))
    };
    let parser = form.output.as_ref().map(|o| o.parser.name()).unwrap_or("?");
    let msg = if f.line > 0 {
        format!("adapter `{what}` ({parser}): line {}: {}", f.line, f.msg)
    } else {
        format!("adapter `{what}` ({parser}): {}", f.msg)
    };
    ShoalError::new(ErrorCode::AdapterParse, msg).with_hint(format!(
        "`^{} ...` runs it without the adapter",
        adapter.bin
    ))
}

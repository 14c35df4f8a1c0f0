//! Command words (docs/rules.md §8): what one evaluated argument is ([`CArg`]), evaluating
//! words, heads, env prefixes and redirects, and turning arguments into argv or builtin
//! arguments. It resolves no command and runs nothing.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::ast::{Command, RedirectKind, Word, WordKind};
use crate::eval::{EResult, Interp, Pos};
use crate::scope::ScopeRef;
use crate::shell::builtins::BArg;
use crate::shell::glob;
use shoal_value::{render, OutputBytes, ShoalError, Value};

/// An evaluated command argument.
#[derive(Clone, Debug)]
pub(crate) enum CArg {
    Val(Value),
    /// A glob word with its (sorted) matches.
    Glob {
        pattern: String,
        matches: Vec<PathBuf>,
    },
    /// `--name[=value]`; `text` is the spelling for external programs.
    Long {
        name: String,
        text: String,
        value: Option<Value>,
    },
    /// `-abc` without the dash.
    Short(String),
    EndOfFlags,
    Dash,
}

/// Convert a value to an argv string for an external program (docs/rules.md §8).
pub fn argv_string(v: &Value) -> Result<OsString, ShoalError> {
    shoal_value::ops::argv_os(v)
}

pub(super) fn carg_display(a: &CArg) -> Vec<String> {
    match a {
        CArg::Val(v) => vec![match v {
            Value::Str(s) => s.to_string(),
            Value::Path(p) => p.to_string_lossy().into_owned(),
            other => render::display(other),
        }],
        CArg::Glob { matches, .. } => matches
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
        CArg::Long {
            text, value: None, ..
        } => vec![format!("--{text}")],
        CArg::Long {
            text,
            value: Some(v),
            ..
        } => vec![format!("--{text}={}", render::display(v))],
        CArg::Short(s) => vec![format!("-{s}")],
        CArg::EndOfFlags => vec!["--".into()],
        CArg::Dash => vec!["-".into()],
    }
}

pub(super) fn to_bargs(cargs: Vec<CArg>) -> Vec<BArg> {
    let mut out = Vec::new();
    for a in cargs {
        match a {
            CArg::Val(v) => out.push(BArg::Val(v)),
            CArg::Glob { matches, .. } => {
                out.extend(matches.into_iter().map(|p| BArg::Val(Value::path(p))))
            }
            CArg::Long { name, value, .. } => out.push(BArg::Long { name, value }),
            CArg::Short(s) => out.push(BArg::Short(s)),
            CArg::EndOfFlags => out.push(BArg::Val(Value::str("--"))),
            CArg::Dash => out.push(BArg::Val(Value::str("-"))),
        }
    }
    out
}

/// The plain values of a command's arguments (flags rendered as text).
pub(super) fn carg_values(cargs: Vec<CArg>) -> Vec<Value> {
    let mut out = Vec::new();
    for a in cargs {
        match a {
            CArg::Val(v) => out.push(v),
            CArg::Glob { matches, .. } => out.extend(matches.into_iter().map(Value::path)),
            other => out.extend(carg_display(&other).into_iter().map(Value::str)),
        }
    }
    out
}

pub(super) fn carg_argv(cargs: &[CArg]) -> Result<Vec<OsString>, ShoalError> {
    let mut out = Vec::new();
    for a in cargs {
        match a {
            CArg::Val(v) => out.push(argv_string(v)?),
            CArg::Glob { matches, .. } => {
                out.extend(matches.iter().map(|p| p.as_os_str().to_os_string()))
            }
            CArg::Long {
                text, value: None, ..
            } => out.push(OsString::from(format!("--{text}"))),
            CArg::Long {
                text,
                value: Some(v),
                ..
            } => {
                let mut s = OsString::from(format!("--{text}="));
                s.push(argv_string(v)?);
                out.push(s);
            }
            CArg::Short(s) => out.push(OsString::from(format!("-{s}"))),
            CArg::EndOfFlags => out.push("--".into()),
            CArg::Dash => out.push("-".into()),
        }
    }
    Ok(out)
}

/// Stdin bytes of a fed value (docs/rules.md §8); a spilled outcome or bytes value is
/// streamed from its spill file, not loaded.
pub(crate) fn feed_bytes(v: &Value) -> Result<OutputBytes, ShoalError> {
    shoal_value::methods::feed_output(v)
}

pub(super) fn runner_for(ext: &str) -> Option<(&'static str, &'static [&'static str])> {
    Some(match ext {
        "py" => ("python3", &[]),
        "js" => ("node", &[]),
        "ts" => ("deno", &["run"]),
        "sh" => ("sh", &[]),
        "rb" => ("ruby", &[]),
        "lua" => ("lua", &[]),
        "rs" => ("rust-script", &[]),
        _ => return None,
    })
}

impl Interp {
    /// The spelling of a long flag as written (`--dry-run`), recovered from
    /// the source when the word's span points into it.
    pub(super) fn long_flag_text(&self, w: &Word, name: &str) -> String {
        if let Some(text) = self.src.get(w.span.start as usize..w.span.end as usize) {
            if let Some(body) = text.strip_prefix("--") {
                let n = body.split('=').next().unwrap_or("");
                if n.replace('-', "_") == name {
                    return n.to_string();
                }
            }
        }
        name.replace('_', "-")
    }

    pub(super) fn home(&self) -> String {
        self.env.get("HOME").cloned().unwrap_or_else(|| "/".into())
    }

    pub(super) fn expand_home(&self, s: &str) -> String {
        if s == "~" || s.starts_with("~/") {
            format!("{}{}", self.home(), &s[1..])
        } else {
            s.to_string()
        }
    }

    pub(super) fn eval_word(&mut self, w: &Word, scope: &ScopeRef) -> EResult<CArg> {
        Ok(match &w.kind {
            WordKind::Plain(s) => CArg::Val(Value::str(s)),
            WordKind::Path(s) => CArg::Val(Value::path(self.expand_home(s))),
            WordKind::Glob(s) => {
                let pattern = self.expand_home(s);
                let matches = glob::expand_checked(&pattern, &self.cwd, false)?;
                CArg::Glob { pattern, matches }
            }
            WordKind::Expr(e) => CArg::Val(self.eval_expr(e, scope, Pos::Value)?),
            WordKind::LongFlag { name, value } => {
                let text = self.long_flag_text(w, name);
                let value = match value {
                    None => None,
                    Some(vw) => Some(self.word_value(vw, scope)?),
                };
                CArg::Long {
                    name: name.clone(),
                    text,
                    value,
                }
            }
            WordKind::ShortFlags(s) => CArg::Short(s.clone()),
            WordKind::EndOfFlags => CArg::EndOfFlags,
            WordKind::Dash => CArg::Dash,
        })
    }

    /// A word as a single value (flag values, env prefixes, redirect targets).
    pub(super) fn word_value(&mut self, w: &Word, scope: &ScopeRef) -> EResult<Value> {
        Ok(match self.eval_word(w, scope)? {
            CArg::Val(v) => v,
            CArg::Glob { pattern, matches } => match matches.len() {
                1 => Value::path(matches[0].clone()),
                _ => Value::str(pattern),
            },
            other => Value::str(carg_display(&other).join(" ")),
        })
    }

    pub(super) fn head_name(&mut self, w: &Word, scope: &ScopeRef) -> EResult<(String, bool)> {
        Ok(match &w.kind {
            WordKind::Plain(s) => (s.clone(), false),
            WordKind::Path(s) => (self.expand_home(s), true),
            WordKind::Glob(s) => (s.clone(), false),
            WordKind::Expr(e) => match &self.eval_expr(e, scope, Pos::Value)? {
                Value::Str(s) => (s.to_string(), s.contains('/')),
                Value::Path(p) => (p.to_string_lossy().into_owned(), true),
                other => {
                    return Err(ShoalError::type_error(format!(
                        "a command head must be a name, found {}",
                        other.type_name()
                    ))
                    .into())
                }
            },
            WordKind::LongFlag { name, .. } => (format!("--{name}"), false),
            WordKind::ShortFlags(s) => (format!("-{s}"), false),
            WordKind::EndOfFlags => ("--".into(), false),
            WordKind::Dash => ("-".into(), false),
        })
    }

    pub(super) fn eval_env_prefix(
        &mut self,
        cmd: &Command,
        scope: &ScopeRef,
    ) -> EResult<Vec<(String, String)>> {
        let mut out = Vec::new();
        for (k, w) in &cmd.env {
            let v = self.word_value(w, scope)?;
            out.push((k.clone(), argv_string(&v)?.to_string_lossy().into_owned()));
        }
        Ok(out)
    }

    pub(super) fn eval_redirects(
        &mut self,
        cmd: &Command,
        scope: &ScopeRef,
    ) -> EResult<Vec<(RedirectKind, PathBuf)>> {
        let mut out = Vec::new();
        for r in &cmd.redirects {
            let v = self.word_value(&r.target, scope)?;
            let p = match &v {
                Value::Str(s) => PathBuf::from(self.expand_home(s)),
                Value::Path(p) => p.as_ref().clone(),
                other => {
                    return Err(ShoalError::type_error(format!(
                        "a redirect target must be a path, found {}",
                        other.type_name()
                    ))
                    .into())
                }
            };
            let access = match r.kind {
                RedirectKind::In => shoal_policy::run_gate::Access::Read,
                RedirectKind::Out | RedirectKind::Append => shoal_policy::run_gate::Access::Write,
            };
            shoal_policy::run_gate::fs(access, &self.cwd, &p)?;
            out.push((r.kind, self.cwd.join(p)));
        }
        Ok(out)
    }
}

//! The adapter file format (TOML, one file per tool) and its validation into
//! an [`Adapter`]. Errors are located `file:line:column`.
//!
//! ```toml
//! bin = "git"                 # the executable (default: the file name)
//! class = "vcs"
//! bare = false                # true: the top-level form needs flags only
//! ok_codes = [0]              # exit codes that count as success
//!
//! [sub.status]                # `git status ...`; `[sub."stash list"]` for two words
//! invoke = ["status", "--porcelain=v2"]   # replaces the sub words
//! consumed = ["--porcelain=v2"]           # the pinned flags again: dropped
//! accepts = ["--untracked-files=*", "-<n>"] # forwarded; the output stays typed
//! output = { parse = "porcelain-v2", type = "table<{status: str, state: str, path: path, orig: path?}>" }
//! effects = ["fs.read(cwd)"]
//!
//! [sub.push]
//! positional = ["remote", "refspec..."]   # names for effect templates
//! flags = { repo = ["--repo"] }           # value-taking flags, bound by name
//! params = { limit = { type = "int", flag = "-n" } }   # `--limit=5` → `-n 5`
//! effects = ["fs.read(cwd)", "net.connect($remote|origin)"]
//! opaque = ["--receive-pack", "--exec"]  # flags that run a program or read options
//! ```
//!
//! `opaque` lists flags under which the effects above do not tell what the tool
//! does (it reads its options from a file, or runs a program the flag names): a
//! call using one is `opaque` for Leash. Matching is wide on purpose: a long
//! flag matches any abbreviation of it and `--flag=value`, a short one anywhere
//! in a bundle (`-sK`, `-Kfile`).
//!
//! Top-level `invoke`/`output`/`effects`/... describe the form without a
//! sub-command (`df`, `ps`); a tool with only sub-commands leaves them out.
//!
//! The agent's flags win: a form with an `output` types the result only when
//! every flag it got is modelled (in `consumed`, `accepts`, `flags` or
//! `params`); any other flag runs the tool as written (`accepts = ["*"]`
//! models every flag, `-<n>` a numeric flag such as `-5`).

use std::path::Path;

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

use super::effects::Template;
use super::parse::{OutputSpec, Parser};
use super::types::Ty;
use shoal_base::text::line_col;

/// Classes of tools (for `shoal adapter list` and policy grouping).
pub const CLASSES: &[&str] = &[
    "vcs",
    "build",
    "package",
    "container",
    "cloud",
    "system",
    "network",
    "archive",
    "data",
    "interpreter",
    "search",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDef {
    bin: Option<String>,
    class: Spanned<String>,
    about: Option<String>,
    ok_codes: Option<Vec<i64>>,
    /// The top-level form applies only when every argument is a flag.
    bare: Option<bool>,
    invoke: Option<Vec<String>>,
    consumed: Option<Vec<String>>,
    accepts: Option<Vec<String>>,
    positional: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    flags: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    params: BTreeMap<String, ParamDef>,
    output: Option<OutputDef>,
    effects: Option<Vec<Spanned<String>>>,
    opaque: Option<Vec<String>>,
    #[serde(default)]
    sub: BTreeMap<String, Spanned<FormDef>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FormDef {
    about: Option<String>,
    ok_codes: Option<Vec<i64>>,
    #[serde(default)]
    invoke: Vec<String>,
    #[serde(default)]
    consumed: Vec<String>,
    #[serde(default)]
    accepts: Vec<String>,
    #[serde(default)]
    positional: Vec<Spanned<String>>,
    #[serde(default)]
    flags: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    params: BTreeMap<String, ParamDef>,
    output: Option<OutputDef>,
    #[serde(default)]
    effects: Vec<Spanned<String>>,
    #[serde(default)]
    opaque: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ParamDef {
    #[serde(rename = "type")]
    ty: Spanned<String>,
    flag: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputDef {
    parse: Spanned<String>,
    #[serde(rename = "type")]
    ty: Spanned<String>,
    select: Option<String>,
    #[serde(default)]
    keys: BTreeMap<String, String>,
    header: Option<usize>,
    /// `"text"`: the outcome renders as the tool's text (`.out` stays typed);
    /// `"value"`: as the typed value. Default: text for `lines` and `patch`.
    render: Option<Spanned<String>>,
}

/// Where an adapter came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Builtin,
    User(std::path::PathBuf),
}

/// A typed named parameter: `--name=value` checked against `ty`.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub ty: Ty,
    pub flag: String,
}

/// One command form (the tool alone, or one sub-command).
#[derive(Clone, Debug)]
pub struct Form {
    /// The sub-command words (empty for the tool alone).
    pub words: Vec<String>,
    pub about: Option<String>,
    pub invoke: Vec<String>,
    /// Flags the pinned `invoke` already is: dropped.
    pub consumed: Vec<String>,
    /// Flags forwarded as written that keep the output typed.
    pub accepts: Vec<String>,
    /// Positional names; `rest` when the last collects the remainder.
    pub positional: Vec<String>,
    pub rest: bool,
    pub flags: Vec<(String, Vec<String>)>,
    pub params: Vec<Param>,
    pub output: Option<OutputSpec>,
    pub effects: Vec<Template>,
    /// Flags that make a call opaque (it reads options from a file or runs a
    /// program): its effects are not these.
    pub opaque: Vec<String>,
    pub ok_codes: Vec<i64>,
    /// Applies only when every argument is a flag (`systemctl` alone lists
    /// units; `systemctl restart x` is not that form).
    pub bare: bool,
}

/// A validated adapter.
#[derive(Clone, Debug)]
pub struct Adapter {
    /// The command head (the file name without `.toml`).
    pub name: String,
    pub bin: String,
    pub class: String,
    pub about: Option<String>,
    pub source: Source,
    pub root: Option<Form>,
    /// Sub-commands, longest word sequence first.
    pub subs: Vec<Form>,
}

/// A located error in an adapter file.
#[derive(Clone, Debug, PartialEq)]
pub struct FileError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn at(&self, offset: usize, message: impl Into<String>) -> FileError {
        let (line, column) = line_col(self.text, offset.min(self.text.len()));
        FileError {
            file: self.file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// Is `name` a usable adapter (command head) name?
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with(['-', '.'])
}

/// Parse and validate one adapter file. `file` names it in errors; `name`
/// is the command head (the file stem).
pub fn load(file: &str, name: &str, text: &str, source: Source) -> Result<Adapter, FileError> {
    let cx = Ctx { file, text };
    if !valid_name(name) {
        return Err(cx.at(
            0,
            format!("`{name}` is not a valid adapter name (the file name)"),
        ));
    }
    let def: FileDef = toml::from_str(text).map_err(|e| {
        let at = e.span().map(|s| s.start).unwrap_or(0);
        cx.at(at, e.message().trim().to_string())
    })?;
    if !CLASSES.contains(&def.class.get_ref().as_str()) {
        return Err(cx.at(
            def.class.span().start,
            format!(
                "unknown class `{}` (one of {})",
                def.class.get_ref(),
                CLASSES.join(", ")
            ),
        ));
    }
    let ok_codes = def.ok_codes.clone().unwrap_or_else(|| vec![0]);
    let has_root = def.invoke.is_some()
        || def.output.is_some()
        || def.effects.is_some()
        || def.opaque.is_some()
        || def.consumed.is_some()
        || def.accepts.is_some()
        || def.positional.is_some()
        || !def.flags.is_empty()
        || !def.params.is_empty();
    let bare = def.bare.unwrap_or(false);
    let root = if has_root {
        Some(
            form(
                &cx,
                Vec::new(),
                FormDef {
                    about: None,
                    ok_codes: None,
                    invoke: def.invoke.unwrap_or_default(),
                    consumed: def.consumed.unwrap_or_default(),
                    accepts: def.accepts.unwrap_or_default(),
                    positional: def.positional.unwrap_or_default(),
                    flags: def.flags,
                    params: def.params,
                    output: def.output,
                    effects: def.effects.unwrap_or_default(),
                    opaque: def.opaque.unwrap_or_default(),
                },
                &ok_codes,
                0,
            )
            .map(|f| Form { bare, ..f })?,
        )
    } else {
        None
    };
    let mut subs = Vec::new();
    for (key, sd) in def.sub {
        let at = sd.span().start;
        let words: Vec<String> = key.split_whitespace().map(str::to_string).collect();
        if words.is_empty() || words.iter().any(|w| w.starts_with('-')) {
            return Err(cx.at(at, format!("bad sub-command name `{key}`")));
        }
        subs.push(form(&cx, words, sd.into_inner(), &ok_codes, at)?);
    }
    if root.is_none() && subs.is_empty() {
        return Err(cx.at(
            0,
            "an adapter needs a top-level form or at least one [sub.NAME]",
        ));
    }
    subs.sort_by_key(|f| std::cmp::Reverse(f.words.len()));
    Ok(Adapter {
        name: name.to_string(),
        bin: def.bin.unwrap_or_else(|| name.to_string()),
        class: def.class.into_inner(),
        about: def.about,
        source,
        root,
        subs,
    })
}

fn form(
    cx: &Ctx,
    words: Vec<String>,
    d: FormDef,
    default_ok: &[i64],
    at: usize,
) -> Result<Form, FileError> {
    let mut positional = Vec::new();
    let mut rest = false;
    let n = d.positional.len();
    for (i, p) in d.positional.into_iter().enumerate() {
        let span = p.span().start;
        let mut s = p.into_inner();
        if let Some(base) = s.strip_suffix("...") {
            if i + 1 != n {
                return Err(cx.at(span, "only the last positional may end in `...`"));
            }
            rest = true;
            s = base.to_string();
        }
        if !valid_var(&s) {
            return Err(cx.at(span, format!("bad positional name `{s}`")));
        }
        positional.push(s);
    }
    for f in &d.opaque {
        let short = f.len() == 2 && f.starts_with('-') && f.as_bytes()[1].is_ascii_alphanumeric();
        let long = f.len() > 2 && f.starts_with("--") && !f.contains('=');
        if !short && !long {
            return Err(cx.at(
                at,
                format!("bad opaque flag `{f}` (expected `-X` or `--name`)"),
            ));
        }
    }
    let mut params = Vec::new();
    for (name, p) in d.params {
        let ty = Ty::parse(p.ty.get_ref()).map_err(|(o, m)| cx.at(p.ty.span().start + 1 + o, m))?;
        if matches!(ty, Ty::Record | Ty::Table(_) | Ty::List(_) | Ty::Value) {
            return Err(cx.at(p.ty.span().start, "a parameter is a scalar type"));
        }
        if !valid_var(&name) || p.flag.is_empty() {
            return Err(cx.at(p.ty.span().start, format!("bad parameter `{name}`")));
        }
        params.push(Param {
            name,
            ty,
            flag: p.flag,
        });
    }
    let flags: Vec<(String, Vec<String>)> = d.flags.into_iter().collect();
    for (name, spellings) in &flags {
        if !valid_var(name) || spellings.is_empty() || spellings.iter().any(|s| !s.starts_with('-'))
        {
            return Err(cx.at(
                at,
                format!("flag `{name}` needs spellings starting with `-`"),
            ));
        }
    }
    let output = match d.output {
        None => None,
        Some(o) => {
            let parser = Parser::from_name(o.parse.get_ref()).ok_or_else(|| {
                cx.at(
                    o.parse.span().start,
                    format!(
                        "unknown parser `{}` (one of {})",
                        o.parse.get_ref(),
                        Parser::ALL
                            .iter()
                            .map(|(n, _)| *n)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
            // +1: the span starts at the opening quote.
            let ty = Ty::parse(o.ty.get_ref())
                .map_err(|(off, m)| cx.at(o.ty.span().start + 1 + off, m))?;
            parser
                .accepts(&ty)
                .map_err(|m| cx.at(o.ty.span().start, m))?;
            for k in o.keys.keys() {
                if ty.columns().is_none_or(|c| !c.iter().any(|(n, _)| n == k)) {
                    return Err(cx.at(
                        o.ty.span().start,
                        format!("`keys` names `{k}`, which is not a column"),
                    ));
                }
            }
            let render_text = match o.render.as_ref().map(|r| r.get_ref().as_str()) {
                None => matches!(parser, Parser::Lines | Parser::Patch),
                Some("text") => true,
                Some("value") => false,
                Some(other) => {
                    let at = o.render.as_ref().map_or(0, |r| r.span().start);
                    return Err(cx.at(at, format!("unknown render `{other}` (text or value)")));
                }
            };
            Some(OutputSpec {
                render_text,
                parser,
                ty,
                select: o
                    .select
                    .map(|s| s.split('.').map(str::to_string).collect())
                    .unwrap_or_default(),
                keys: o.keys.into_iter().collect(),
                header: o.header.unwrap_or(1),
            })
        }
    };
    let mut effects = Vec::new();
    for e in d.effects {
        let span = e.span().start;
        let t = Template::parse(e.get_ref()).map_err(|m| cx.at(span, m))?;
        if let Some(v) = t.vars() {
            let known = positional.iter().any(|p| p == v)
                || flags.iter().any(|(n, _)| n == v)
                || params.iter().any(|p| p.name == v);
            if !known {
                return Err(cx.at(
                    span,
                    format!("`${v}` is not a positional, flag or parameter of this form"),
                ));
            }
        }
        effects.push(t);
    }
    Ok(Form {
        words,
        about: d.about,
        invoke: d.invoke,
        consumed: d.consumed,
        accepts: d.accepts,
        positional,
        rest,
        flags,
        params,
        output,
        effects,
        opaque: d.opaque,
        ok_codes: d.ok_codes.unwrap_or_else(|| default_ok.to_vec()),
        bare: false,
    })
}

fn valid_var(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The adapter name a file path stands for (`git.toml` → `git`).
pub fn name_of(path: &Path) -> Option<String> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".toml")?;
    Some(stem.to_string())
}

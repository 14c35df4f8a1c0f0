//! Bash habits: teaching errors that name the Shoal form (loops, tests,
//! `set -e`, `export`, `source` of a shell file, `&&` after a builtin that
//! yields a value) and the warnings for valid Shoal that a bash writer rarely
//! means (`&&`/`||` after a structured builtin). Detected while parsing, so a
//! teaching error arrives before any part of the program ran.

use super::parser::Parser;
use super::ParseError;
use crate::ast::{Command, WordKind};

/// Builtins whose result is a value that is not a condition (a path, a list,
/// a table): `cd sub && ls` can never test it.
const VALUE_HEADS: &[&str] = &["cd", "pushd", "popd", "dirs", "pwd", "j", "jump", "jobs"];

/// Structured builtins: they raise on failure and never yield a failed
/// outcome, so `||` never runs its right side and `&&` drops the left value.
const STRUCTURED_HEADS: &[&str] = &[
    "echo", "ls", "cat", "mkdir", "touch", "cp", "mv", "rm", "stat", "env", "sleep", "head", "ln",
    "which",
];

/// Shell-only command heads and the Shoal form each one teaches.
fn shell_head(name: &str) -> Option<(&'static str, &'static str)> {
    Some(match name {
        "until" => (
            "`until …; do …; done` is bash syntax",
            "Shoal loops are `while !cond { … }`, e.g. `var n = 0; while !(n >= 3) { n += 1 }`",
        ),
        "do" | "done" | "then" | "fi" | "elif" | "esac" => (
            "this is a keyword of a bash block, not Shoal syntax",
            "Shoal blocks use braces: `for x in xs { … }`, `while cond { … }`, `if cond { … } else { … }`",
        ),
        "wait" | "fg" | "bg" | "disown" => (
            "job control is bash syntax",
            "`cmd &` yields a task: `let t = (sleep 1 &)` then `t.await()` waits for it; `jobs` lists the session's tasks",
        ),
        "unset" => (
            "`unset` is bash syntax",
            "remove an environment variable for one block with `with env: {NAME: null} { … }`, or set it with `env.NAME = \"…\"`",
        ),
        "local" | "declare" | "readonly" | "typeset" => (
            "shell variable declarations are bash syntax",
            "declare Shoal variables with `let name = …` (immutable) or `var name = …` (mutable)",
        ),
        _ => return None,
    })
}

/// Source text quoted in a hint, cut to a readable length.
fn quote(text: &str) -> String {
    const MAX: usize = 80;
    let t = text.trim();
    if t.len() <= MAX {
        return t.to_string();
    }
    let mut end = MAX;
    while !t.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &t[..end])
}

/// A file name that is a shell script (or shell dotfile), not Shoal source.
fn is_shell_file(text: &str) -> bool {
    let base = text.rsplit('/').next().unwrap_or(text);
    let ext = base.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    matches!(ext, "sh" | "bash" | "zsh" | "ksh" | "env" | "envrc")
        || matches!(
            base,
            ".bashrc" | ".bash_profile" | ".profile" | ".zshrc" | ".zshenv" | ".env" | ".envrc"
        )
}

impl Parser<'_> {
    /// The word `w` occurs as a whole shell word in `[from, to)`, after a `;`,
    /// a newline or the start of the range (the position of a bash keyword).
    fn shell_keyword_in(&self, from: usize, to: usize, w: &str) -> bool {
        let mut i = from;
        let mut at_start = true;
        while i < to {
            let b = self.byte(i);
            if b == b';' || b == b'\n' {
                at_start = true;
                i += 1;
                continue;
            }
            if b == b' ' || b == b'\t' {
                i += 1;
                continue;
            }
            if at_start && self.word_at(i, w) {
                return true;
            }
            at_start = false;
            while i < to && !matches!(self.byte(i), b';' | b'\n' | b' ' | b'\t') {
                i += 1;
            }
        }
        false
    }

    /// End of the region a bash compound statement starting at `p` may span.
    fn habit_region(&self, p: usize) -> usize {
        self.limit.min(p.saturating_add(4096))
    }

    /// `for x in …; do …; done`: replace the parse error `e` of a `for` at `p`
    /// with the Shoal form, when the text is a bash loop.
    pub(super) fn teach_for(&self, p: usize, e: ParseError) -> ParseError {
        let end = self.habit_region(p);
        if !self.shell_keyword_in(p, end, "do") {
            return e;
        }
        // `for NAME in ITEMS; do` → name the loop variable and the items.
        let name_s = self.skip_ws(p + 3);
        let name_e = self.ident_end(name_s);
        let var = if name_e > name_s {
            self.slice(name_s, name_e)
        } else {
            "x"
        };
        let in_s = self.skip_ws(name_e);
        let mut items = String::new();
        if self.word_at(in_s, "in") {
            let mut i = in_s + 2;
            while i < end && !matches!(self.byte(i), b';' | b'\n') {
                i += 1;
            }
            items = quote(self.slice(in_s + 2, i));
        }
        let iter = if !items.is_empty()
            && !items.contains(' ')
            && items.bytes().any(|b| matches!(b, b'*' | b'?' | b'['))
        {
            format!("glob(\"{items}\")")
        } else if items.starts_with("$(") {
            "(cmd args).out.lines()".to_string()
        } else {
            "[\"a\", \"b\"]".to_string()
        };
        self.err_hint(
            "`for …; do …; done` is bash syntax",
            p,
            p + 3,
            format!("Shoal loops take a block in braces and names without `$`: `for {var} in {iter} {{ echo ({var}) }}`"),
        )
    }

    /// `while …; do …; done`.
    pub(super) fn teach_while(&self, p: usize, e: ParseError) -> ParseError {
        if !self.shell_keyword_in(p, self.habit_region(p), "do") {
            return e;
        }
        self.err_hint(
            "`while …; do …; done` is bash syntax",
            p,
            p + 5,
            "Shoal loops take a condition and a block in braces: `var n = 0; while n < 3 { n += 1 }`",
        )
    }

    /// `if [ … ]; then … fi` and `if cmd; then … fi`.
    pub(super) fn teach_if(&self, p: usize, e: ParseError) -> ParseError {
        let end = self.habit_region(p);
        let cond = self.skip_ws(p + 2);
        let test = self.byte(cond) == b'[';
        if !test && !self.shell_keyword_in(p, end, "then") {
            return e;
        }
        self.err_hint(
            "`if …; then …; fi` is bash syntax",
            p,
            p + 2,
            "Shoal: `if cond { … } else { … }` with a bool or an outcome as the condition, e.g. `if path(\"notes.txt\").exists() { \"yes\" }` or `if (grep -q x f.txt) { … }`",
        )
    }

    /// A statement starting with `[` or `[[` that did not parse as a list:
    /// a bash test.
    pub(super) fn teach_test(&self, p: usize, e: ParseError) -> ParseError {
        let double = self.byte(p + 1) == b'[';
        let q = self.skip_ws(p + if double { 2 } else { 1 });
        let flag = self.byte(q) == b'-' && self.byte(q + 1).is_ascii_alphabetic();
        let mut close = false;
        let mut i = q;
        while i < self.limit && self.byte(i) != b'\n' {
            if self.byte(i) == b']' && matches!(self.byte(i.wrapping_sub(1)), b' ' | b'\t') {
                close = true;
            }
            i += 1;
        }
        if !(double || flag || close) {
            return e;
        }
        let what = if double { "`[[ … ]]`" } else { "`[ … ]`" };
        self.err_hint(
            format!("{what} tests are bash syntax"),
            p,
            p + if double { 2 } else { 1 },
            "compare values directly: `path(\"f.txt\").exists()`, `path(\"d\").is_dir()`, `x == \"y\"`, `n > 3`; an outcome is a condition too: `if (grep -q x f.txt) { … }`",
        )
    }

    /// `. file` at the start of a statement: bash's `source`.
    pub(super) fn teach_dot_source(&self, p: usize) -> Option<ParseError> {
        if self.byte(p) != b'.' || !matches!(self.byte(p + 1), b' ' | b'\t') {
            return None;
        }
        let q = self.skip_ws(p + 1);
        if q >= self.limit || matches!(self.byte(q), b'\n' | b';') {
            return None;
        }
        let mut e = q;
        while !self.is_word_end(e) {
            e += 1;
        }
        let file = quote(self.slice(q, e));
        Some(self.err_hint(
            "`. file` (source) is bash syntax",
            p,
            e,
            format!("to run a shell file and use its variables: `sh {{ . {file}; cmd }}`; to set a variable for later commands: `env.NAME = \"value\"`; `source f.shl` runs a Shoal file"),
        ))
    }

    /// `NAME=value` alone on a line, NAME declared nowhere: bash's variable
    /// assignment (`[p, e)` is the name, the value ends at `w`).
    pub(super) fn teach_glued_assign(&self, p: usize, e: usize, w: usize) -> ParseError {
        let name = self.slice(p, e);
        let raw = quote(self.slice(e + 1, w));
        let value = if raw.starts_with('"') || raw.starts_with('\'') {
            raw.to_string()
        } else {
            format!("\"{raw}\"")
        };
        self.err_hint(
            format!("`{name}=…` alone sets nothing: no variable `{name}` is declared"),
            p,
            w,
            format!("for an environment variable of later commands: `env.{name} = {value}`; for a Shoal variable: `var {name} = {value}`"),
        )
    }

    /// `export NAME=…` / `export NAME`: the hint for the parse error `e`.
    pub(super) fn teach_export(&self, q: usize, mut e: ParseError) -> ParseError {
        let ne = self.ident_end(q);
        if ne > q {
            let name = self.slice(q, ne);
            e.hint = Some(format!(
                "set an environment variable for later commands with `env.{name} = \"value\"`; `export let` / `export fn` export from a module"
            ));
        }
        e
    }

    /// Teaching errors and warnings for one parsed command (its head and
    /// arguments), before anything runs.
    pub(super) fn check_command(&self, c: &Command) -> Result<(), ParseError> {
        if c.forced {
            return Ok(());
        }
        let WordKind::Plain(head) = &c.head.kind else {
            return Ok(());
        };
        if self.is_bound_any(head) {
            return Ok(());
        }
        let (s, e) = (c.head.span.start as usize, c.head.span.end as usize);
        if let Some((msg, hint)) = shell_head(head) {
            return Err(self.err_hint(msg, s, e, hint));
        }
        match head.as_str() {
            "set" | "shopt" => {
                let first = c
                    .args
                    .first()
                    .map(|w| self.slice(w.span.start as usize, w.span.end as usize))
                    .unwrap_or("");
                let hint = if first.contains('x') {
                    "every exec is journaled with its source and result: `journal --limit=5` shows the last ones"
                } else {
                    "not needed: a failing command in statement position already stops the program (`set -e`), and a failure inside an expression is an outcome you can test (`(cmd).ok`)"
                };
                Err(self.err_hint(
                    format!("`{head}` shell options are bash syntax"),
                    s,
                    e,
                    hint,
                ))
            }
            "source" => {
                let Some(arg) = c.args.first() else {
                    return Ok(());
                };
                let text = quote(self.slice(arg.span.start as usize, arg.span.end as usize));
                let plain = matches!(arg.kind, WordKind::Plain(_) | WordKind::Path(_));
                if plain && is_shell_file(&text) {
                    return Err(self.err_hint(
                        format!("`source` runs Shoal files; `{text}` is a shell script"),
                        s,
                        arg.span.end as usize,
                        format!("run it in a shell with the commands that need it: `sh {{ source {text}; cmd }}`; set a variable for later commands with `env.NAME = \"value\"`"),
                    ));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// `LHS && …` / `LHS || …` where LHS is the command `c`.
    pub(super) fn check_chain_lhs(
        &self,
        c: &Command,
        and: bool,
        op_at: usize,
    ) -> Result<(), ParseError> {
        if c.forced || c.background {
            return Ok(());
        }
        let WordKind::Plain(head) = &c.head.kind else {
            return Ok(());
        };
        if self.is_bound_any(head) {
            return Ok(());
        }
        let op = if and { "&&" } else { "||" };
        let (s, e) = (c.span.start as usize, op_at + 2);
        if VALUE_HEADS.contains(&head.as_str()) {
            let what = match head.as_str() {
                "cd" | "pwd" | "j" | "jump" => "a path",
                "jobs" => "a table",
                _ => "a list of paths",
            };
            let cmd = quote(self.slice(c.span.start as usize, c.span.end as usize));
            return Err(self.err_hint(
                format!("`{head}` yields {what}, not an outcome, so `{op}` cannot test it (nothing ran)"),
                s,
                e,
                format!("put the next command on a new line or after `;`: `{cmd}; …` (a failing `{head}` stops the program)"),
            ));
        }
        if STRUCTURED_HEADS.contains(&head.as_str()) {
            let (msg, hint) = if and {
                (
                    format!("`{head}` is a builtin: it raises on failure, and `&&` keeps only the right side's value"),
                    "write the commands on separate lines or with `;` to see each result".to_string(),
                )
            } else {
                (
                    format!("`{head}` is a builtin: it raises on failure instead of yielding a failed outcome, so `||` never runs its right side"),
                    format!("catch the error: `({}) catch {{ … }}`, or write the commands on a new line or after `;`", quote(self.slice(c.span.start as usize, c.span.end as usize))),
                )
            };
            self.warn("builtin_in_chain", msg, s, e, hint);
        }
        Ok(())
    }
}

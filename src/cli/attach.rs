//! `shoal attach [SESSION]`: an interactive Shoal REPL in the terminal on a
//! live session (the agent's bindings, cwd, transcript and `out:N`), with the
//! live view of what other clients run printed above the prompt and inline
//! answers to plans that wait for a human. Line editing is reedline's:
//! history from the session's journal, multi-line input and highlighting
//! through the kernel's `parse`, completion through `complete`. Ctrl-C cancels
//! the running exec (or clears the line), Ctrl-D detaches; the session stays.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nu_ansi_term::{Color, Style};
use reedline::{
    default_emacs_keybindings, ColumnarMenu, Completer, CompletionResult, Emacs, ExternalPrinter,
    FileBackedHistory, Highlighter, History, HistoryItem, KeyCode, KeyModifiers, MenuBuilder,
    Prompt, PromptEditMode, PromptHistorySearch, Reedline, ReedlineEvent, ReedlineMenu, Signal,
    Span, StyledText, Suggestion, ValidationResult, Validator,
};
use serde_json::{json, Value};
use shoal_base::sync::Locked;

use super::client::{connect, connect_or_start, Client};
use super::live::{self, Item, Pending};
use super::output;
use shoal_proto::kernel::{
    AttachParams, CompleteParams, ExecParams, KernelRequest, SrcParams, Width,
};

/// Sources loaded from the journal into the line editor's history.
const HISTORY: usize = 500;

/// What `shoal attach` was asked.
pub struct Opts {
    pub socket: Option<PathBuf>,
    pub session: String,
    pub quiet: bool,
}

/// Plans that wait for this human, oldest first (the prompt asks about the first).
type Waiting = Arc<Mutex<VecDeque<Pending>>>;

/// A parse error: message, span start and end (bytes).
type ParseErr = (String, usize, usize);

/// The kernel's context-free `parse` and `complete`, on a connection of their
/// own (never the one an exec waits on), each answer cached by its input.
struct Syntax {
    client: Mutex<Option<Client>>,
    /// The last source parsed and its error (`None`: it parses).
    last: Mutex<Option<(String, Option<ParseErr>)>>,
}

impl Syntax {
    fn new(socket: &Path) -> Arc<Syntax> {
        let client = connect(socket).ok().and_then(|s| Client::new(s).ok());
        Arc::new(Syntax {
            client: Mutex::new(client),
            last: Mutex::new(None),
        })
    }

    /// The parse error of `src` (message, span), `None` when it parses or
    /// when the daemon does not answer.
    fn error(&self, src: &str) -> Option<ParseErr> {
        if let Some((s, e)) = &*self.last.locked() {
            if s == src {
                return e.clone();
            }
        }
        let mut c = self.client.locked();
        let r = c
            .as_mut()?
            .call(&KernelRequest::Parse(SrcParams { src: src.into() }))
            .ok()?;
        let e = r.err().map(|e| {
            let e = e.0;
            let span = |k: &str| {
                e.pointer(&format!("/data/span/{k}"))
                    .and_then(Value::as_u64)
            };
            (
                e["message"].as_str().unwrap_or("").to_string(),
                span("start").unwrap_or(0) as usize,
                span("end").unwrap_or(0) as usize,
            )
        });
        drop(c);
        *self.last.locked() = Some((src.to_string(), e.clone()));
        e
    }
}

/// An error the next line can still complete (an open bracket, block or string).
fn is_incomplete(msg: &str) -> bool {
    msg.contains("end of input") || msg.starts_with("unterminated") || msg.contains("unbalanced")
}

struct ParseValidator(Arc<Syntax>);

impl Validator for ParseValidator {
    fn validate(&self, line: &str) -> ValidationResult {
        match self.0.error(line) {
            Some((m, _, _)) if is_incomplete(&m) => ValidationResult::Incomplete,
            _ => ValidationResult::Complete,
        }
    }
}

/// Highlighting: keywords, strings and numbers by a cheap scan; the span of a
/// parse error (other than an unfinished line) underlined in red.
struct ParseHighlighter(Arc<Syntax>);

const KEYWORDS: &[&str] = &[
    "let", "var", "fn", "if", "else", "match", "for", "in", "while", "try", "catch", "return",
    "true", "false", "null", "sh",
];

impl Highlighter for ParseHighlighter {
    fn highlight(&self, line: &str, _cursor: usize) -> StyledText {
        let mut styles: Vec<Style> = vec![Style::new(); line.len()];
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            if c == b'"' || c == b'\'' {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != c {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let end = (i + 1).min(bytes.len());
                styles[start..end].fill(Style::new().fg(Color::Green));
                i = end;
            } else if c.is_ascii_digit() {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                    i += 1;
                }
                styles[start..i].fill(Style::new().fg(Color::Cyan));
            } else if c.is_ascii_alphabetic() || c == b'_' {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if KEYWORDS.contains(&&line[start..i]) {
                    styles[start..i].fill(Style::new().fg(Color::Purple).bold());
                }
            } else {
                i += 1;
            }
        }
        if let Some((m, s, e)) = self.0.error(line) {
            if !is_incomplete(&m) && s < line.len() {
                let e = e.clamp(s + 1, line.len());
                styles[s..e].fill(Style::new().fg(Color::Red).underline());
            }
        }
        let mut out = StyledText::new();
        let mut start = 0;
        for (i, _) in line.char_indices().skip(1) {
            if styles[i] != styles[start] {
                out.push((styles[start], line[start..i].to_string()));
                start = i;
            }
        }
        if start < line.len() {
            out.push((styles[start], line[start..].to_string()));
        }
        out
    }
}

/// Completion by the kernel's `complete` on the attached connection (idle while
/// reedline reads a line): keywords, the line's names, and the session's paths
/// and commands.
struct KernelCompleter(Arc<Mutex<Client>>);

impl Completer for KernelCompleter {
    fn complete(&mut self, line: &str, pos: usize) -> CompletionResult {
        let pos = pos.min(line.len());
        let reply = self
            .0
            .locked()
            .call(&KernelRequest::Complete(CompleteParams {
                src: line.into(),
                cursor: Some(pos as u64),
            }));
        let Ok(Ok(v)) = reply else {
            return CompletionResult::fresh(Vec::new());
        };
        let start = v["start"]
            .as_u64()
            .and_then(|s| usize::try_from(s).ok())
            .filter(|&s| s <= pos && line.is_char_boundary(s))
            .unwrap_or(pos);
        let found: Vec<Suggestion> = v["candidates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str())
            .map(|value| Suggestion {
                value: value.to_string(),
                span: Span::new(start, pos),
                append_whitespace: false,
                ..Suggestion::default()
            })
            .collect();
        CompletionResult::fresh(found)
    }
}

/// `session> `, or the question of the first waiting plan.
struct AttachPrompt {
    session: String,
    waiting: Waiting,
}

impl Prompt for AttachPrompt {
    fn render_prompt_left(&self) -> Cow<'_, str> {
        match self.waiting.locked().front() {
            Some(p) => Cow::Owned(format!("approve plan {}? [y/n] ", p.plan_ref)),
            None => Cow::Owned(self.session.clone()),
        }
    }

    fn render_prompt_right(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn render_prompt_indicator(&self, _mode: PromptEditMode) -> Cow<'_, str> {
        if self.waiting.locked().is_empty() {
            Cow::Borrowed("> ")
        } else {
            Cow::Borrowed("")
        }
    }

    fn render_prompt_multiline_indicator(&self) -> Cow<'_, str> {
        Cow::Borrowed("… ")
    }

    fn render_prompt_history_search_indicator(&self, h: PromptHistorySearch) -> Cow<'_, str> {
        Cow::Owned(format!("(search: {}) ", h.term))
    }
}

/// The session's newest sources from the journal, oldest first.
fn journal_history(c: &mut Client, session: &str) -> Box<dyn History> {
    let mut h: Box<dyn History> = match FileBackedHistory::new(HISTORY) {
        Ok(h) => Box::new(h),
        Err(_) => return Box::new(FileBackedHistory::default()),
    };
    let q = shoal_journal::Query {
        session: Some(session.into()),
        limit: Some(HISTORY),
        ..Default::default()
    };
    if let Ok(Ok(v)) = c.call(&KernelRequest::JournalQuery(q)) {
        let mut srcs: Vec<&str> = v
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["src"].as_str())
            .collect();
        srcs.reverse();
        srcs.dedup();
        for s in srcs {
            let _ = h.save(HistoryItem::from_command_line(s));
        }
    }
    h
}

/// Terminal columns (80 when unknown), within what `exec` accepts.
fn width() -> usize {
    crossterm::terminal::size().map_or(80, |(w, _)| usize::from(w).clamp(20, 1000))
}

/// Ctrl-C while an exec runs: a `cancel` for it on the same connection (the
/// terminal is not in raw mode then, so Ctrl-C is a SIGINT; at the prompt it is
/// a key reedline reads).
fn cancel_on_sigint(writer: UnixStream, running: Arc<AtomicU64>) -> Result<(), String> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT])
        .map_err(|e| format!("cannot watch SIGINT: {e}"))?;
    let writer = Mutex::new(writer);
    std::thread::Builder::new()
        .name("attach-sigint".into())
        .spawn(move || {
            for _ in signals.forever() {
                let id = running.load(Ordering::SeqCst);
                if id == 0 {
                    continue;
                }
                let mut frame = serde_json::to_vec(
                    &json!({"jsonrpc": "2.0", "method": "cancel", "params": {"id": id}}),
                )
                .unwrap_or_default();
                frame.push(b'\n');
                let _ = writer.locked().write_all(&frame);
            }
        })
        .map_err(|e| format!("cannot start the SIGINT thread: {e}"))?;
    Ok(())
}

/// The live view: a thread reading the view connection's events, printing
/// them above the prompt and queueing the plans that wait.
fn start_view(
    socket: &Path,
    session: &str,
    own_conn: Option<u64>,
    printer: &ExternalPrinter<String>,
    waiting: Waiting,
) -> Result<(), String> {
    let (mut c, already) = live::open(socket, Some(session), "attach", false)?;
    let tx = printer.sender();
    for p in already {
        let _ = tx.send(p.text.clone());
        waiting.locked().push_back(p);
    }
    let filter = live::Filter {
        session: Some(session.to_string()),
        own_conn,
        width: width(),
    };
    std::thread::Builder::new()
        .name("attach-view".into())
        .spawn(move || {
            while let Ok(ev) = c.next_event() {
                match filter.item(&ev) {
                    None => {}
                    Some(Item::Text(t)) => {
                        let _ = tx.send(t);
                    }
                    Some(Item::Pending(p)) => {
                        let text = p.text.clone();
                        {
                            let mut w = waiting.locked();
                            if !w.iter().any(|x| x.plan_ref == p.plan_ref) {
                                w.push_back(p);
                            }
                        }
                        let _ = tx.send(text);
                    }
                    Some(Item::Settled { plan_ref, text }) => {
                        waiting.locked().retain(|p| p.plan_ref != plan_ref);
                        let _ = tx.send(text);
                    }
                }
            }
            let _ = tx.send("(the live view lost the daemon)".to_string());
        })
        .map_err(|e| format!("cannot start the live view: {e}"))?;
    Ok(())
}

/// Print an exec's answer as `shoal exec` does.
fn print_result(r: std::io::Result<Result<Value, super::client::RemoteError>>) {
    match r {
        Err(e) => eprintln!("shoal attach: {e}"),
        Ok(Ok(v)) => {
            let render = v.get("render").and_then(Value::as_str).unwrap_or("");
            let is_null = v.get("value") == Some(&json!({"$": "null"}));
            if !render.is_empty() && !is_null {
                output::line(render.trim_end_matches('\n'));
            }
            super::exec::print_warnings(v.get("warnings"));
        }
        Ok(Err(e)) => super::exec::print_error(&e.0),
    }
}

pub fn run(opts: Opts) -> i32 {
    match attach(opts) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("shoal attach: {e}");
            1
        }
    }
}

fn attach(opts: Opts) -> Result<(), String> {
    if !std::io::stdin().is_terminal() {
        return Err("needs a terminal (use `shoal exec` from scripts)".into());
    }
    let path = shoal_base::paths::socket_path(opts.socket.as_deref());
    let stream = connect_or_start(&path).map_err(|e| format!("cannot reach the daemon: {e}"))?;
    let mut client = Client::new(stream).map_err(|e| e.to_string())?;
    let cwd = std::env::current_dir()
        .ok()
        .map(|p| p.display().to_string());
    let mut attach = AttachParams::client(
        Some(&opts.session),
        "attach",
        std::io::stdout().is_terminal(),
    );
    attach.cwd = cwd;
    attach.env = Some(super::client::client_env());
    if let Some(c) = &mut attach.client {
        c.human = Some(true);
    }
    let a = live::call(&mut client, &KernelRequest::Attach(attach))?;
    let session = a["session"].as_str().unwrap_or(&opts.session).to_string();
    let own_conn = a["conn"].as_u64();
    if a["access"].as_str() == Some("read") {
        output::line(&format!("(session {session} is shared with you read-only)"));
    }

    let syntax = Syntax::new(&path);
    let waiting: Waiting = Arc::default();
    let printer = ExternalPrinter::new(1024);
    if !opts.quiet {
        start_view(&path, &session, own_conn, &printer, waiting.clone())?;
    }
    let running = Arc::new(AtomicU64::new(0));
    let writer = client.try_clone_writer().map_err(|e| e.to_string())?;
    cancel_on_sigint(writer, running.clone())?;

    let mut keys = default_emacs_keybindings();
    keys.add_binding(
        KeyModifiers::NONE,
        KeyCode::Tab,
        ReedlineEvent::UntilFound(vec![
            ReedlineEvent::Menu("completion_menu".to_string()),
            ReedlineEvent::MenuNext,
        ]),
    );
    let history = journal_history(&mut client, &session);
    let client = Arc::new(Mutex::new(client));
    let mut editor = Reedline::create()
        .with_history(history)
        .with_validator(Box::new(ParseValidator(syntax.clone())))
        .with_highlighter(Box::new(ParseHighlighter(syntax.clone())))
        .with_completer(Box::new(KernelCompleter(client.clone())))
        .with_menu(ReedlineMenu::EngineCompleter(Box::new(
            ColumnarMenu::default().with_name("completion_menu"),
        )))
        .with_edit_mode(Box::new(Emacs::new(keys)))
        .with_external_printer(printer)
        // How soon a live-view line shows above the prompt (~30 looks a second).
        .with_poll_interval(std::time::Duration::from_millis(33));
    let prompt = AttachPrompt {
        session: session.clone(),
        waiting: waiting.clone(),
    };
    output::line(&format!(
        "attached to session {session} · Ctrl-D detaches, Ctrl-C cancels{}",
        if opts.quiet { "" } else { " · live view on" }
    ));
    loop {
        let line = match editor.read_line(&prompt) {
            Ok(Signal::Success(l)) => l,
            Ok(Signal::CtrlC) => continue,
            Ok(Signal::CtrlD) => break,
            Ok(_) => continue,
            Err(e) => return Err(format!("terminal: {e}")),
        };
        let src = line.trim();
        if src.is_empty() {
            continue;
        }
        let first = waiting.locked().front().cloned();
        if let (Some(p), Some(yes)) = (first, live::answer(src)) {
            waiting.locked().retain(|x| x.plan_ref != p.plan_ref);
            output::line(&live::decide(&path, &p, yes));
            continue;
        }
        if let Some(rest) = src.strip_prefix(":pty") {
            // `:pty N`: take over the session's PTY N until Ctrl-], then back
            // to this prompt (reedline is not reading meanwhile).
            let n = rest.trim();
            if n.is_empty() {
                output::line("usage: :pty N (take over pty:N of this session; Ctrl-] comes back)");
            } else {
                super::takeover::run(opts.socket.clone(), &session, n);
            }
            continue;
        }
        if src == ":detach" || src == ":q" {
            break;
        }
        let mut c = client.locked();
        running.store(c.next_id(), Ordering::SeqCst);
        let r = c.call(&KernelRequest::Exec(ExecParams {
            width: Some(Width(width())),
            ..ExecParams::of(line)
        }));
        drop(c);
        running.store(0, Ordering::SeqCst);
        print_result(r);
    }
    output::line(&format!("detached; session {session} stays"));
    Ok(())
}

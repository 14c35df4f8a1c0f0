//! The README's examples run: every fenced block with the info string `console` in
//! README.md is a transcript. A line starting with `$ ` is a command, run by `bash` in a
//! private root (its own XDG dirs, so the first `shoal` call starts a daemon of its own);
//! the lines up to the next command are its expected output, stdout and stderr together.
//! In an expected line `[..]` stands for any text within the line, and a line that is
//! just `...` for any number of lines (none included). Trailing blanks are ignored.
//! The daemon the commands started is killed (by pid, found in /proc) at the end.
//!
//! The MCP client configurations are real too: every `json` and `toml` block with MCP
//! servers, and every `claude mcp add` line, is launched as the client would launch it
//! (the README's `/home/you/.cargo/bin/shoal` replaced by this build), with its `env`, in a
//! root of its own; it must answer `initialize` and a `shoal_exec` that sees that `env`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{daemons_on, kill_pid, Root, BIN};

/// One `$ ` command of a console block and the output it must print.
struct Step {
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// The commands of every `console` block of `text`, in order.
fn console_steps(text: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut in_console = false;
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.strip_prefix("```") {
            in_console = !in_console && info.trim() == "console";
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step {
                line: i + 1,
                command: command.to_string(),
                expected: Vec::new(),
            });
        } else {
            let step = steps
                .last_mut()
                .unwrap_or_else(|| panic!("README.md:{}: output before any `$ ` line", i + 1));
            step.expected.push(line.trim_end().to_string());
        }
    }
    steps
}

/// `actual` matches `pattern`, where each `[..]` in `pattern` matches any text.
fn line_matches(pattern: &str, actual: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(at) => rest = &rest[at + mid.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// `actual` lines match `expected` lines, `...` matching any run of lines.
fn lines_match(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e == "..." => {
            (0..=actual.len()).any(|k| lines_match(rest, &actual[k..]))
        }
        Some((e, rest)) => actual
            .split_first()
            .is_some_and(|(a, more)| line_matches(e, a) && lines_match(rest, more)),
    }
}

/// Run one README command in `dir` with the root's private environment and `shoal` on
/// `PATH`; its stdout and stderr, interleaved as written.
fn run_step(root: &Root, dir: &Path, command: &str) -> String {
    let bin_dir = Path::new(BIN).parent().expect("the binary's directory");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let base = root.command();
    let mut cmd = Command::new("bash");
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd
        .arg("--noprofile")
        .arg("--norc")
        .arg("-c")
        .arg(format!("{{ {command}\n}} 2>&1"))
        .env("PATH", path)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run bash");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn readme_console_blocks_run_as_written() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let steps = console_steps(&readme);
    assert!(
        steps.len() >= 10,
        "README.md has only {} console commands: are the blocks still marked `console`?",
        steps.len()
    );
    let root = Root::new();
    let work = root.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let socket = root.path().join("run/shoal/shoal.sock");
    let mut failures = Vec::new();
    for step in &steps {
        let out = run_step(&root, &work, &step.command);
        let actual: Vec<&str> = out.lines().map(str::trim_end).collect();
        if !lines_match(&step.expected, &actual) {
            failures.push(format!(
                "README.md:{}: $ {}\n--- expected\n{}\n--- got\n{}",
                step.line,
                step.command,
                step.expected.join("\n"),
                actual.join("\n")
            ));
        }
    }
    let daemons = daemons_on(&socket);
    for pid in &daemons {
        kill_pid(*pid);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(daemons.len(), 1, "the first command starts one daemon");
}

#[test]
fn the_matcher_is_strict_where_it_should_be() {
    let lines = |s: &[&str]| s.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert!(line_matches("pid [..] · up [..]", "pid 42 · up 3s"));
    assert!(!line_matches("pid [..] · up", "pid 42 · up 3s"));
    assert!(!line_matches("42", "43"));
    assert!(lines_match(
        &lines(&["a", "...", "d"]),
        &["a", "b", "c", "d"]
    ));
    assert!(lines_match(&lines(&["a", "...", "d"]), &["a", "d"]));
    assert!(!lines_match(&lines(&["a", "d"]), &["a", "b", "d"]));
    assert!(!lines_match(&lines(&["a"]), &["a", "extra"]));
    assert!(!lines_match(&lines(&[]), &["unexpected output"]));
}

/// A server as an MCP client's configuration describes it.
#[derive(Debug)]
struct Launch {
    line: usize,
    command: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

/// The fenced blocks of `text` with their info string and first line number.
fn fenced_blocks(text: &str) -> Vec<(String, usize, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(info) = line.strip_prefix("```") {
            match open.take() {
                Some(block) => blocks.push(block),
                None => open = Some((info.trim().to_string(), i + 1, String::new())),
            }
        } else if let Some((_, _, body)) = open.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    blocks
}

/// Every server of the README's client configurations.
fn client_launches(readme: &str) -> Vec<Launch> {
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let env_of = |v: Option<&Value>| -> Vec<(String, String)> {
        v.and_then(Value::as_object)
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for (info, line, body) in fenced_blocks(readme) {
        let config: Value = match info.as_str() {
            "json" => serde_json::from_str(&body)
                .unwrap_or_else(|e| panic!("README.md:{line}: invalid JSON: {e}")),
            "toml" => {
                let t: toml::Value = toml::from_str(&body)
                    .unwrap_or_else(|e| panic!("README.md:{line}: invalid TOML: {e}"));
                serde_json::to_value(t).unwrap()
            }
            "sh" => {
                for (k, l) in body.lines().enumerate() {
                    let Some(rest) = l.trim().strip_prefix("claude mcp add ") else {
                        continue;
                    };
                    if rest.contains("--transport http") {
                        // An HTTP endpoint, not a command: `readme_http_client_line_works`.
                        continue;
                    }
                    let (opts, cmd) = rest.split_once(" -- ").expect("`--` before the command");
                    let words: Vec<&str> = opts.split_whitespace().collect();
                    let env = words
                        .windows(2)
                        .filter(|w| w[0] == "-e" || w[0] == "--env")
                        .filter_map(|w| w[1].split_once('='))
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    let mut cmd = cmd.split_whitespace().map(str::to_string);
                    out.push(Launch {
                        line: line + 1 + k,
                        command: cmd.next().unwrap(),
                        args: cmd.collect(),
                        env,
                    });
                }
                continue;
            }
            _ => continue,
        };
        let servers = ["mcpServers", "servers", "mcp_servers"]
            .iter()
            .find_map(|k| config.get(*k))
            .and_then(Value::as_object);
        for (_, server) in servers.into_iter().flatten() {
            out.push(Launch {
                line,
                command: server["command"].as_str().expect("a command").to_string(),
                args: strings(server.get("args")),
                env: env_of(server.get("env")),
            });
        }
    }
    out
}

/// Launch `l` as an MCP client would, in a fresh root; the replies to `initialize` and to
/// a `shoal_exec` of `src`.
fn launch_and_call(l: &Launch, src: &str) -> (Value, Value) {
    assert!(
        l.command == "shoal" || l.command.ends_with("/shoal"),
        "README.md:{}: launches {} instead of shoal",
        l.line,
        l.command
    );
    let root = Root::new();
    let mut cmd = Command::new(BIN);
    for (k, v) in root.command().get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    for (k, v) in &l.env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .args(&l.args)
        .current_dir(root.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the configured command");
    let mut stdin = child.stdin.take().unwrap();
    let frames = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "readme", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "shoal_exec", "arguments": {"src": src}}}),
    ];
    for f in &frames {
        writeln!(stdin, "{f}").unwrap();
    }
    stdin.flush().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (mut init, mut exec) = (Value::Null, Value::Null);
    while init.is_null() || exec.is_null() {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("README.md:{}: no answer from {l:?}", l.line));
        let v: Value = serde_json::from_str(&line).expect("a JSON frame");
        match v["id"].as_i64() {
            Some(1) => init = v,
            Some(2) => exec = v,
            _ => {}
        }
    }
    drop(stdin);
    let status = crate::common::wait_timeout(&mut child, Duration::from_secs(30));
    for pid in daemons_on(&root.path().join("run/shoal/shoal.sock")) {
        kill_pid(pid);
    }
    assert!(
        status.is_some_and(|s| s.success()),
        "README.md:{}: shoal mcp did not exit cleanly when its client closed stdin",
        l.line
    );
    (init, exec)
}

#[test]
fn readme_client_configs_launch_shoal_mcp_with_their_env() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let launches = client_launches(&readme);
    assert!(
        launches.len() >= 5,
        "too few client configurations found: {launches:?}"
    );
    for l in &launches {
        let expect_env = l.env.first().cloned();
        let src = match &expect_env {
            Some((k, _)) => format!("env.{k}"),
            None => "6 * 7".to_string(),
        };
        let (init, exec) = launch_and_call(l, &src);
        assert_eq!(
            init["result"]["serverInfo"]["name"],
            json!("shoal"),
            "README.md:{}: {init}",
            l.line
        );
        let text = exec["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        let want = expect_env.map_or("42".to_string(), |(_, v)| v);
        assert_eq!(text, want, "README.md:{}: {exec}", l.line);
    }
}

/// The README's `claude mcp add --transport http` line, as Claude Code would use it: its
/// URL (on the port a test daemon got) and its header, with the token its `$(...)` makes.
#[test]
fn readme_http_client_line_works() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("claude mcp add --transport http "))
        .expect("an HTTP client line");
    let words: Vec<&str> = line.split_whitespace().collect();
    let url = words
        .iter()
        .find(|w| w.starts_with("http://"))
        .expect("a URL");
    let header = line
        .split_once("--header \"")
        .and_then(|(_, h)| h.strip_suffix('"'))
        .expect("a --header");
    let cmd = header
        .split_once("$(")
        .and_then(|(_, c)| c.strip_suffix(')'))
        .expect("a token command");
    assert_eq!(cmd, "shoal token create --local");
    let s = crate::http_client::serve("");
    let port = url
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next())
        .unwrap();
    let url = url.replace(port, s.addr.rsplit(':').next().unwrap());
    let (code, out, err) = crate::common::run(&s.root, &["token", "create", "--local"], &[]);
    assert_eq!(code, 0, "{err}");
    let header = header.replace(&format!("$({cmd})"), out.trim());
    let (name, value) = header.split_once(": ").unwrap();
    let agent = ureq::agent();
    let post = |body: Value, sid: Option<&str>| {
        let mut h = vec![
            (name, value),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(sid) = sid {
            h.push(("Mcp-Session-Id", sid));
        }
        crate::http_client::request(&agent, "POST", &url, &h, Some(&body.to_string()))
    };
    let a = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "claude-code", "version": "2"}}}),
        None,
    );
    assert_eq!(
        a.json()["result"]["serverInfo"]["name"],
        "shoal",
        "{}",
        a.body
    );
    let sid = a.header("mcp-session-id").expect("a session").to_string();
    let a = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "shoal_exec", "arguments": {"src": "6 * 7"}}}),
        Some(&sid),
    );
    assert_eq!(a.json()["result"]["content"][0]["text"], "42", "{}", a.body);
}

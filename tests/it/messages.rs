//! User-facing messages never show Rust names (`NotFound`, `Star`, a Debug
//! dump of an error): the source is grepped for message literals, and the
//! errors a program can reach are raised and read.

use std::path::Path;

use shoal_lang::{ExecError, Position, Session, SessionOptions};

/// A CamelCase word (`NotFound`, `RParen`, `StarEq`): the shape of a Rust
/// type or variant name.
fn camel_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        let b = word.as_bytes();
        if b.len() < 3 || !b[0].is_ascii_uppercase() || !b[1].is_ascii_lowercase() {
            continue;
        }
        if b[1..].iter().any(u8::is_ascii_uppercase) {
            out.push(word.to_string());
        }
    }
    out
}

/// Words allowed in messages: the one token name the conformance corpus pins
/// verbatim ("expected expression, found RParen"), and units.
const ALLOWED: &[&str] = &["RParen", "MiB", "KiB", "GiB", "VmRSS"];

fn bad_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = camel_words(text);
    // "found Star", "found Eof": a token's variant name after "found".
    for (i, _) in text.match_indices("found ") {
        let rest = &text[i + 6..];
        let word: String = rest
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        if word.chars().next().is_some_and(|c| c.is_ascii_uppercase()) && !out.contains(&word) {
            out.push(word);
        }
    }
    out.retain(|w| !ALLOWED.contains(&w.as_str()));
    out
}

/// The string literals of one line of Rust (plain `"…"` only; escapes kept).
fn literals(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.char_indices().peekable();
    let mut cur: Option<String> = None;
    let mut prev = ' ';
    while let Some((_, c)) = chars.next() {
        match &mut cur {
            None => {
                // A char literal '"' is not a string.
                if c == '"' && prev != '\'' {
                    cur = Some(String::new());
                }
                if c == '/' && prev == '/' {
                    break; // a comment
                }
            }
            Some(s) => match c {
                '\\' => {
                    s.push(c);
                    if let Some((_, n)) = chars.next() {
                        s.push(n);
                    }
                }
                '"' => {
                    out.push(std::mem::take(s));
                    cur = None;
                }
                _ => s.push(c),
            },
        }
        prev = c;
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn message_literals_carry_no_rust_names() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("crates"), &mut files);
    assert!(files.len() > 50, "found {} files", files.len());
    let mut found = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy();
        if name.starts_with("tests")
            || name.ends_with("_tests.rs")
            || f.components().any(|c| c.as_os_str() == "tests")
            || name == "bench.rs"
        {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let mut in_debug_impl = false;
        let mut in_schema_name = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("#[cfg(test)]") {
                break; // unit tests below
            }
            // `impl Debug for …` blocks are for developers.
            if line.starts_with("impl") && line.contains("Debug for") {
                in_debug_impl = true;
            }
            if in_debug_impl {
                in_debug_impl = line != "}";
                continue;
            }
            // A JSON Schema definition's name is its type's (as schemars
            // names derived ones).
            if line.contains("fn schema_name(") {
                in_schema_name = true;
            }
            if in_schema_name {
                in_schema_name = line.trim() != "}";
                continue;
            }
            let t = line.trim_start();
            // Debug impls and log lines for developers are not messages.
            if t.starts_with("//")
                || t.starts_with("#[")
                || line.contains("debug_tuple")
                || line.contains("debug_struct")
                || line.contains("write!(f,")
                || line.contains("f.write_str(")
                || line.contains("tracing::")
            {
                continue;
            }
            for lit in literals(line) {
                let bad = bad_words(&lit);
                // A Debug dump of an error value is a Rust name too.
                let debug = ["{e:?}", "{err:?}", "{error:?}", "{kind:?}", "{self:?}"]
                    .iter()
                    .any(|d| lit.contains(d));
                if !bad.is_empty() || debug {
                    found.push(format!(
                        "{}:{}: {lit:?} {bad:?}",
                        f.strip_prefix(root).unwrap().display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "internal names in messages:\n{}",
        found.join("\n")
    );
}

/// Programs that reach the parser's and the evaluator's error paths.
const FAILING: &[&str] = &[
    // parse errors, one per kind of token that can be "found"
    "(",
    ")",
    "1 +",
    "1 + *",
    "let",
    "let = 3",
    "let x",
    "fn",
    "fn f",
    "fn f(",
    "match x {",
    "[1,",
    "[1 2]",
    "{a:",
    "{a: 1",
    "x.",
    "if",
    "if true",
    "if true {",
    "for",
    "for x",
    "for x in",
    "while",
    "1 ..",
    "=>",
    "->",
    "1 == == 2",
    "a ?? ",
    "!",
    "1 , 2",
    "1 : 2",
    "\"abc",
    "'abc",
    "\"\\q\"",
    "\"{1\"",
    "10KB",
    "5zz",
    "99:99",
    "0x",
    "1 & 2",
    "a | b",
    "x = ",
    "x += ",
    "echo (",
    "echo )",
    "echo ]",
    "echo [a",
    "ls > ",
    "cat <<",
    "echo 2>f",
    "try { 1 }",
    "try { 1 } catch",
    "match 1 { | 1 => 2 }",
    "with x: 1 { }",
    "export 5",
    "alias = ls",
    "use",
    "return return",
    ".x",
    "it",
    "π",
    "@",
    "~x",
    "`pwd`",
    "$HOME",
    "1 < 2 < 3",
    "f(a: 1, a: 2)",
    "[...a, b] = 1",
    "x.1.2",
    "1..2..3",
    "re\"(\"",
    "t\"x\"",
    "for f in *.txt; do echo $f; done",
    "if [ -f x ]; then echo; fi",
    "[[ -f x ]]",
    "while true; do :; done",
    "set -e",
    "export FOO=1",
    "FOO=1",
    "source a.sh",
    ". a.sh",
    "cd / && ls",
    "until x; do y; done",
    "alias ll='ls -la'",
    "unset X",
    "wait",
    // runtime errors
    "1 / 0",
    "x = 5",
    "let x = 1; x = 2",
    "undefined_name_zz",
    "[1][5]",
    "{a: 1}.b",
    "\"a\" + 1",
    "1 - \"a\"",
    "null.x",
    "head",
    "head nosuch.txt",
    "head -n",
    "cd /nonexistent",
    "cat nosuch",
    "stat",
    "mkdir",
    "rm nosuch",
    "cp a",
    "source nosuch.shl",
    "nosuchcommandzz",
    "assert false",
    "assert(1 == 2, \"boom\")",
    "9223372036854775807 + 1",
    "path(1)",
    "\"x\".frobnicate()",
    "[1, 2].map()",
    "json.parse(\"{\")",
    "\"abc\".parse_int()",
    "for x in 5 { }",
    "if 1 { }",
    "sleep -1",
    "exit x",
    "env a b",
    "ln a",
    "which",
    "(sh { exit 3 }).out",
    "^false",
    "let s = (1..3).stream(); s.collect(); s.collect()",
    "env.X += 1",
    "fn f() { cd / }\nf()",
    "[1, 2, 3].reduce()",
    "{a: 1}.get(1)",
    "1kb + 1s",
    "now() + 1",
    "\"é\".bytes().str()",
    "match 1 { x if x => 1 }",
    "save",
    "open",
    "run",
    "popd",
    "pushd",
    "cd -",
    "j zzzz_nothing",
    "1.5 % 0",
    "[1].first(\"a\")",
    "\"a\".split()",
    "range(1)",
    "glob(1)",
    "regex(\"(\")",
    "(1..).take(\"x\")",
    "os.nothing",
    "config.x.y",
    "secret.get(1)",
    "channel(1)",
];

#[test]
fn reachable_errors_have_plain_messages() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.sh"), "X=1\n").unwrap();
    let mut s = Session::new(SessionOptions {
        cwd: dir.path().to_path_buf(),
        env: vec![
            ("HOME".into(), dir.path().to_string_lossy().into_owned()),
            ("PATH".into(), "/usr/bin:/bin".into()),
        ],
        ..SessionOptions::default()
    });
    let mut found = Vec::new();
    let mut errors = 0;
    for src in FAILING {
        let (msg, hint) = match s.exec(src, Position::Stmt) {
            Ok(_) => continue,
            Err(ExecError::Parse(e)) => (e.msg, e.hint),
            Err(ExecError::Raised(e)) => (e.msg, e.hint),
        };
        errors += 1;
        let mut bad = bad_words(&msg);
        bad.extend(hint.as_deref().map(bad_words).unwrap_or_default());
        // OS error numbers are noise for a reader.
        if msg.contains("(os error") {
            bad.push("(os error N)".into());
        }
        if !bad.is_empty() {
            found.push(format!("{src:?}: {msg:?} / {hint:?}: {bad:?}"));
        }
        // Warnings are messages too.
        for w in s.take_warnings() {
            let mut bad = bad_words(&w.message);
            bad.extend(bad_words(&w.hint));
            if !bad.is_empty() {
                found.push(format!("{src:?}: warning {:?}: {bad:?}", w.message));
            }
        }
    }
    assert!(errors >= 140, "only {errors} of the programs failed");
    assert!(found.is_empty(), "internal names:\n{}", found.join("\n"));
}

#[test]
fn the_checker_sees_rust_names() {
    assert_eq!(bad_words("cannot assign `x`: NotFound"), ["NotFound"]);
    assert_eq!(bad_words("expected expression, found Star"), ["Star"]);
    assert!(bad_words("expected `{`, found `;`").is_empty());
    assert_eq!(bad_words("found StarEq"), ["StarEq"]);
    assert!(bad_words("expected expression, found RParen").is_empty());
    assert_eq!(
        literals(r#"err("a \"q\" b", 'x', "c")"#),
        [r#"a \"q\" b"#, "c"]
    );
}

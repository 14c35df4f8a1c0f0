//! Bash habits at the parser: teaching errors (message and the Shoal form in
//! the hint), the warnings of valid Shoal, and what stays untouched (bound
//! names shadow builtins, `^` forces, valid Shoal parses as before).

use std::collections::HashSet;

use super::{parse, parse_with_warnings, ParseContext};

fn teach(src: &str, ctx: &ParseContext) -> (String, String) {
    match parse(src, ctx) {
        Ok(_) => panic!("{src:?} parsed"),
        Err(e) => (e.msg, e.hint.unwrap_or_default()),
    }
}

#[test]
fn habits_teach_the_shoal_form() {
    let ctx = ParseContext::default();
    let cases: &[(&str, &str, &str)] = &[
        (
            "for f in *.txt; do echo $f; done",
            "bash syntax",
            "for f in glob(\"*.txt\")",
        ),
        (
            "for i in 1 2 3\ndo\necho $i\ndone",
            "bash syntax",
            "for i in",
        ),
        ("while true; do :; done", "bash syntax", "while n < 3 {"),
        ("until false; do :; done", "bash syntax", "while !cond"),
        ("if [ -f x ]; then echo y; fi", "bash syntax", "if cond {"),
        ("if test -f x; then echo y; fi", "bash syntax", "if cond {"),
        ("[[ -f x ]]", "`[[ … ]]`", "path(\"f.txt\").exists()"),
        ("[ -n \"x\" ] && echo y", "`[ … ]`", "x == \"y\""),
        ("set -e", "shell options", "(cmd).ok"),
        ("set -x", "shell options", "journal"),
        ("export FOO=1", "after `export`", "env.FOO = \"value\""),
        ("FOO=1", "sets nothing", "env.FOO = \"1\""),
        ("FOO=\"a b\"", "sets nothing", "env.FOO = \"a b\""),
        (
            "source ./env.sh",
            "shell script",
            "sh { source ./env.sh; cmd }",
        ),
        ("source ~/.bashrc", "shell script", "sh {"),
        (". ./env.sh", "(source)", "sh { . ./env.sh; cmd }"),
        ("cd sub && ls", "`cd` yields a path", "cd sub; …"),
        (
            "pushd sub || exit 1",
            "yields a list of paths",
            "pushd sub; …",
        ),
        ("alias ll='ls -la'", "bash syntax", "alias ll = ls -la"),
        ("unset FOO", "bash syntax", "env.NAME"),
        ("wait", "job control", "t.await()"),
        ("local x=1", "declarations", "let name = …"),
        ("echo $(ls)", "no sigil", "(ls).out"),
        ("echo $?", "no sigil", ".status"),
    ];
    let mut bad = Vec::new();
    for (src, msg, hint) in cases {
        let (m, h) = teach(src, &ctx);
        if !m.contains(msg) || !h.contains(hint) {
            bad.push(format!("{src:?}: {m:?} / {h:?}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn habits_only_where_bash_is_meant() {
    let ctx = ParseContext::default();
    // Valid Shoal shapes near the habits parse as before.
    for src in [
        "for x in [1, 2] { x }",
        "while false { }",
        "if true { 1 } else { 2 }",
        "[1, 2, 3]",
        "[[1], [2]]",
        "var FOO = 1; FOO=2",
        "FOO=1 env FOO",
        "export let a = 1",
        "source lib.shl",
        "cd sub; ls",
        "^cd sub && ls",
        "alias ll = ls -la",
        "echo 'for x in y; do'",
        "sh { for f in *; do echo $f; done }",
    ] {
        if let Err(e) = parse(src, &ctx) {
            panic!("{src:?}: {e:?}");
        }
    }
    // A name bound by earlier input is not the builtin.
    let bound = ParseContext {
        value_bound: HashSet::new(),
        bound: ["cd".to_string(), "set".to_string(), "FOO".to_string()].into(),
    };
    for src in ["cd sub && ls", "set -e", "FOO=1"] {
        if let Err(e) = parse(src, &bound) {
            panic!("{src:?} with a bound name: {e:?}");
        }
    }
    // A function of the same program shadows too.
    parse("fn set(x) { x }\nset -e", &ctx).expect("user fn named set");
}

#[test]
fn warnings_of_valid_shoal() {
    let ctx = ParseContext::default();
    let codes = |src: &str| -> Vec<&'static str> {
        let (_, ws) = parse_with_warnings(src, &ctx).unwrap_or_else(|e| panic!("{src:?}: {e:?}"));
        ws.iter().map(|w| w.code).collect()
    };
    assert_eq!(codes("echo \"$HOME\""), ["dollar_in_string"]);
    assert_eq!(codes("\"${x}\""), ["dollar_in_string"]);
    assert_eq!(
        codes("\"\"\"\n  $A and $B\n  \"\"\""),
        ["dollar_in_string", "dollar_in_string"]
    );
    assert!(
        codes("'$HOME'").is_empty(),
        "raw strings are literal by design"
    );
    assert!(codes("\"price: $5\"").is_empty(), "not a name");
    assert!(
        codes("sh { echo \"$HOME\" }").is_empty(),
        "shell text is the shell's"
    );
    assert_eq!(codes("echo a && echo b"), ["builtin_in_chain"]);
    assert_eq!(codes("cat f || echo no"), ["builtin_in_chain"]);
    assert_eq!(codes("^true && echo a && echo b"), ["builtin_in_chain"]);
    assert!(codes("^true && ^true").is_empty());
    assert!(
        codes("git add x && git commit").is_empty(),
        "externals chain on outcomes"
    );
    // The span covers `$NAME`; the hint names the Shoal form.
    let (_, ws) = parse_with_warnings("echo \"x $HOME y\"", &ctx).unwrap();
    assert_eq!((ws[0].span.start, ws[0].span.end), (8, 13));
    assert!(ws[0].hint.contains("{env.HOME}"), "{:?}", ws[0]);
    // One warning per habit even though strings are lexed more than once.
    assert_eq!(codes("(echo \"$A\")").len(), 1);
}

//! Table-driven parser cases, one test per feature area, plus the property
//! tests (no panics on random bytes or random token soups, bounded nesting).

use super::tests::{check, check_err, render, render_ctx};
use super::{parse, ParseContext};

#[test]
fn literals_numbers() {
    check(&[
        ("42", "42"),
        ("1_000_000", "1000000"),
        ("0xFF", "255"),
        ("0xFF_FF", "65535"),
        ("0b1010", "10"),
        ("0o17", "15"),
        ("0X1f", "31"),
        ("3.14", "3.14f"),
        ("1e9", "1000000000.0f"),
        ("2.5e-3", "0.0025f"),
        ("0.5", "0.5f"),
        ("9223372036854775807", "9223372036854775807"),
        ("-7", "(neg 7)"),
        ("1..5", "(.. 1 5)"),
        ("1..=5", "(..= 1 5)"),
        ("5.len()", "(.len() 5)"),
        ("-5.abs()", "(neg (.abs() 5))"),
    ]);
}

#[test]
fn literals_units() {
    check(&[
        ("237b", "237B"),
        ("0b", "0B"),
        ("1kb", "1000B"),
        ("1.5gb", "1500000000B"),
        ("2tb", "2000000000000B"),
        ("1kib", "1024B"),
        ("4mib", "4194304B"),
        ("1gib", "1073741824B"),
        ("1tib", "1099511627776B"),
        ("0.5kb", "500B"),
        ("1.0005kb", "1001B"),
        ("250ms", "250000000ns"),
        ("0s", "0ns"),
        ("90s", "90000000000ns"),
        ("1.5h", "5400000000000ns"),
        ("30d", "2592000000000000ns"),
        ("2w", "1209600000000000ns"),
        ("3us", "3000ns"),
        ("7ns", "7ns"),
        ("1m", "60000000000ns"),
        ("-90s", "(neg 90000000000ns)"),
        ("999999w", "9223372036854775807ns"),
    ]);
}

#[test]
fn literals_time() {
    check(&[
        ("10:00am", "time(36000)"),
        ("23:15", "time(83700)"),
        ("10:30:15pm", "time(81015)"),
        ("9:05am", "time(32700)"),
        ("0:00", "time(0)"),
        ("12am", "ERR: unknown unit `am` on numeric literal"),
        ("12:00am", "time(0)"),
        ("12:30PM", "time(45000)"),
    ]);
}

#[test]
fn literals_strings() {
    check(&[
        (r#""hi""#, r#""hi""#),
        (r#""a\nb\t\"\\\{\}\0\r""#, r#""a\nb\t\"\\{}\0\r""#),
        (r#""\u{1F980}""#, "\"🦀\""),
        ("'raw \\n {x}'", r#""raw \\n {x}""#),
        (r#""a {x} b""#, r#"(interp "a " x " b")"#),
        (r#""{1 + 2}""#, "(interp (+ 1 2))"),
        (r#""{ {a: 1}.a }""#, "(interp (.a {a:1}))"),
        (r#""x{"y"}z""#, r#"(interp "x" "y" "z")"#),
        (
            "\"\"\"\n    hello\n    world\n    \"\"\"",
            r#""hello\nworld""#,
        ),
        ("'''\n  a\n    b\n  '''", r#""a\n  b""#),
        ("\"\"\"\n  v={x}\n  \"\"\"", r#"(interp "v=" x)"#),
        (r#"re"\d+""#, r#"re"\\d+""#),
        (r#"t"2026-07-09T14:00Z""#, r#"dt"2026-07-09T14:00Z""#),
        (r#"t"2026-07-09".year"#, r#"(.year dt"2026-07-09")"#),
        ("\"é{1}ü\"", "(interp \"é\" 1 \"ü\")"),
    ]);
}

#[test]
fn precedence() {
    check(&[
        ("2 + 3 * 4", "(+ 2 (* 3 4))"),
        ("(2 + 3) * 4", "(* (grp (+ 2 3)) 4)"),
        ("1 - 2 - 3", "(- (- 1 2) 3)"),
        ("1 ?? b || c && d", "(?? 1 (|| b (&& c d)))"),
        ("1 + 2 == 3", "(== (+ 1 2) 3)"),
        ("1 + 1..5", "(.. (+ 1 1) 5)"),
        ("!a && b", "(&& (! a) b)"),
        ("1 in [1, 2]", "(in 1 [1 2])"),
        ("-(2 + 3)", "(neg (grp (+ 2 3)))"),
        ("10 % 3 / 2", "(/ (% 10 3) 2)"),
        ("1 +\n 2", "(+ 1 2)"),
        ("\"a\" + 1 catch \"f\"", r#"(catch (+ "a" 1) _ "f")"#),
        (
            "(1 / 0) catch err { err.msg }",
            "(catch (grp (/ 1 0)) err (block (.msg err)))",
        ),
        ("f(1)\ncatch 5", "(catch (call f 1) _ 5)"),
        ("x?.a?.b(1)", "(?.b() (?.a x) 1)"),
        ("a[0][1]", "(idx (idx a 0) 1)"),
        ("f(1)(2)", "(call (call f 1) 2)"),
        (
            "[1]\n  .map(x => x)\n  .len()",
            "(.len() (.map() [1] (fn (x) x)))",
        ),
    ]);
}

#[test]
fn collections_and_blocks() {
    check(&[
        ("[1, 2,]", "[1 2]"),
        ("[\n1,\n2\n]", "[1 2]"),
        ("{}", "{}"),
        ("{a: 1, \"b-c\": 2,}", "{a:1 b-c:2}"),
        ("{\n a: 1\n b: 2\n}", "{a:1 b:2}"),
        ("{ 1 }", "(block 1)"),
        ("{ let x = 1; x }", "(block (let x 1) x)"),
        ("{a: 1}.a", "(.a {a:1})"),
        // field shorthand: `{ probe, answer: 42 }`
        ("{ probe, answer: 42 }", "{probe:probe answer:42}"),
        ("{answer: 42, probe}", "{answer:42 probe:probe}"),
        ("{a: 1,\n probe\n}", "{a:1 probe:probe}"),
        ("{ probe }", "(block (cmd probe))"),
    ]);
}

#[test]
fn lambdas_and_calls() {
    check(&[
        ("let y = 1\ny => y + 1", "(let y 1) ; (fn (y) (+ y 1))"),
        ("let f = x => x", "(let f (fn (x) x))"),
        ("(a, b) => a + b", "(fn (a b) (+ a b))"),
        ("(a: int) => { a }", "(fn (a:int) (block a))"),
        ("() => 42", "(fn () 42)"),
        ("() => {a: 1}", "(fn () {a:1})"),
        (
            "((a, b) => a + b)(2, 3)",
            "(call (grp (fn (a b) (+ a b))) 2 3)",
        ),
        ("(() => 42)()", "(call (grp (fn () 42)))"),
        (
            "xs.where(.a > 1)",
            "(.where() xs (fn ($item) (> (.a $item) 1)))",
        ),
        ("xs.map(.len())", "(.map() xs (fn ($item) (.len() $item)))"),
        ("xs.sort(.k)", "(.sort() xs (fn ($item) (.k $item)))"),
        ("f(a, b: 2,)", "(call f a b=2)"),
        (
            "xs.sort_by(key: .name)",
            "(.sort_by() xs key=(fn ($item) (.name $item)))",
        ),
        (
            "xs.map(.a?.b ?? 0)",
            "(.map() xs (fn ($item) (?? (?.b (.a $item)) 0)))",
        ),
        ("xs.map(x => .a)", "ERR: a leading `.` has no receiver here"),
        ("f(\n 1,\n 2\n)", "(call f 1 2)"),
        ("retry(3) { 1 }", "(call retry 3 (fn () (block 1)))"),
        ("xs.each { 1 }", "(.each() xs (fn () (block 1)))"),
        ("xs.m(1) { 2 }", "(.m() xs 1 (fn () (block 2)))"),
        (
            "glob(\"*.rs\", hidden: true)",
            "(call glob \"*.rs\" hidden=true)",
        ),
        (
            "[1, 2, 3].reduce(0, (acc, x) => { acc + x })",
            "(.reduce() [1 2 3] 0 (fn (acc x) (block (+ acc x))))",
        ),
    ]);
}

#[test]
fn statements() {
    check(&[
        ("let x = 1", "(let x 1)"),
        ("var x: int = 1", "(var x:int 1)"),
        ("let _ = 5", "(let _ 5)"),
        ("let xs: list<int>? = []", "(let xs:list<int>? [])"),
        ("export let a = 1", "(export let a 1)"),
        ("var x = 1; x += 2", "(var x 1) ; (+= x 2)"),
        ("x = 5", "(= x 5)"),
        // A declared name: an assignment (undeclared, it is a teaching error).
        ("var FOO = 1; FOO=bar", "(var FOO 1) ; (= FOO bar)"),
        ("x -= 1; x *= 2; x /= 3", "(-= x 1) ; (*= x 2) ; (/= x 3)"),
        ("env.FOO = \"1\"", "(= env.FOO \"1\")"),
        (
            "fn add(a, b: int = 2, ...rest: str) -> int { a + b }",
            "(defn add (a b:int=2 ...rest)->int (block (+ a b)))",
        ),
        ("export fn f() { }", "(export defn f () (block))"),
        ("for x in xs { x }", "(for x xs (block x))"),
        (
            "for x in 1..3 { break }",
            "(for x (.. 1 3) (block (break)))",
        ),
        (
            "while x < 3 { continue }",
            "(while (< x 3) (block (continue)))",
        ),
        ("fn f() { return }", "(defn f () (block (return)))"),
        ("fn f() { return 1 }", "(defn f () (block (return 1)))"),
        ("use ./lib/mod.shl", "(use ./lib/mod.shl)"),
        ("use ./m.shl\nm.f()", "(use ./m.shl) ; (.f() m)"),
        ("alias gs = git status", "(alias gs (cmd git status))"),
        ("\n\n1;;2\n", "1 ; 2"),
        ("1 # comment\n2", "1 ; 2"),
        ("1 + \\\n 2", "(+ 1 2)"),
    ]);
}

#[test]
fn control_flow() {
    check(&[
        ("if a { 1 }", "(if a (block 1))"),
        ("if a { 1 } else { 2 }", "(if a (block 1) (block 2))"),
        (
            "if a { 1 }\nelse if b { 2 }\nelse { 3 }",
            "(if a (block 1) (if b (block 2) (block 3)))",
        ),
        ("if xs.is_empty() { 1 }", "(if (.is_empty() xs) (block 1))"),
        ("if r.ok { 1 }", "(if (.ok r) (block 1))"),
        ("try { 1 } catch e { e }", "(try (block 1) e (block e))"),
        ("try { 1 }\ncatch { 2 }", "(try (block 1) _ (block 2))"),
        (
            "with cwd: \"/tmp\", env: {A: \"1\"} { pwd }",
            "(with cwd=\"/tmp\" env={A:\"1\"} (block (cmd pwd)))",
        ),
        ("spawn { sleep 1 }", "(spawn (block (cmd sleep 1)))"),
        ("match x { 1 => 2 }", "(match x (1 => 2))"),
    ]);
}

#[test]
fn match_patterns() {
    check(&[
        (
            "match 5 { 0..3 => \"low\"; 3..=10 => \"mid\"; _ => \"high\" }",
            "(match 5 (0..3 => \"low\") (3..=10 => \"mid\") (_ => \"high\"))",
        ),
        (
            "match v { str s => s, int _ => 0 }",
            "(match v ((str s) => s) ((int _) => 0))",
        ),
        (
            "match r { {name, age: a} => name + a }",
            "(match r ({name age:a} => (+ name a)))",
        ),
        (
            "match r { {point: {x, y}} => x + y }",
            "(match r ({point:{x y}} => (+ x y)))",
        ),
        (
            "match l { [a, ...rest] => rest; [] => 0; [_, ...] => 1 }",
            "(match l ([a ...rest] => rest) ([] => 0) ([_ ...] => 1))",
        ),
        (
            "match n { 1 | 2 | 3 => \"s\"; n if n > 5 => \"b\" }",
            "(match n (1|2|3 => \"s\") (n if (> n 5) => \"b\"))",
        ),
        (
            "match x { true => 1\n false => 0 }",
            "(match x (true => 1) (false => 0))",
        ),
        (
            "match x { null => 1; \"a\" => { 2 } }",
            "(match x (null => 1) (\"a\" => (block 2)))",
        ),
        ("match x { int => 1 }", "(match x (int => 1))"),
        (
            "let flag = true\nmatch 5 { n if flag => 1; _ => 0 }",
            "(let flag true) ; (match 5 (n if flag => 1) (_ => 0))",
        ),
        ("match {a: 1} { {a} => a }", "(match {a:1} ({a} => a))"),
        ("match x { y => y.z }", "(match x (y => (.z y)))"),
    ]);
}

#[test]
fn dispatch() {
    check(&[
        ("ls", "(cmd ls)"),
        ("ls -la src", "(cmd ls -la src)"),
        ("/bin/echo hi", "(cmd p:/bin/echo hi)"),
        ("./run.sh", "(cmd p:./run.sh)"),
        ("~", "(cmd p:~)"),
        ("^git status", "(cmd ^ git status)"),
        ("ls.len()", "(.len() ls)"),
        ("pwd.name", "(.name pwd)"),
        ("run(\"x\")", "(call run \"x\")"),
        ("let ls = 5\nls", "(let ls 5) ; ls"),
        ("let x = 1\nx + 1", "(let x 1) ; (+ x 1)"),
        ("path", "path"),
        ("fn f() { 1 }\nf 2", "(defn f () (block 1)) ; (cmd f 2)"),
        (
            "let f = 1\nfn f() { 1 }\nf",
            "(let f 1) ; (defn f () (block 1)) ; (cmd f)",
        ),
        ("x => x + 1", "(cmd x = + 1 >x)"),
        ("FOO=1 BAR=x env", "(cmd FOO=1 BAR=x env)"),
        ("FOO=(1 + 2) cmd", "(cmd FOO=(grp (+ 1 2)) cmd)"),
        ("sh { printf hi }.out", "(.out (sh! \"printf hi\"))"),
        ("python3'''print(1)'''", "(python3! \"print(1)\")"),
        ("sh { echo \"}\" }", "(sh! \"echo \\\"}\\\"\")"),
        (
            "bash {\n  if true; then { echo a; }; fi\n}",
            "(bash! \"if true; then { echo a; }; fi\")",
        ),
        ("true && echo hi", "(&& true (cmd echo hi))"),
        (
            "ls && echo ok || echo no",
            "(|| (&& (cmd ls) (cmd echo ok)) (cmd echo no))",
        ),
        ("[1].len()", "(.len() [1])"),
        ("\"a\".upper()", "(.upper() \"a\")"),
        ("now", "(cmd now)"),
        ("now()", "(call now)"),
        ("fn f(x) { x }", "(defn f (x) (block x))"),
        ("fn f(x) { x.y }", "(defn f (x) (block (.y x)))"),
        ("fn f(ls) { ls }", "(defn f (ls) (block ls))"),
        ("for ls in [1] { ls }", "(for ls [1] (block ls))"),
        ("match 1 { ls => ls }", "(match 1 (ls => ls))"),
    ]);
    let mut ctx = ParseContext::default();
    ctx.value_bound.insert("ls".into());
    assert_eq!(render_ctx("ls", &ctx), "ls");
    assert_eq!(render_ctx("ls - 1", &ctx), "(- ls 1)");
}

#[test]
fn paren_substitution() {
    check(&[
        ("(echo hi)", "(grp (cmd echo hi))"),
        ("(ls src).len()", "(.len() (grp (cmd ls src)))"),
        ("(git status --short)", "(grp (cmd git status --short))"),
        ("let x = 1\n(x)", "(let x 1) ; (grp x)"),
        ("(^false).ok", "(.ok (grp (cmd ^ false)))"),
        ("(now)", "(grp (cmd now))"),
        ("(f(1))", "(grp (call f 1))"),
        ("(sh { exit 3 }).status", "(.status (grp (sh! \"exit 3\")))"),
        ("(./x.sh a)", "(grp (cmd p:./x.sh a))"),
        ("(1)", "(grp 1)"),
        ("(\n1 +\n2\n)", "(grp (+ 1 2))"),
        ("(1\n + 2)", "(grp (+ 1 2))"),
        (
            "let a = 1\nlet t = (a\n  + 2\n  * 3)",
            "(let a 1) ; (let t (grp (+ a (* 2 3))))",
        ),
        ("[1\n + 2, 3\n]", "[(+ 1 2) 3]"),
        ("f(1\n - 2)", "(call f (- 1 2))"),
        (
            "(match 1 { 1 => 2\n _ => 3 })",
            "(grp (match 1 (1 => 2) (_ => 3)))",
        ),
        ("({\n a: 1\n b: 2\n})", "(grp {a:1 b:2})"),
        ("f({ let x = 1\n x })", "(call f (block (let x 1) x))"),
    ]);
}

#[test]
fn commands() {
    check(&[
        ("echo a b", "(cmd echo a b)"),
        ("echo -- - -n", "(cmd echo <--> <-> -n)"),
        ("ls *.rs src/[ab].txt", "(cmd ls g:*.rs g:src/[ab].txt)"),
        ("cat ~/x ./y ../z /w", "(cmd cat p:~/x p:./y p:../z p:/w)"),
        (
            "deploy --dry-run --to=prod --x= y --n=-5",
            "(cmd deploy --dry_run --to=prod --x=y --n=-5)",
        ),
        ("f --name=\"a b\"", "(cmd f --name=\"a b\")"),
        ("echo \"x {1}\" 'y'", "(cmd echo (interp \"x \" 1) \"y\")"),
        ("echo (1 + 2)", "(cmd echo (grp (+ 1 2)))"),
        ("echo (ls src)", "(cmd echo (grp (cmd ls src)))"),
        ("echo hi > out.txt", "(cmd echo hi >out.txt)"),
        ("echo hi >> log", "(cmd echo hi >>log)"),
        ("sort < in.txt", "(cmd sort <in.txt)"),
        ("echo 2 > f", "(cmd echo 2 >f)"),
        ("sleep 1 &", "(cmd sleep 1 &)"),
        ("sh { echo hi } &", "((sh! \"echo hi\") &)"),
        ("sh { sleep 1 } &\n1", "((sh! \"sleep 1\") &) ; 1"),
        ("(sleep 1) &", "((grp (cmd sleep 1)) &)"),
        ("let t = sh { x } &", "(let t ((sh! \"x\") &))"),
        ("let t = (sleep 1 &)", "(let t (grp (cmd sleep 1 &)))"),
        ("retry 3 { x }", "(cmd retry 3 (block (cmd x)))"),
        ("echo ver#2 # comment", "(cmd echo ver#2)"),
        ("echo a=b", "(cmd echo a=b)"),
        ("echo a; echo b", "(cmd echo a) ; (cmd echo b)"),
        ("echo a \\\n  b", "(cmd echo a b)"),
        ("{ echo a }", "(block (cmd echo a))"),
        ("echo π", "(cmd echo π)"),
        (
            "\"b\\na\".feed(sort -r)",
            "(.feed() \"b\\na\" (cmd sort -r))",
        ),
        ("x.feed(grep \"foo\")", "(.feed() x (cmd grep \"foo\"))"),
        (
            "\"a\".feed(sh { sort -r })",
            "(.feed() \"a\" (sh! \"sort -r\"))",
        ),
        (
            "let d = \"x\"\n\"a\".feed(d)",
            "(let d \"x\") ; (.feed() \"a\" d)",
        ),
        ("git log --oneline -5", "(cmd git log --oneline -5)"),
        ("echo @x", "(cmd echo @x)"),
    ]);
}

#[test]
fn teaching_errors() {
    check_err(&[
        ("ls | wc", "no pipe operator"),
        ("1 | 2", "no pipe operator"),
        ("(1 | 2)", "no pipe operator"),
        ("let a = 1 | 2", "no pipe operator"),
        (
            "[1].map(|x| x * 2)",
            "shoal writes this function `x => ...`, not `|x| ...`",
        ),
        (
            "[1].reduce(| acc , x | acc + x)",
            "`(acc, x) => ...`, not `|acc, x| ...`",
        ),
        ("[1].map(|1| 2)", "no pipe operator"),
        ("$HOME", "shoal variables have no sigil"),
        ("echo $HOME", "no sigil"),
        ("`pwd`", "backtick is not shoal syntax"),
        ("echo `pwd`", "backtick"),
        ("true & false", "not an operator"),
        ("cat << EOF", "no heredocs"),
        ("cat <<< hi", "no here-strings"),
        ("ls 2> /dev/null", "no fd-numbered redirects"),
        ("ls 2>> log.txt", "no fd-numbered redirects"),
        ("ls >&2", "no fd-numbered redirects"),
        ("ls &> out.txt", "no stream-merging redirect"),
        ("it", "REPL-only"),
        ("out", "REPL-only"),
        ("it.foo", "REPL-only"),
        ("out.foo", "REPL-only"),
        ("(it)", "REPL-only"),
        ("it + 1", "REPL-only"),
        ("let x = out", "REPL-only"),
        ("1 < 2 < 3", "comparison operators do not chain"),
        ("1 <= 2 < 3", "do not chain"),
        ("1 == 1 == 1", "do not chain"),
        (".foo", "a leading `.` has no receiver here"),
        ("[{a: 1}].map({x: .a})", "leading `.` has no receiver"),
        (
            "git log.where(.author == \"x\")",
            "a leading `.` has no receiver here",
        ),
        ("ls somedir.len()", "expected expression, found RParen"),
        ("git log.len()", "expected expression, found RParen"),
        ("echo ]", "unexpected `]`"),
        ("]", "unexpected `]`"),
        ("π", "unexpected character"),
        ("@x", "unexpected character"),
        ("~x", "unexpected character"),
        ("\"line1\nline2\"", "unterminated string (newline)"),
        ("'line1\nline2'", "unterminated string (newline)"),
        ("\"abc", "unterminated string"),
        ("sh { echo hi", "unbalanced braces"),
        ("zzz [a, b]", "cannot start a command argument"),
        ("-9223372036854775808", "integer literal out of range"),
        ("99999999999999999999", "integer literal out of range"),
        ("0xFFFFFFFFFFFFFFFFF", "integer literal out of range"),
        ("\"\\q\"", "unknown escape `\\q`"),
        ("10KB", "unit `KB` must be lowercase"),
        ("5Ms", "must be lowercase"),
        ("10xyz", "unknown unit `xyz`"),
        ("25:00", "invalid time literal"),
        ("13:00pm", "invalid time literal"),
        ("10:60", "invalid time literal"),
        ("1 2", "expected newline or `;` between statements"),
        (
            "let x = [1]\nx[0] = 1",
            "expected newline or `;` between statements",
        ),
        (
            "let r = {a: 1}\nr.a = 2",
            "expected newline or `;` between statements",
        ),
        (
            "match 1 { | 1 => 2 }",
            "unexpected `|` at the start of a match arm",
        ),
        ("\"a {1 + \"", "unterminated `{expr}` in string"),
        ("\"{x\"", "unterminated `{expr}` in string"),
        ("match [1] { [...a, b] => 1 }", "must be the last"),
        ("with foo: 1 { }", "unknown `with` key"),
        ("(", "expected expression, found end of input"),
        ("{", "expected `}`"),
        ("}", "unexpected `}`"),
        ("f(1", "expected `,` or `)`"),
        ("let = 1", "expected a name to bind"),
        ("\"{}\"", "exactly one expression"),
        ("\"{let x = 1}\"", "exactly one expression"),
        ("try { 1 }", "expected `catch`"),
        ("else { 1 }", "unexpected `else`"),
        ("match -1 { -1 => 1 }", "negative numbers"),
    ]);
}

#[test]
fn hints() {
    let ctx = ParseContext::default();
    for (src, hint) in [
        ("ls somedir.len()", "parentheses"),
        ("ls | wc", "feed"),
        ("$HOME", "env.HOME"),
        ("ls 2> /dev/null", "(cmd).err"),
        ("1 < 2 < 3", "&&"),
        ("10KB", "10kb"),
    ] {
        let e = parse(src, &ctx).expect_err(src);
        let h = e.hint.unwrap_or_default();
        assert!(h.contains(hint), "{src}: hint {h:?} lacks {hint:?}");
    }
}

#[test]
fn spans() {
    let p = parse("let x = 1 + 2\n  foo bar", &ParseContext::default()).expect("parses");
    assert_eq!((p.stmts[0].span.start, p.stmts[0].span.end), (0, 13));
    assert_eq!((p.stmts[1].span.start, p.stmts[1].span.end), (16, 23));
    let e = parse("1 +\n  $x", &ParseContext::default()).expect_err("fails");
    assert_eq!((e.span.start, e.span.end), (6, 7));
    assert!(e.hint.is_some());
    let p = parse("\"a {x}\"", &ParseContext::default()).expect("parses");
    if let crate::ast::StmtKind::Expr(e) = &p.stmts[0].kind {
        if let crate::ast::ExprKind::Interp(parts) = &e.kind {
            if let crate::ast::InterpPart::Expr(x) = &parts[1] {
                assert_eq!((x.span.start, x.span.end), (4, 5));
                return;
            }
        }
    }
    panic!("unexpected shape: {}", render("\"a {x}\""));
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let ctx = ParseContext::default();
    for open in [
        "(", "[", "{", "-", "!", "f(", "\"{", "if x {", "[[", "x => ",
    ] {
        let src = open.repeat(5000);
        assert!(parse(&src, &ctx).is_err(), "{open}");
    }
    let ok = format!("{}1{}", "(".repeat(40), ")".repeat(40));
    assert!(parse(&ok, &ctx).is_ok());
}

mod props {
    use super::super::{parse, ParseContext};
    use proptest::prelude::*;

    const TOKENS: &[&str] = &[
        "let ",
        "var ",
        "fn ",
        "if ",
        "else ",
        "match ",
        "for ",
        "in ",
        "while ",
        "try ",
        "catch ",
        "with ",
        "spawn ",
        "return ",
        "alias ",
        "use ",
        "export ",
        "x",
        "ls ",
        "sh ",
        "it",
        "true",
        "null",
        "1",
        "2.5",
        "1kb",
        "5s",
        "10:30am",
        "0x1F",
        "\"s\"",
        "\"{x}\"",
        "'r'",
        "\"\"\"",
        "re\"a\"",
        "t\"2026\"",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        ".",
        "..",
        "..=",
        "...",
        "?.",
        "?",
        "=>",
        "->",
        "+",
        "-",
        "*",
        "/",
        "%",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "=",
        "+=",
        "!",
        "&&",
        "||",
        "??",
        "|",
        "^",
        "&",
        ">>",
        "<<",
        "2>",
        "~/",
        "./a",
        "*.rs",
        "--flag",
        "-v",
        "$",
        "`",
        "#c",
        "\n",
        ";",
        " ",
        "\\\n",
        "_",
        "...rest",
        "π",
        "{a: 1}",
        "env.X = ",
        "A=1 ",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn never_panics_on_strings(s in "\\PC*") {
            let _ = parse(&s, &ParseContext::default());
        }

        #[test]
        fn never_panics_on_bytes(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let s = String::from_utf8_lossy(&b);
            let _ = parse(&s, &ParseContext::default());
        }

        #[test]
        fn never_panics_on_token_soup(ix in proptest::collection::vec(0..TOKENS.len(), 0..40)) {
            let s: String = ix.iter().map(|i| TOKENS[*i]).collect();
            let _ = parse(&s, &ParseContext::default());
        }
    }
}

//! Unit tests of the output parsers.

use super::*;
use shoal_value::render;

fn spec(p: &str, ty: &str) -> OutputSpec {
    OutputSpec {
        parser: Parser::from_name(p).expect("parser"),
        ty: Ty::parse(ty).expect("type"),
        select: vec![],
        keys: vec![],
        header: 1,
        render_text: false,
    }
}

#[test]
fn cols_join_overflow_into_last_column() {
    let s = spec(
        "cols",
        "table<{filesystem: str, size: size_kb, used: size_kb, avail: size_kb, use_pct: str, mounted: path}>",
    );
    let out = b"Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vda 100 40 60 40% /\ntmpfs 8 0 8 0% /mnt/my disk\n";
    let v = parse(&s, out).expect("parses");
    assert_eq!(
        render::inline(&v),
        r#"[{filesystem: "/dev/vda", size: 100KB, used: 40KB, avail: 60KB, use_pct: "40%", mounted: /}, {filesystem: "tmpfs", size: 8KB, used: 0B, avail: 8KB, use_pct: "0%", mounted: "/mnt/my disk"}]"#
            .replace("100KB", &render::inline(&Value::Size(102400)))
            .replace("40KB", &render::inline(&Value::Size(40960)))
            .replace("60KB", &render::inline(&Value::Size(61440)))
            .replace("8KB", &render::inline(&Value::Size(8192)))
            .replace("0B", &render::inline(&Value::Size(0)))
            .replace("mounted: /}", &format!("mounted: {}}}", render::inline(&Value::path("/"))))
            .replace("\"/mnt/my disk\"", &render::inline(&Value::path("/mnt/my disk")))
    );
    let e = parse(&s, b"h\n/dev/vda 100 x 60 40% /\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.msg.contains("`used`"), "{e:?}");
}

#[test]
fn cols2_splits_on_wide_gaps_and_falls_back() {
    let s = spec("cols2", "table<{a: str, b: int}>");
    let v = parse(&s, b"A  B\none word  7\n").expect("parses");
    assert_eq!(render::inline(&v), r#"[{a: "one word", b: 7}]"#);
    let s = spec("cols2", "table<{r: int, b: int, c: int}>");
    let v = parse(&s, b"h\n 1 2  3\n").expect("parses");
    assert_eq!(render::inline(&v), "[{r: 1, b: 2, c: 3}]");
}

#[test]
fn porcelain_v2_records() {
    let s = spec(
        "porcelain-v2",
        "table<{status: str, state: str, path: path, orig: path?}>",
    );
    let out = b"# branch.oid abc\n1 .M N... 100644 100644 100644 aa bb src/a.rs\n1 A. N... 000000 100644 100644 00 cc new file.txt\n2 R. N... 100644 100644 100644 aa aa R100 b.rs\ta.rs\nu UU N... 100644 100644 100644 100644 a b c conflict.txt\n? \"tab\\there\"\n! target\n";
    let v = parse(&s, out).expect("parses");
    let Value::Table(rows) = &v else { panic!() };
    let st: Vec<String> = rows.iter().map(|r| render::inline(&r["state"])).collect();
    assert_eq!(
        st,
        [
            "\"modified\"",
            "\"added\"",
            "\"renamed\"",
            "\"unmerged\"",
            "\"untracked\"",
            "\"ignored\""
        ]
    );
    assert_eq!(
        render::inline(&rows[1]["path"]),
        render::inline(&Value::path("new file.txt"))
    );
    assert_eq!(
        render::inline(&rows[2]["orig"]),
        render::inline(&Value::path("a.rs"))
    );
    assert_eq!(
        render::inline(&rows[4]["path"]),
        render::inline(&Value::path("tab\there"))
    );
    let e = parse(&s, b"1 .M N... 100644 src\n").unwrap_err();
    assert_eq!(e.line, 1);
}

#[test]
fn z_records_chunk_by_columns() {
    let s = spec(
        "z-records",
        "table<{hash: str, author: str, date: datetime, subject: str}>",
    );
    let out =
        b"h1\0Ann\x002024-01-02T03:04:05+01:00\0first\0h2\0Bob\x002024-01-03T00:00:00Z\0second";
    let v = parse(&s, out).expect("parses");
    let Value::Table(rows) = &v else { panic!() };
    assert_eq!(rows.len(), 2);
    assert!(matches!(rows[0]["date"], Value::DateTime(_)));
    let e = parse(&s, b"h1\0Ann\0nope\0first").unwrap_err();
    assert!(e.msg.contains("`date`"), "{e:?}");
    assert!(parse(&s, b"h1\0Ann").is_err());
}

#[test]
fn json_select_keys_and_empty() {
    let mut s = spec("json", "table<{name: str, size: size}>");
    s.select = vec!["blockdevices".into()];
    let v = parse(&s, br#"{"blockdevices":[{"name":"vda","size":1024}]}"#).expect("parses");
    assert_eq!(
        render::inline(&v),
        format!(
            "[{{name: \"vda\", size: {}}}]",
            render::inline(&Value::Size(1024))
        )
    );
    let mut s = spec("ndjson", "table<{CONTAINER ID: str}>");
    s.keys = vec![("CONTAINER ID".into(), "ID".into())];
    let v = parse(&s, b"{\"ID\":\"ab\"}\n{\"ID\":\"cd\"}\n").expect("parses");
    assert_eq!(
        render::inline(&v),
        r#"[{"CONTAINER ID": "ab"}, {"CONTAINER ID": "cd"}]"#
    );
    let e = parse(&s, b"{\"ID\":\"ab\"}\n{\"Nope\":1}\n").unwrap_err();
    assert_eq!(e.line, 2);
    let e = parse(&spec("json", "record"), b"{\n\"a\": 1,\n}").unwrap_err();
    assert_eq!(e.line, 3);
    assert!(matches!(&parse(&spec("json", "table"), b""), Ok(Value::Table(t)) if t.is_empty()));
}

#[test]
fn kv_and_lines_and_tsv() {
    let v = parse(&spec("kv", "record"), b"A=1\nB: two\nC=x=y\n").expect("parses");
    assert_eq!(render::inline(&v), r#"{A: "1", B: "two", C: "x=y"}"#);
    let v = parse(&spec("lines", "list<str>"), b"a\nb\n").expect("parses");
    assert_eq!(render::inline(&v), r#"["a", "b"]"#);
    let v = parse(&spec("lines", "list<str>"), b"").expect("parses");
    assert_eq!(render::inline(&v), "[]");
    let v = parse(
        &spec("tsv-headerless", "table<{size: size_kb, path: path}>"),
        b"4\t./a\n",
    )
    .expect("parses");
    let Value::Table(rows) = &v else { panic!() };
    assert!(matches!(rows[0]["size"], Value::Size(4096)));
    let e = parse(
        &spec("tsv-headerless", "table<{size: size_kb, path: path}>"),
        b"4\ta\tb\n",
    )
    .unwrap_err();
    assert_eq!(e.line, 1);
}

/// The direct JSON path gives the tree path's value whenever that
/// succeeds, and the tree path's failure otherwise.
#[test]
fn fast_json_matches_the_tree_path() {
    let cases: &[(&str, &str, &[&str], &str)] = &[
        ("json", "value", &[], r#"{"b": [1, -2, 3.5, 18446744073709551615, "x\u00e9\n"], "a": {"z": null, "y": true}, "b": 7}"#),
        ("json", "value", &[], r#"[{"n": 1}, {"n": 2, "m": [ {"q": 1} ]}]"#),
        ("json", "value", &[], r#"[{"n": 1}, 2, []]"#),
        ("json", "value", &[], r#"[]"#),
        ("json", "value", &[], r#""just a string""#),
        ("json", "value", &[], "1\n2\n{\"a\":1}"),
        ("json", "record", &[], r#"{"k": [1, {"x": 2}]}"#),
        ("json", "record", &[], r#"[1]"#),
        ("json", "table", &[], r#"[{"a": 1}, {"b": "two"}]"#),
        ("json", "table", &[], r#"{"a": 1}"#),
        ("json", "table", &[], r#"[{"a": 1}, 3]"#),
        ("json", "table<{name: str, version: str}>", &[], r#"[{"name": "a", "version": "1.0", "extra": {"deep": [1, 2]}}, {"version": "2", "name": "b"}]"#),
        ("json", "table<{name: str, n: int}>", &[], r#"[{"name": "a", "n": "12"}, {"name": 5, "n": 3}]"#),
        ("json", "table<{name: str, n: int}>", &[], r#"[{"name": "a", "n": 1.5}]"#),
        ("json", "table<{name: str, n: int}>", &[], r#"[{"name": "a"}]"#),
        ("json", "table<{name: str, n: int?}>", &[], r#"[{"name": "a"}, {"name": "b", "n": null}, {"name": "c", "n": 4, "n": 5}]"#),
        ("json", "table<{name: str, n: int}>", &[], r#"{"name": "single", "n": 1}"#),
        ("json", "table<{name: str, n: int}>", &[], "[{\"name\": \"a\", \"n\": 1}]\n[{\"name\": \"b\", \"n\": 2}]"),
        ("json", "table<{name: str, size: size, kb: size_kb, f: float, ok: bool, p: path, t: datetime, s: str}>", &[],
            r#"[{"name": "x", "size": 10, "kb": 2, "f": 3, "ok": "yes", "p": "/a b", "t": "2024-01-02T03:04:05Z", "s": 1.25},
                {"name": "y", "size": "11", "kb": "3", "f": "4.5%", "ok": false, "p": "rel", "t": 1700000000, "s": true}]"#),
        ("json", "table<{name: str, size: size}>", &[], r#"[{"name": "x", "size": -1}]"#),
        ("json", "table<{name: str, kids: table<{k: int}>?, tags: list<str>}>", &[], r#"[{"name": "x", "kids": [{"k": 1}], "tags": ["a", "b"]}, {"name": "y", "tags": []}]"#),
        ("json", "list<int>", &[], r#"[1, 2, "3"]"#),
        ("json", "list<int>", &[], r#"[1, 2, "x"]"#),
        ("json", "int", &[], r#"42"#),
        ("json", "table<{name: str}>", &["blockdevices"], r#"{"other": 1, "blockdevices": [{"name": "vda"}]}"#),
        ("json", "table<{name: str}>", &["blockdevices"], r#"{"other": 1}"#),
        ("json", "table<{name: str}>", &["a", "1"], r#"{"a": [[{"name": "no"}], [{"name": "yes"}]]}"#),
        ("json", "table<{name: str}>", &["a", "5"], r#"{"a": [[{"name": "no"}]]}"#),
        ("json", "record", &[], "{\n\"a\": 1,\n}"),
        ("json", "value", &[], "[1, 2"),
        ("ndjson", "table<{id: str}>", &[], "{\"id\": \"a\"}\n\n{\"id\": \"b\", \"x\": 1}\n"),
        ("ndjson", "table<{id: str}>", &[], "{\"id\": \"a\"}\n{\"nope\": 1}\n"),
        ("ndjson", "table", &[], "{\"id\": \"a\"}\n{\"z\": [1]}\n"),
        ("ndjson", "list<int>", &[], "1\n2\n"),
        ("ndjson", "list<int>", &[], "1\nx\n"),
        ("ndjson", "table<{id: str}>", &[], "{\"id\": \"a\"}\n{\"id\": \"\u{e9}\\u00e9\"}\n"),
        ("json", "table<{name: str, version: str}>", &[], r#"[{"x": 1, "version": "1", "name": "a"}, {"name": "b", "name": "c", "version": "2"}]"#),
        ("json", "table<{name: str, version: str?}>", &[], r#"[{"name": "a", "version": null}, {"name": "b"}, {"version": "3", "name": "c"}]"#),
        ("json", "value", &[], r#"[{"b": 1, "a": 2, "b": 3}, {"a": {"z": 1, "y": [{"q": 2, "p": 1}]}}]"#),
    ];
    for (parser, ty, select, text) in cases {
        let mut s = spec(parser, ty);
        s.select = select.iter().map(|k| k.to_string()).collect();
        let fast = parse_with(&s, text.as_bytes(), true);
        let tree = parse_with(&s, text.as_bytes(), false);
        assert_eq!(
            format!("{fast:?}"),
            format!("{tree:?}"),
            "{parser} {ty} {select:?} {text}"
        );
    }
    // The direct path serves the everyday shapes.
    let s = spec("json", "table<{name: str, version: str}>");
    assert!(
        crate::adapters::fastjson::document(&s, br#"[{"name": "a", "version": "1"}]"#).is_some()
    );
    assert!(
        crate::adapters::fastjson::document(&spec("json", "value"), br#"{"a": [1]}"#).is_some()
    );
    // Column keys: two columns may read one key (the tree path serves).
    let mut s = spec("json", "table<{ID: str, name: str, again: str}>");
    s.keys = vec![("again".into(), "ID".into())];
    let text = br#"[{"ID": "a", "name": "n"}]"#;
    assert_eq!(
        format!("{:?}", parse_with(&s, text, true)),
        format!("{:?}", parse_with(&s, text, false))
    );
}

/// Repeated string cells share one string; the values are those of
/// `from_text` whether shared or not (and a column that hardly repeats
/// stops looking).
#[test]
fn repeated_cells_are_shared_and_unchanged() {
    let s = spec("cols", "table<{user: str, cmd: str, n: int}>");
    let mut out = b"USER CMD N\n".to_vec();
    for i in 0..600 {
        out.extend_from_slice(format!("u{} c{i} {i}\n", i % 3).as_bytes());
    }
    out.extend_from_slice(b"u\xff c\xfe 1\nu0 c\xfe 2\n");
    let v = parse(&s, &out).expect("parses");
    let Value::Table(rows) = &v else { panic!() };
    assert_eq!(rows.len(), 602);
    let (Value::Str(a), Value::Str(b)) = (&rows[0]["user"], &rows[3]["user"]) else {
        panic!("strings");
    };
    assert!(Arc::ptr_eq(a, b), "u0 is one string");
    for (i, r) in rows.iter().take(600).enumerate() {
        assert_eq!(render::inline(&r["user"]), format!("\"u{}\"", i % 3));
        assert_eq!(render::inline(&r["cmd"]), format!("\"c{i}\""));
    }
    assert_eq!(render::inline(&rows[600]["user"]), "\"u\u{fffd}\"");
    assert_eq!(render::inline(&rows[601]["cmd"]), "\"c\u{fffd}\"");
    assert_eq!(render::inline(&rows[601]["user"]), "\"u0\"");
}

const PATCH: &[u8] = b"commit 1a2b\nAuthor: T <t@x>\n\n    subject\n\n\
diff --git a/src/a.rs b/src/a.rs\nindex 111..222 100644\n--- a/src/a.rs\n+++ b/src/a.rs\n\
@@ -1,3 +1,3 @@ fn main() {\n one\n-two\n+TWO\n three\n@@ -10 +10,2 @@\n ten\n+eleven\n\\ No newline at end of file\n\
diff --git a/new file.txt b/new file.txt\nnew file mode 100644\nindex 000..333\n--- /dev/null\n+++ b/new file.txt\n@@ -0,0 +1 @@\n+-- not a header\n\
diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n\
diff --git a/old.txt b/moved.txt\nsimilarity index 100%\nrename from old.txt\nrename to moved.txt\n\
diff --git a/img.png b/img.png\nindex 444..555 100644\nBinary files a/img.png and b/img.png differ\n";

#[test]
fn patch_gives_files_with_hunks() {
    let v = parse(&spec("patch", "table"), PATCH).expect("parses");
    let Value::Table(rows) = &v else {
        panic!("not a table")
    };
    let cell = |i: usize, c: &str| render::inline(&rows[i][c]);
    let paths: Vec<String> = (0..rows.len()).map(|i| cell(i, "path")).collect();
    assert_eq!(
        paths,
        [
            render::inline(&Value::path("src/a.rs")),
            render::inline(&Value::path("new file.txt")),
            render::inline(&Value::path("gone.txt")),
            render::inline(&Value::path("moved.txt")),
            render::inline(&Value::path("img.png")),
        ]
    );
    let statuses: Vec<String> = (0..rows.len()).map(|i| cell(i, "status")).collect();
    assert_eq!(
        statuses,
        [
            r#""modified""#,
            r#""added""#,
            r#""deleted""#,
            r#""renamed""#,
            r#""modified""#
        ]
    );
    assert_eq!(cell(3, "old_path"), render::inline(&Value::path("old.txt")));
    assert_eq!(cell(0, "old_path"), "null");
    assert_eq!(cell(4, "binary"), "true");
    assert_eq!([cell(0, "added"), cell(0, "deleted")], ["2", "1"]);
    // A `-- ` line inside a hunk is a hunk line, counted by the header.
    assert_eq!([cell(1, "added"), cell(1, "deleted")], ["1", "0"]);
    let Value::List(hunks) = &rows[0]["hunks"] else {
        panic!("hunks")
    };
    assert_eq!(hunks.len(), 2);
    let Value::Record(h) = &hunks[1] else {
        panic!("hunk")
    };
    assert_eq!(render::inline(&h["header"]), r#""@@ -10 +10,2 @@""#);
    assert_eq!(
        [
            &h["old_start"],
            &h["old_lines"],
            &h["new_start"],
            &h["new_lines"]
        ]
        .map(render::inline),
        ["10", "1", "10", "2"]
    );
    assert_eq!(
        render::inline(&h["lines"]),
        r#"[" ten", "+eleven", "\\ No newline at end of file"]"#
    );
    // Nothing to diff: no rows.
    assert!(matches!(&parse(&spec("patch", "table"), b""), Ok(Value::Table(t)) if t.is_empty()));
}

#[test]
fn patch_failures_name_the_line() {
    let s = spec("patch", "table");
    let cut = b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n one\n";
    assert_eq!(parse(&s, cut).unwrap_err().line, 5);
    let bad = b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -x +1 @@\n";
    let f = parse(&s, bad).unwrap_err();
    assert_eq!(f.line, 4);
    assert!(f.msg.contains("malformed hunk header"), "{}", f.msg);
    let stray = b"diff --git a/x b/x\n@@ -1 +1 @@\n?odd\n";
    assert_eq!(parse(&s, stray).unwrap_err().line, 3);
    // The parser declares its own columns.
    assert!(Parser::Patch
        .accepts(&Ty::parse("table").expect("ty"))
        .is_ok());
    assert!(Parser::Patch
        .accepts(&Ty::parse("table<{path: path}>").expect("ty"))
        .is_err());
}

#[test]
fn porcelain_summary_names_the_branch() {
    let s = spec(
        "porcelain-v2",
        "table<{status: str, state: str, path: path, orig: path?}>",
    );
    let clean = b"# branch.oid 1a2b3c4d5e\n# branch.head main\n# branch.upstream origin/main\n# branch.ab +0 -0\n";
    let v = parse(&s, clean).expect("parses");
    assert_eq!(
        summary(&s, clean, &v).as_deref(),
        Some("on branch main, up to date with origin/main; nothing to commit, working tree clean")
    );
    let dirty = b"# branch.oid 1a2b3c4d5e\n# branch.head topic\n# branch.upstream origin/topic\n# branch.ab +2 -1\n? new.txt\n";
    let v = parse(&s, dirty).expect("parses");
    assert_eq!(
        summary(&s, dirty, &v).as_deref(),
        Some("on branch topic, ahead 2, behind 1 of origin/topic")
    );
    let detached = b"# branch.oid 1a2b3c4d5e\n# branch.head (detached)\n";
    let v = parse(&s, detached).expect("parses");
    assert_eq!(
        summary(&s, detached, &v).as_deref(),
        Some("HEAD detached at 1a2b3c4; nothing to commit, working tree clean")
    );
    let fresh = b"# branch.oid (initial)\n# branch.head main\n";
    let v = parse(&s, fresh).expect("parses");
    assert!(summary(&s, fresh, &v).is_some_and(|t| t.starts_with("on branch main, no commits yet")));
    // Without headers (a user adapter's pin): no summary.
    assert_eq!(summary(&s, b"? x\n", &v), None);
}

/// Generated JSON for [`the_direct_json_path_matches_the_tree_path_on_generated_documents`]:
/// objects may repeat a key (kept as written), strings may be escaped or
/// hold numbers, numbers run from small to past `u64`.
mod generated {
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    pub enum J {
        Null,
        Bool(bool),
        Int(i128),
        Float(f64),
        Str(String),
        Arr(Vec<J>),
        Obj(Vec<(String, J)>),
    }

    const KEYS: &[&str] = &[
        "name", "version", "n", "size", "ok", "t", "kids", "tags", "k", "x",
    ];
    const STRS: &[&str] = &[
        "a",
        "1.0",
        "12",
        "-3",
        "4.5%",
        "yes",
        "false",
        "",
        "/a b",
        "2024-01-02T03:04:05Z",
        "é",
        "\u{1F600}",
        "x\ny",
        "\"q\"",
        "1e3",
        "0x10",
        " 7 ",
        "7",
        "-0",
        "+5",
        "3.0",
        "true",
        "1700000000",
        "10K",
    ];

    fn leaf() -> impl Strategy<Value = J> {
        prop_oneof![
            Just(J::Null),
            any::<bool>().prop_map(J::Bool),
            (-20i128..20).prop_map(J::Int),
            (-1000i128..100_000).prop_map(J::Int),
            prop_oneof![
                Just(i64::MIN as i128),
                Just(u64::MAX as i128),
                Just(u64::MAX as i128 + 1),
                Just(-1i128)
            ]
            .prop_map(J::Int),
            prop_oneof![
                Just(1.5f64),
                Just(-0.25),
                Just(3.0),
                Just(1e300),
                Just(2.5e-8)
            ]
            .prop_map(J::Float),
            prop::sample::select(STRS).prop_map(|s| J::Str(s.to_string())),
        ]
    }

    fn int() -> impl Strategy<Value = J> {
        prop_oneof![
            3 => (-10i128..10).prop_map(J::Int),
            1 => prop::sample::select(&[" 7 ", "12", "-3", "+5", "7", "1.0", "0x1"][..])
                .prop_map(|s| J::Str(s.to_string())),
            1 => leaf(),
        ]
    }

    fn str_() -> impl Strategy<Value = J> {
        prop_oneof![
            3 => prop::sample::select(STRS).prop_map(|s| J::Str(s.to_string())),
            1 => leaf(),
        ]
    }

    /// A cell as the column `key` of the specs reads it, mostly of its type.
    fn cell(key: &'static str) -> BoxedStrategy<J> {
        match key {
            "name" | "version" => str_().boxed(),
            "n" | "k" | "size" => int().boxed(),
            "ok" => prop_oneof![3 => any::<bool>().prop_map(J::Bool), 1 => leaf()].boxed(),
            "t" => prop_oneof![
                (0i128..2_000_000_000).prop_map(J::Int),
                Just(J::Str("2024-01-02T03:04:05Z".into())),
                leaf()
            ]
            .boxed(),
            "kids" => prop::collection::vec(
                prop::collection::vec((Just("k"), int()), 0..2).prop_map(|kv| {
                    J::Obj(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
                }),
                0..3,
            )
            .prop_map(J::Arr)
            .boxed(),
            "tags" => prop::collection::vec(str_(), 0..3).prop_map(J::Arr).boxed(),
            _ => leaf().boxed(),
        }
    }

    fn row() -> impl Strategy<Value = J> {
        prop::collection::vec(prop::sample::select(KEYS), 0..7).prop_flat_map(|keys| {
            keys.into_iter()
                .map(|k| cell(k).prop_map(move |v| (k.to_string(), v)))
                .collect::<Vec<_>>()
                .prop_map(J::Obj)
        })
    }

    /// Mostly what the typed specs read (arrays of rows whose cells are
    /// mostly of their column's type, arrays of ints or of strings), and
    /// some trees of any shape.
    pub fn value() -> impl Strategy<Value = J> {
        prop_oneof![
            4 => prop::collection::vec(row(), 0..5).prop_map(J::Arr),
            1 => row(),
            2 => prop::collection::vec(int(), 0..5).prop_map(J::Arr),
            1 => prop::collection::vec(str_(), 0..5).prop_map(J::Arr),
            2 => tree(),
        ]
    }

    fn tree() -> impl Strategy<Value = J> {
        leaf().prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(J::Arr),
                prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                    J::Obj(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
                }),
            ]
        })
    }

    /// `j` as JSON text; `escape` writes non-ASCII as `\u` escapes, `pretty`
    /// puts every member on a line of its own.
    pub fn write(j: &J, escape: bool, pretty: bool, out: &mut String) {
        let sep = if pretty { ",\n" } else { "," };
        match j {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Int(n) => out.push_str(&n.to_string()),
            J::Float(f) => out.push_str(&format!("{f:?}")),
            J::Str(s) => string(s, escape, out),
            J::Arr(v) => {
                out.push('[');
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        out.push_str(sep);
                    }
                    write(x, escape, pretty, out);
                }
                out.push(']');
            }
            J::Obj(kv) => {
                out.push('{');
                for (i, (k, v)) in kv.iter().enumerate() {
                    if i > 0 {
                        out.push_str(sep);
                    }
                    string(k, escape, out);
                    out.push_str(if pretty { ": " } else { ":" });
                    write(v, escape, pretty, out);
                }
                out.push('}');
            }
        }
    }

    fn string(s: &str, escape: bool, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                c if escape && !c.is_ascii() => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// The types and selections the generated documents are parsed as.
const GENERATED_SPECS: &[(&str, &str, &[&str])] = &[
    ("json", "value", &[]),
    ("json", "record", &[]),
    ("json", "table", &[]),
    ("json", "list<int>", &[]),
    ("json", "list<str>", &[]),
    ("json", "int", &[]),
    ("json", "table<{name: str, version: str}>", &[]),
    ("json", "table<{name: str, n: int?}>", &[]),
    (
        "json",
        "table<{name: str?, size: size, ok: bool?, t: datetime?}>",
        &[],
    ),
    (
        "json",
        "table<{k: int, kids: table<{k: int}>?, tags: list<str>?}>",
        &[],
    ),
    ("json", "table<{name: str}>", &["kids"]),
    ("json", "table<{x: float?}>", &["x", "0"]),
    ("ndjson", "table<{name: str?}>", &[]),
    ("ndjson", "table", &[]),
    ("ndjson", "list<int>", &[]),
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

    /// The direct JSON path ([`crate::adapters::fastjson`]) and the path
    /// through a `serde_json` tree give the same value, or the same failure,
    /// on generated documents: one or several, whole or cut short.
    #[test]
    fn the_direct_json_path_matches_the_tree_path_on_generated_documents(
        docs in proptest::collection::vec(generated::value(), 1..3),
        escape in proptest::prelude::any::<bool>(),
        pretty in proptest::prelude::any::<bool>(),
        cut in proptest::option::of(0usize..400),
        which in 0..GENERATED_SPECS.len(),
    ) {
        let mut text = String::new();
        for d in &docs {
            generated::write(d, escape, pretty, &mut text);
            text.push('\n');
        }
        if let Some(at) = cut {
            let at = (0..=at.min(text.len())).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
            text.truncate(at);
        }
        let (parser, ty, select) = GENERATED_SPECS[which];
        let mut s = spec(parser, ty);
        s.select = select.iter().map(|k| k.to_string()).collect();
        let fast = parse_with(&s, text.as_bytes(), true);
        let tree = parse_with(&s, text.as_bytes(), false);
        proptest::prop_assert_eq!(format!("{fast:?}"), format!("{tree:?}"), "{} {} {:?}\n{}", parser, ty, select, text);
    }
}

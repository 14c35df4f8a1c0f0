//! Recorded outputs of tools that are missing here or cannot reach their service
//! (tests/fixtures/adapters/), parsed into their declared types.

use super::*;

fn recorded(head: &str, words: &str, fixture: &str) -> Value {
    let c = catalog();
    let w: Vec<String> = words.split_whitespace().map(str::to_string).collect();
    let (a, f) = c
        .resolve(head, &w)
        .unwrap_or_else(|| panic!("{head} {words} not adapted"));
    let spec = f
        .output
        .as_ref()
        .unwrap_or_else(|| panic!("{head} {words} has no output"));
    let bytes = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/adapters")
            .join(fixture),
    )
    .expect("fixture");
    adapters::parse::parse(spec, &bytes).unwrap_or_else(|e| panic!("{} {words}: {e:?}", a.name))
}

#[test]
fn recorded_outputs_parse_into_their_types() {
    // (head, words, fixture, rows or items, a known cell "col=inline")
    let cases: &[(&str, &str, &str, usize, &str)] = &[
        (
            "docker",
            "ps",
            "docker-ps.ndjson",
            2,
            r#"CONTAINER ID="4f2a9c1b7d3e""#,
        ),
        ("docker", "ps", "docker-ps.ndjson", 2, r#"NAMES="web""#),
        (
            "docker",
            "images",
            "docker-images.ndjson",
            1,
            r#"IMAGE ID="b52e0b094bc0""#,
        ),
        (
            "docker",
            "inspect web",
            "docker-inspect.json",
            1,
            r#"Name="/web""#,
        ),
        (
            "systemctl",
            "",
            "systemctl.json",
            2,
            r#"unit="cron.service""#,
        ),
        (
            "systemctl",
            "list-units",
            "systemctl.json",
            2,
            r#"sub="running""#,
        ),
        (
            "journalctl",
            "",
            "journalctl.ndjson",
            2,
            r#"SYSLOG_IDENTIFIER="sshd""#,
        ),
        (
            "gcloud",
            "projects list",
            "gcloud-projects.json",
            1,
            r#"projectId="demo-123""#,
        ),
        ("gh", "pr list", "gh-pr.json", 1, "number=42"),
        ("gh", "issue list", "gh-issue.json", 1, "number=7"),
        ("gh", "run list", "gh-run.json", 1, "databaseId=1234567890"),
        (
            "helm",
            "list",
            "helm-list.json",
            1,
            r#"chart="nginx-15.1.0""#,
        ),
        ("pnpm", "list", "pnpm-list.json", 1, "private=true"),
        ("podman", "ps", "podman-ps.json", 1, r#"Names=["cache"]"#),
        (
            "podman",
            "images",
            "podman-images.json",
            1,
            "Size=117000000",
        ),
        ("rg", "main", "rg.ndjson", 3, r#"type="begin""#),
        (
            "uv",
            "pip list",
            "uv-pip-list.json",
            2,
            r#"name="requests""#,
        ),
        (
            "ip",
            "neigh",
            "ip-neigh.json",
            1,
            r#"lladdr="52:54:00:12:34:56""#,
        ),
        ("who", "", "who.txt", 2, r#"user="alice""#),
        ("stat", "/etc", "stat.txt", 2, r#"kind="regular file""#),
    ];
    for (head, words, fixture, n, cell) in cases {
        let v = recorded(head, words, fixture);
        let Value::Table(rows) = &v else {
            panic!("{head} {words}: not a table")
        };
        assert_eq!(rows.len(), *n, "{head} {words}");
        let (col, want) = cell.split_once('=').expect("cell");
        assert!(
            rows.iter()
                .any(|r| r.get(col).map(render::inline).as_deref() == Some(want)),
            "{head} {words}: no row with {cell}: {}",
            render::inline(&v)
        );
    }
    // Typed cells beyond strings.
    let gh = recorded("gh", "pr list", "gh-pr.json");
    let Value::Table(rows) = &gh else { panic!() };
    assert!(matches!(rows[0]["createdAt"], Value::DateTime(_)));
    assert!(matches!(rows[0]["author"], Value::Record(_)));
    let j = recorded("journalctl", "", "journalctl.ndjson");
    let Value::Table(rows) = &j else { panic!() };
    assert!(matches!(rows[1]["_PID"], Value::Null));
    let who = recorded("who", "", "who.txt");
    let Value::Table(rows) = &who else { panic!() };
    assert_eq!(render::inline(&rows[0]["time"]), "\"09:15 (192.0.2.7)\"");
    // Lists of lines.
    for (head, words, fixture, n, first) in [
        (
            "kubectl",
            "logs web",
            "kubectl-logs.txt",
            2,
            "\"2026-12-01T10:00:00Z starting\"",
        ),
        (
            "kubectl",
            "config current-context",
            "kubectl-context.txt",
            1,
            "\"kind-dev\"",
        ),
        (
            "systemd-analyze",
            "blame",
            "systemd-analyze-blame.txt",
            2,
            "\"2.101s apt-daily.service\"",
        ),
        (
            "aws",
            "s3 ls",
            "aws-s3-ls.txt",
            2,
            "\"2026-01-05 10:11:12 my-bucket\"",
        ),
        (
            "jj",
            "status",
            "jj-status.txt",
            3,
            "\"Working copy changes:\"",
        ),
        (
            "jj",
            "log",
            "jj-log.txt",
            2,
            "\"qpvuntsm dev@example.com 2026-12-01 10:00:00 8a3f2b1c (no description set)\"",
        ),
        ("brew", "list", "brew-list.txt", 2, "\"git\""),
        (
            "bun",
            "pm ls",
            "bun-pm-ls.txt",
            2,
            "\"/src/app node_modules\"",
        ),
        (
            "terraform",
            "state list",
            "terraform-state-list.txt",
            2,
            "\"aws_instance.web\"",
        ),
        ("fd", "", "fd.txt", 2, ""),
    ] {
        let v = recorded(head, words, fixture);
        let Value::List(items) = &v else {
            panic!("{head} {words}: not a list")
        };
        assert_eq!(items.len(), n, "{head} {words}");
        if !first.is_empty() {
            assert_eq!(render::inline(&items[0]), first, "{head} {words}");
        } else {
            assert!(matches!(items[0], Value::Path(_)), "{head}: list<path>");
        }
    }
    // Records.
    for (head, words, fixture, key) in [
        ("kubectl", "get pods", "kubectl-get.json", "items"),
        ("aws", "sts get-caller-identity", "aws-sts.json", "Account"),
        ("gcloud", "config list", "gcloud-config.json", "core"),
        ("yarn", "list", "yarn-list.json", "data"),
        ("yarn", "outdated", "yarn-outdated.json", "data"),
        ("brew", "info jq", "brew-info.json", "formulae"),
        ("npm", "outdated", "npm-outdated.json", "left-pad"),
        ("env", "", "env.txt", "PATH"),
        ("go", "list", "go-list.json", "ImportPath"),
    ] {
        let v = recorded(head, words, fixture);
        let Value::Record(r) = &v else {
            panic!("{head} {words}: not a record")
        };
        assert!(
            r.contains_key(key),
            "{head} {words}: {}",
            render::inline(&v)
        );
    }
    let env = recorded("env", "", "env.txt");
    let Value::Record(r) = &env else { panic!() };
    assert_eq!(render::inline(&r["MULTI"]), "\"first\\nsecond line\"");
}

// ---- through the daemon ----------------------------------------------------

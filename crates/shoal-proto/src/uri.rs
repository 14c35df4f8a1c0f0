//! `shoal://` URIs (docs/rules.md §16): parsing with
//! percent-decoding, and the refs ↔ URIs conversion.

/// A parsed `shoal://root/seg...?k=v&...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedUri {
    pub root: String,
    pub segs: Vec<String>,
    /// In order; repeated keys: the last wins in [`ParsedUri::get`].
    pub query: Vec<(String, String)>,
}

impl ParsedUri {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// `%XX` decoding (`+` is not a space); invalid escapes stay as they are.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse a `shoal://` URI.
pub fn parse(uri: &str) -> Result<ParsedUri, String> {
    let rest = uri
        .strip_prefix("shoal://")
        .ok_or_else(|| format!("not a shoal:// uri: {uri}"))?;
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    let mut segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    if segs.is_empty() {
        return Err(format!("empty shoal:// uri: {uri}"));
    }
    let root = segs.remove(0);
    let query = query
        .map(|q| {
            q.split('&')
                .filter(|kv| !kv.is_empty())
                .map(|kv| match kv.split_once('=') {
                    Some((k, v)) => (k.to_string(), percent_decode(v)),
                    None => (kv.to_string(), String::new()),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(ParsedUri { root, segs, query })
}

/// `kind:rest` → `shoal://kind/rest`. The kind is a plain word (ASCII
/// alphanumerics, `_`, `-`): one with `/`, `?`, `#` or `%` would not come back
/// from [`parse`] as the root.
pub fn ref_to_uri(r: &str) -> Option<String> {
    let (kind, rest) = r.split_once(':')?;
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if kind.is_empty() || rest.is_empty() || !kind.bytes().all(word) {
        return None;
    }
    Some(format!("shoal://{kind}/{rest}"))
}

/// `uri` with `seg` appended to its `?path=` (or a new `?path=seg`).
pub fn with_path(uri: &str, seg: &str) -> String {
    if uri.contains("?path=") {
        format!("{uri}.{seg}")
    } else if uri.contains('?') {
        format!("{uri}&path={seg}")
    } else {
        format!("{uri}?path={seg}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing() {
        let u = parse("shoal://out/12?path=.rows[3].name").unwrap();
        assert_eq!(u.root, "out");
        assert_eq!(u.segs, vec!["12"]);
        assert_eq!(u.get("path"), Some(".rows[3].name"));
        let u = parse("shoal://events/user.deploy?since=2&limit=10&since=3").unwrap();
        assert_eq!(
            (u.root.as_str(), u.segs[0].as_str()),
            ("events", "user.deploy")
        );
        assert_eq!(u.get("since"), Some("3"));
        let u = parse("shoal://events/a%2Fb?x").unwrap();
        assert_eq!(u.segs, vec!["a/b"]);
        assert_eq!(u.get("x"), Some(""));
        assert_eq!(parse("shoal://journal").unwrap().root, "journal");
        assert!(parse("http://x").is_err());
        assert!(parse("shoal://").is_err());
        assert_eq!(percent_decode("a+b%20c%zz%"), "a+b c%zz%");
        assert_eq!(ref_to_uri("out:3").as_deref(), Some("shoal://out/3"));
        assert_eq!(
            ref_to_uri("val:blake3:ab").as_deref(),
            Some("shoal://val/blake3:ab")
        );
        assert_eq!(ref_to_uri("nope"), None);
        // Found by `make fuzz` (uri): the kind must survive the round trip.
        for bad in ["?:o", "a?b:1", "a#b:1", "%6f:1", "a/b:1", ":1"] {
            assert_eq!(ref_to_uri(bad), None, "{bad}");
        }
    }
}

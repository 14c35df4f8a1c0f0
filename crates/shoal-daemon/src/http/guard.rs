//! What every HTTP request passes before it reaches MCP (docs/http.md "Auth"): the
//! `Host` and `Origin` checks that stop DNS rebinding (403), then the bearer token of
//! `shoal token create` (401 with `WWW-Authenticate: Bearer`).

// A refusal is an HttpResponse returned once per request, never stored: boxing it buys nothing.
#![allow(clippy::result_large_err)]

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};

/// A JSON-RPC error body with `id: null`, as HTTP-level refusals carry it.
pub fn refusal(status: actix_web::http::StatusCode, code: i64, message: &str) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("application/json")
        .body(shoal_proto::rpc::error_frame(
            &serde_json::Value::Null,
            &shoal_proto::rpc::RpcError::new(code, message),
        ))
}

fn forbidden(message: &str) -> HttpResponse {
    refusal(actix_web::http::StatusCode::FORBIDDEN, -32000, message)
}

/// The host part of `host[:port]` (`[::1]` keeps its brackets), lowercased.
fn host_of(authority: &str) -> String {
    let a = authority.trim();
    let host = if a.starts_with('[') {
        a.split_inclusive(']').next().unwrap_or(a)
    } else {
        a.rsplit_once(':').map_or(a, |(h, _)| h)
    };
    host.to_ascii_lowercase()
}

/// A loopback name or the address the listener is bound to.
fn is_local_host(host: &str, listen: &std::net::SocketAddr) -> bool {
    let own = match listen.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    matches!(host, "localhost" | "127.0.0.1" | "[::1]") || host == own
}

/// `Host` must name this machine (DNS rebinding: a page of another site whose name
/// resolves here carries that name); `Origin`, when a browser sends one, must be a
/// loopback origin or one of `[http] allowed_origins`.
pub fn check_origin(
    req: &HttpRequest,
    listen: &std::net::SocketAddr,
    allowed: &[String],
) -> Result<(), HttpResponse> {
    if let Some(h) = req.headers().get(header::HOST) {
        let ok = h.to_str().is_ok_and(|h| is_local_host(&host_of(h), listen));
        if !ok {
            return Err(forbidden(
                "forbidden: the Host header does not name this machine (DNS rebinding protection)",
            ));
        }
    }
    if let Some(o) = req.headers().get(header::ORIGIN) {
        let o = o.to_str().unwrap_or("");
        let listed = allowed.iter().any(|a| a.eq_ignore_ascii_case(o));
        let local = o
            .strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
            .is_some_and(|rest| !rest.contains('/') && is_local_host(&host_of(rest), listen));
        if !(listed || local) {
            return Err(forbidden(
                "forbidden: Origin is not a loopback origin nor in [http] allowed_origins",
            ));
        }
    }
    Ok(())
}

/// The bearer and its principal, else 401.
pub fn check_token(req: &HttpRequest) -> Result<(String, String), HttpResponse> {
    let unauthorized = |error: &str, message: &str| {
        let mut r = refusal(actix_web::http::StatusCode::UNAUTHORIZED, -32001, message);
        let challenge = if error.is_empty() {
            "Bearer realm=\"shoal\"".to_string()
        } else {
            format!("Bearer realm=\"shoal\", error=\"{error}\"")
        };
        if let Ok(v) = header::HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        r
    };
    let Some(auth) = req.headers().get(header::AUTHORIZATION) else {
        return Err(unauthorized(
            "",
            "unauthorized: send Authorization: Bearer TOKEN (shoal token create --local)",
        ));
    };
    let bearer = auth
        .to_str()
        .ok()
        .and_then(|a| {
            a.get(..7)
                .filter(|p| p.eq_ignore_ascii_case("bearer "))
                .map(|_| a[7..].trim())
        })
        .filter(|b| !b.is_empty());
    let Some(bearer) = bearer else {
        return Err(unauthorized(
            "invalid_request",
            "unauthorized: the Authorization header must be `Bearer TOKEN`",
        ));
    };
    let rt = shoal_policy::runtime();
    match rt.tokens.as_ref().and_then(|s| s.validate(bearer)) {
        Some(p) => Ok((bearer.to_string(), p)),
        None => Err(unauthorized(
            "invalid_token",
            "unauthorized: invalid, expired, or revoked bearer token",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        let l: std::net::SocketAddr = "127.0.0.1:7417".parse().unwrap();
        assert_eq!(host_of("LocalHost:7417"), "localhost");
        assert_eq!(host_of("[::1]:80"), "[::1]");
        assert_eq!(host_of("127.0.0.1"), "127.0.0.1");
        assert!(is_local_host("localhost", &l));
        assert!(is_local_host(&host_of("[::1]:9"), &l));
        assert!(!is_local_host(&host_of("evil.example.com:7417"), &l));
        assert!(!is_local_host(&host_of("127.0.0.1.evil.com"), &l));
    }
}

//! Bearer-token auth. The HTTP layer ([`layer`]) marks each request (HTTP call or WebSocket
//! upgrade) with [`Authorized`] when its `Authorization: Bearer <token>` header matches the
//! cookie's token; mutating methods call [`require`] with the request's extensions.

use std::sync::Arc;

use jsonrpsee::Extensions;
use jsonrpsee::server::HttpRequest;
use jsonrpsee::types::ErrorObjectOwned;

use crate::error::{UNAUTHORIZED, error};

/// Every method that changes state (or writes files on the node's host) and so needs the
/// bearer token: the one table of who may call what. Each of these methods calls [`require`]
/// first; the node's tests call every one without the token and expect [`UNAUTHORIZED`], and
/// every other served method with no token and expect an answer.
pub const MUTATING: &[&str] = &[
    "wallet_send",
    "job_submit",
    "job_cancel",
    "job_buildLock",
    "tx_submit",
    "job_outputs",
    "provider_unbond",
    "provider_withdraw",
];

/// Marker extension: the request carried the right bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authorized;

/// Compares in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Marks `req` [`Authorized`] when its bearer token equals `token`; strips any marker a
/// client could not have set anyway.
pub fn mark(token: &str, mut req: HttpRequest) -> HttpRequest {
    let ok = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| same(t.trim().as_bytes(), token.as_bytes()));
    req.extensions_mut().remove::<Authorized>();
    if ok {
        req.extensions_mut().insert(Authorized);
    }
    req
}

/// The tower layer that applies [`mark`] with `token`.
pub fn layer(
    token: Arc<str>,
) -> tower::util::MapRequestLayer<impl Fn(HttpRequest) -> HttpRequest + Clone> {
    tower::util::MapRequestLayer::new(move |req| mark(&token, req))
}

/// Refuses a mutating call that lacks the token.
///
/// # Errors
/// [`UNAUTHORIZED`] with a message naming the cookie file.
pub fn require(ext: &Extensions) -> Result<(), ErrorObjectOwned> {
    if ext.get::<Authorized>().is_some() {
        Ok(())
    } else {
        Err(error(
            UNAUTHORIZED,
            "unauthorized: this method changes state; send `Authorization: Bearer <token>` \
             with the token from the node's rpc.cookie file",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(auth: Option<&str>) -> HttpRequest {
        let mut b = http::Request::builder();
        if let Some(a) = auth {
            b = b.header(http::header::AUTHORIZATION, a);
        }
        b.body(jsonrpsee::server::HttpBody::empty())
            .expect("request")
    }

    #[test]
    fn only_the_exact_bearer_token_authorizes() {
        let ok = |a: Option<&str>| {
            mark("s3cret", req(a))
                .extensions()
                .get::<Authorized>()
                .is_some()
        };
        assert!(ok(Some("Bearer s3cret")));
        assert!(!ok(Some("Bearer s3cre")));
        assert!(!ok(Some("Bearer s3cret2")));
        assert!(!ok(Some("Basic s3cret")));
        assert!(!ok(None));
    }

    #[test]
    fn require_refuses_with_the_unauthorized_code() {
        let e = require(&Extensions::new()).expect_err("refused");
        assert_eq!(e.code(), UNAUTHORIZED);
        assert!(e.message().contains("rpc.cookie"));
        let mut ext = Extensions::new();
        ext.insert(Authorized);
        assert!(require(&ext).is_ok());
    }
}

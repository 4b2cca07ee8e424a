//! Bearer-token auth, decided in one place. The HTTP layer ([`layer`]) marks each request
//! (HTTP call or WebSocket upgrade) with [`Authorized`] when its `Authorization: Bearer
//! <token>` header matches the cookie's token; the RPC middleware ([`RequireToken`]) then
//! refuses every call of a [`MUTATING`] method — alone or inside a batch — that is not
//! marked, before any method code runs. No method checks the token itself.

use std::future::Future;
use std::sync::Arc;

use jsonrpsee::Extensions;
use jsonrpsee::core::middleware::{Batch, BatchEntry, BatchEntryErr, Notification, RpcServiceT};
use jsonrpsee::server::HttpRequest;
use jsonrpsee::server::middleware::rpc::{MethodResponse, Request};
use jsonrpsee::types::ErrorObjectOwned;

use crate::error::{UNAUTHORIZED, error};

/// Every method that changes state (or writes files on the node's host) and so needs the
/// bearer token: the one table of who may call what, enforced by [`RequireToken`]; the node's
/// tests call every one without the token and expect [`UNAUTHORIZED`], and every other served
/// method with no token and expect an answer.
pub const MUTATING: &[&str] = &[
    "wallet_send",
    "job_submit",
    "job_cancel",
    "job_stop",
    "job_buildLock",
    "tx_submit",
    "job_outputs",
    "provider_unbond",
    "provider_withdraw",
    "provider_post",
    "provider_topUp",
    "storage_add",
    "storage_cat",
    "storage_exportCar",
    "storage_pieceCid",
    "storage_pin",
    "storage_unpin",
    "storage_gc",
];

/// Marker extension: the request carried the right bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Authorized;

/// Whether `given` is the cookie's `token`, compared in time independent of where the first
/// difference is (also for the web console's actions).
pub fn token_matches(given: &str, token: &str) -> bool {
    same(given.trim().as_bytes(), token.as_bytes())
}

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

/// The refusal of a mutating call without the token: [`UNAUTHORIZED`], naming the cookie file.
pub fn refusal() -> ErrorObjectOwned {
    error(
        UNAUTHORIZED,
        "unauthorized: this method changes state; send `Authorization: Bearer <token>` \
         with the token from the node's rpc.cookie file",
    )
}

/// Whether a call of `method` with `extensions` must be refused: a [`MUTATING`] method
/// without the [`Authorized`] mark.
pub fn needs_token(method: &str, extensions: &Extensions) -> bool {
    MUTATING.contains(&method) && extensions.get::<Authorized>().is_none()
}

/// The RPC middleware that enforces [`MUTATING`]: an unmarked call of a mutating method is
/// answered with [`refusal`] and never reaches the method; in a batch, each such call is
/// replaced by its refusal and the rest of the batch runs. Install it with
/// `RpcServiceBuilder::new().layer_fn(RequireToken::new)` (as [`crate::server::start`] does).
#[derive(Debug, Clone)]
pub struct RequireToken<S> {
    service: S,
}

impl<S> RequireToken<S> {
    /// Wraps `service`.
    pub fn new(service: S) -> Self {
        Self { service }
    }
}

impl<S> RpcServiceT for RequireToken<S>
where
    S: RpcServiceT<MethodResponse = MethodResponse> + Clone + Send + Sync + 'static,
{
    type MethodResponse = MethodResponse;
    type NotificationResponse = S::NotificationResponse;
    type BatchResponse = S::BatchResponse;

    fn call<'a>(&self, req: Request<'a>) -> impl Future<Output = MethodResponse> + Send + 'a {
        let service = self.service.clone();
        async move {
            if needs_token(req.method_name(), req.extensions()) {
                return MethodResponse::error(req.id, refusal());
            }
            service.call(req).await
        }
    }

    fn batch<'a>(
        &self,
        mut batch: Batch<'a>,
    ) -> impl Future<Output = Self::BatchResponse> + Send + 'a {
        for entry in batch.iter_mut() {
            if let Ok(BatchEntry::Call(req)) = entry
                && needs_token(req.method_name(), req.extensions())
            {
                let id = req.id.clone();
                *entry = Err(BatchEntryErr::new(id, refusal()));
            }
        }
        self.service.batch(batch)
    }

    fn notification<'a>(
        &self,
        n: Notification<'a>,
    ) -> impl Future<Output = Self::NotificationResponse> + Send + 'a {
        // The server answers notifications without running any method.
        self.service.notification(n)
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
    fn only_unmarked_calls_of_mutating_methods_need_the_token() {
        let mut marked = Extensions::new();
        marked.insert(Authorized);
        let unmarked = Extensions::new();
        for m in MUTATING {
            assert!(needs_token(m, &unmarked), "{m}");
            assert!(!needs_token(m, &marked), "{m}");
        }
        assert!(!needs_token("node_info", &unmarked));
        let e = refusal();
        assert_eq!(e.code(), UNAUTHORIZED);
        assert!(e.message().contains("rpc.cookie"));
    }
}

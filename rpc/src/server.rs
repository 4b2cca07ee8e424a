//! The server: HTTP and WebSocket on one address, the auth layer in front.

use std::net::SocketAddr;
use std::sync::Arc;

use jsonrpsee::server::middleware::rpc::RpcServiceBuilder;
use jsonrpsee::server::{Server, ServerHandle};
use jsonrpsee::{Methods, RpcModule};

use crate::auth;

/// A running server.
#[derive(Debug)]
pub struct Running {
    /// Stop it with `handle.stop()`; `handle.stopped().await` waits.
    pub handle: ServerHandle,
    /// The bound address (port resolved when 0 was asked).
    pub addr: SocketAddr,
}

/// Starts serving `methods` on `addr` (HTTP POST and WebSocket), requests marked by the
/// bearer check against `token` and every mutating call without it refused
/// ([`auth::RequireToken`]).
///
/// # Errors
/// The bind error (address in use, permission).
pub async fn start(
    addr: SocketAddr,
    token: &str,
    methods: impl Into<Methods>,
) -> std::io::Result<Running> {
    let middleware = tower::ServiceBuilder::new().layer(auth::layer(Arc::from(token)));
    let server = Server::builder()
        .set_http_middleware(middleware)
        .set_rpc_middleware(RpcServiceBuilder::new().layer_fn(auth::RequireToken::new))
        .build(addr)
        .await?;
    let addr = server.local_addr()?;
    let handle = server.start(methods);
    Ok(Running { handle, addr })
}

/// The method names of a module, sorted (for the OpenRPC check).
pub fn method_names<C>(module: &RpcModule<C>) -> Vec<&'static str> {
    let mut v: Vec<_> = module.method_names().collect();
    v.sort_unstable();
    v
}

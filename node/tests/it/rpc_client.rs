//! A JSON-RPC client over HTTP for the tests that call the server by method name (its
//! params and error codes are what they check), shared by `daemon::rpc` and `lifecycle::rpc`.

use jsonrpsee::core::client::Error as ClientError;
use jsonrpsee::http_client::{HeaderMap, HeaderValue, HttpClient, HttpClientBuilder};

/// An HTTP client of the server at `addr`, sending `Authorization: Bearer <token>` when given.
pub(crate) fn http(addr: std::net::SocketAddr, token: Option<&str>) -> HttpClient {
    let mut h = HeaderMap::new();
    if let Some(t) = token {
        h.insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {t}")).expect("header"),
        );
    }
    HttpClientBuilder::default()
        .set_headers(h)
        .build(format!("http://{addr}"))
        .expect("client")
}

/// The JSON-RPC error code of a failed call; panics on any other failure.
pub(crate) fn code(e: ClientError) -> i32 {
    match e {
        ClientError::Call(o) => o.code(),
        other => panic!("expected a JSON-RPC error object, got {other:?}"),
    }
}

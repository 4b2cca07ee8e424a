//! The gateway's errors at set-up (a request's failures are answered as HTTP statuses, see
//! [`crate::forward`]).

/// Why a service or a listener could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// A service name must be a URL path segment of `[a-z0-9-]`, 1–63 characters, not
    /// starting with `-` (a DNS label's form); names starting with `_` are the gateway's own.
    #[error("`{0}` is not a service name (1–63 of a-z, 0-9 and `-`, not starting with `-`)")]
    BadName(String),
    /// A service of that name is already routed.
    #[error("service `{0}` is already routed by this gateway")]
    Duplicate(String),
    /// The listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

//! JSON-RPC error codes. The standard ones (`-32700` parse, `-32600` invalid request,
//! `-32601` method not found, `-32602` invalid params) come from jsonrpsee; the node's own are
//! in the server range `-32000..=-32099`. Every error carries a readable message.

use jsonrpsee::types::ErrorObjectOwned;

/// Invalid params (JSON-RPC standard): also used for values that parse but are wrong (an
/// address on another network, an amount under min-UTxO).
pub const INVALID_PARAMS: i32 = -32602;
/// A mutating call without a valid `Authorization: Bearer <cookie>` header.
pub const UNAUTHORIZED: i32 = -32001;
/// The chain (N2C) could not be reached or answered with an error.
pub const CHAIN_UNAVAILABLE: i32 = -32002;
/// The wallet has no key, or cannot fund the transaction.
pub const WALLET: i32 = -32003;
/// The node rejected the transaction (ledger rule and reason in the message).
pub const TX_REJECTED: i32 = -32004;
/// The job engine refused: unknown job, a state that does not allow the call, or no job
/// engine running on this node.
pub const JOB: i32 = -32005;
/// The node's blockstore: a block missing, a path that cannot be read or written, a store
/// failure (`storage_*`).
pub const STORAGE: i32 = -32006;
/// Anything else inside the node.
pub const INTERNAL: i32 = -32603;

/// An error object with `code` and `message` and no data.
pub fn error(code: i32, message: impl Into<String>) -> ErrorObjectOwned {
    ErrorObjectOwned::owned::<()>(code, message.into(), None)
}

//! The web console (`[console] listen`, off by default): pages for providers, orchestrators
//! and auditors, rendered on the server from the node's own JSON-RPC methods called
//! in-process ([`source::Source`]), so every number on a page is the one the same method
//! returns to `ganglion … --json`. A job page follows a running job without reloading: a
//! small script reads the job's `job_subscribe` stream, which the console relays as
//! server-sent events on its own port (the RPC port may stay on localhost), and refreshes the
//! page's live part on each transition. No front-end build step: the script and the style
//! sheet are compiled into the binary.
//!
//! Read-only pages need no token; an action (stopping a job) asks for the RPC cookie's token
//! (`<data dir>/rpc.cookie`), kept afterwards in an HTTP-only, same-site cookie.
//!
//! - [`serve`]: the listener, its routes and the token check for actions.
//! - [`source`]: the typed in-process calls of the RPC methods the pages read.
//! - [`pages`]: one module per page: market, jobs, job, provider, search.
//! - [`html`]: the shared layout and the formatting of amounts, times and CIDs.

pub mod html;
pub mod pages;
pub mod serve;
pub mod source;

pub use serve::{Console, Serving, start};
pub use source::Source;

//! The Ganglion node: daemon and CLI.
//!
//! The subsystems (config, wallet, p2p, GPU inventory, market, dispatch, overlay, job state
//! machines, settlement, RPC) arrive with issues 6–11; see `DESIGN.md` §2 and `STYLE.md` §2
//! for the module layout they will follow. Nothing here claims to work yet.

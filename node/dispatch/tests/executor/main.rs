//! The executor against the real Docker Engine. The engine is required: a missing
//! daemon fails these tests with what to do (CI starts one with scripts/ensure-docker.sh).
//!
//! - `engine`: connect, version negotiation, runtime probe, clear errors.
//! - `sandbox`: every sandbox item on created containers, inside a running one, GPU requests.
//! - `lifecycle`: inputs from CIDs, logs and outputs pinned (CIDs equal an independent import),
//!   accounting, cleanup, image archives by CID.
//! - `bad_input`: missing image, non-zero exit, OOM, never finishes, outputs too large, engine
//!   gone.
//! - `recovery`: executor killed mid-job and restarted: the job finishes exactly once.
//! - `ddp`: PyTorch DDP over 2 and 4 containers (the torch CPU image, built when absent).
//! - `pod_connect`: a replica with no network of its own reached from inside its namespace.

mod bad_input;
mod ddp;
mod engine;
mod lifecycle;
mod pod_connect;
mod recovery;
mod sandbox;
mod support;

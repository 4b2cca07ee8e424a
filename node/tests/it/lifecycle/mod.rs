//! The job lifecycle over the real devnet, real libp2p swarms, real indexers and real Docker
//! containers: one orchestrator and two providers in this process, each with its own
//! data dir. Every wait polls a condition under `support::WAIT`; nothing sleeps for correctness.

pub(super) mod browser;
pub(super) mod support;

mod admission;
mod audit;
mod benchmark;
mod cancel;
mod cip30;
mod cli_job;
mod console;
mod content;
mod defense;
mod expire;
mod live_logs;
mod overrun;
mod placement;
mod quote;
mod rematch;
mod restart;
mod rpc;
pub(super) mod service;
mod settle;
mod silent;
mod stop;
mod terms;
mod unformed;

//! One module per page; each renders from what [`super::Source`] answers and shows a
//! notice, not an error page, for a section the node cannot answer (no chain, no swarm).

pub mod job;
pub mod jobs;
pub mod market;
pub mod provider;
pub mod search;

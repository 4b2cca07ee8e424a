//! Chain follower, marketplace event extraction and rollback-safe store (issue 4).
//!
//! This crate is a placeholder in the workspace layout fixed by `DESIGN.md` §2: it exports
//! nothing yet, and nothing in it claims to work. Its issue fills it.

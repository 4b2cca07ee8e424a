//! `ganglion-contracts` integration tests: every transaction is built, balanced, signed and
//! judged by the real Plutus evaluator (uplc) with resolved inputs; no validator function is
//! ever called with a hand-made context.

mod blueprint;
mod fees;
mod lifecycle;
mod reject;
mod signed;

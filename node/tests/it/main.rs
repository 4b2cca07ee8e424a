//! Integration tests of `ganglion-node`, one binary (STYLE §3).

mod ensembles;
mod matching_props;
mod matching_rules;
mod gpus_cli;

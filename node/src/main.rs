//! `ganglion`: the node's command line.
//!
//! Only `--help` and `--version` exist so far; every subcommand of `DESIGN.md` §8 arrives
//! with the issue that builds it, and `ganglion devnet demo` with issue 11.

use clap::Parser;

/// Ganglion: a decentralized GPU-cluster marketplace settled on Cardano.
#[derive(Debug, Parser)]
#[command(
    name = "ganglion",
    version,
    about,
    after_help = "No subcommands are available yet: they arrive with issues 6-11 (see README.md)."
)]
struct Cli {}

fn main() {
    let Cli {} = Cli::parse();
    eprintln!("ganglion: no subcommands yet; see `ganglion --help` and README.md");
    std::process::exit(2);
}

//! `ganglion`: the node's command line. Parsing only; each subcommand lives in `cli/`.

mod cli;

use clap::{Parser, Subcommand};

/// Ganglion: a decentralized GPU-cluster marketplace settled on Cardano.
#[derive(Debug, Parser)]
#[command(name = "ganglion", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show this machine's GPUs (detected and declared).
    Gpus(cli::gpus::Args),
    /// The node's wallet: key, address, balance, payments.
    Wallet(cli::wallet::Args),
    /// The embedded devnet: `ganglion devnet demo` runs a multi-provider job to payment.
    Devnet(cli::devnet::Args),
    /// Check that this machine can run a node: Docker, GPU runtime, GPUs, chain, port, disk.
    Doctor(cli::doctor::Args),
    /// Run the node: `ganglion node run [--config F]`.
    Node(cli::node::Args),
    /// Audit a job or a provider from the chain record; `audit verify` re-derives a job.
    Audit(cli::audit::Args),
    /// The live offers the running node sees, and the latency matrix (measured RTT and
    /// throughput between providers) its matcher would use.
    Market(cli::market::Args),
    /// This node as a provider: its bonds (post, top up, unbond, withdraw) and its offers.
    Provider(cli::provider::Args),
    /// The service gateway in front of replicas you name, for a `kind: service` spec.
    Gateway(cli::gateway::Args),
    /// Jobs: `ganglion job submit|quote|status|list|cancel|stop|logs|outputs` (a running
    /// node answers), `validate|import-sdl` (offline).
    Job(cli::job::Args),
    /// The node's blockstore (IPFS): `ganglion storage add|cat|export-car|piece-cid|pin|unpin|
    /// pins|gc`; a job's inputs are `storage add`ed on the orchestrator's node.
    Storage(cli::storage::Args),
    /// The rendezvous environment the executor gives one container of a job (for
    /// `scripts/gpu-check`).
    #[command(name = "rendezvous-env", hide = true)]
    RendezvousEnv(cli::rendezvous::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Gpus(args) => cli::gpus::run(args),
        Command::Wallet(args) => cli::wallet::run(args),
        Command::Doctor(args) => cli::doctor::run(args),
        Command::Devnet(args) => cli::devnet::run(args),
        Command::Node(args) => cli::node::run(args),
        Command::Audit(args) => cli::audit::run(args),
        Command::Market(args) => cli::market::run(args),
        Command::Provider(args) => cli::provider::run(args),
        Command::Gateway(args) => cli::gateway::run(args),
        Command::Job(args) => cli::job::run(args),
        Command::Storage(args) => cli::storage::run(args),
        Command::RendezvousEnv(args) => cli::rendezvous::run(args),
    }
}

//! `ganglion provider bond|unbond|withdraw|offers`: this node as a provider, asked of the
//! running node (`provider_bond`, `provider_unbond`, `provider_withdraw`, `provider_offers`).
//! The bond itself is posted by `ganglion node run` from the config's `[bond]` section.

use ganglion_rpc::amount::ntx_text;
use ganglion_rpc::audit::{BondInfo, MarketOffer};
use ganglion_rpc::types::BondTx;

use super::remote::{RemoteArgs, call, print_json};
use ganglion_rpc::api::ProviderApiClient;

/// This node as a provider (a running node answers).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Provider subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// This node's bonds on chain: stake, GPUs, free GPUs, unbonding.
    Bond,
    /// Start unbonding this node's bond: its GPUs leave the market; the stake can be
    /// withdrawn after the network's unbonding delay (the answer says from when).
    Unbond {
        /// The bond UTxO (`<tx hash hex>#<index>`); default: the node's only active bond.
        #[arg(long)]
        bond: Option<String>,
    },
    /// Withdraw the stake of this node's unbonding bond to its wallet (after the delay).
    Withdraw {
        /// The bond UTxO (`<tx hash hex>#<index>`); default: the node's only unbonding bond.
        #[arg(long)]
        bond: Option<String>,
    },
    /// This node's offers as its market holds them.
    Offers,
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let config = args.remote.config.as_deref();
    match args.command {
        Command::Bond => {
            let bonds: Vec<BondInfo> =
                call(
                    config,
                    |rpc| async move { ProviderApiClient::bond(&rpc).await },
                )?;
            if args.remote.json {
                return print_json(&bonds);
            }
            if bonds.is_empty() {
                println!(
                    "no bond: set [provider] and [bond] in the config and run `ganglion node run`"
                );
            }
            for b in &bonds {
                println!(
                    "bond {}: {} for {} GPUs ({} free), attest key {}{}",
                    b.bond,
                    ntx_text(b.stake.get()),
                    b.gpus,
                    b.free_gpus,
                    b.attest_key,
                    b.unbonding_since_ms
                        .map_or(String::new(), |s| format!(", unbonding since {s} ms"))
                );
            }
            Ok(())
        }
        Command::Unbond { bond } => {
            let t: BondTx = call(config, |rpc| async move {
                ProviderApiClient::unbond(&rpc, bond).await
            })?;
            if args.remote.json {
                return print_json(&t);
            }
            println!("unbond of {} submitted: tx {}", t.bond, t.tx_id);
            if let (Some(slot), Some(ms)) = (t.withdrawable_from_slot, t.withdrawable_from_ms) {
                println!(
                    "withdrawable from slot {slot} ({ms} POSIX ms): then run `ganglion provider withdraw`"
                );
            }
            Ok(())
        }
        Command::Withdraw { bond } => {
            let t: BondTx = call(config, |rpc| async move {
                ProviderApiClient::withdraw(&rpc, bond).await
            })?;
            if args.remote.json {
                return print_json(&t);
            }
            println!("withdraw of {} submitted: tx {}", t.bond, t.tx_id);
            Ok(())
        }
        Command::Offers => {
            let offers: Vec<MarketOffer> = call(config, |rpc| async move {
                ProviderApiClient::offers(&rpc).await
            })?;
            super::market::print_offers(&offers, args.remote.json)
        }
    }
}

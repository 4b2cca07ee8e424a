//! `ganglion provider bond [post|top-up]|unbond|withdraw|offers`: this node as a provider,
//! asked of the running node (`provider_bond`, `provider_post`, `provider_topUp`,
//! `provider_unbond`, `provider_withdraw`, `provider_offers`). The first bond is posted by
//! `ganglion node run` from the config's `[bond]` section; `bond post` posts another after a
//! withdraw, `bond top-up` adds stake (after a slash) — without a restart.

use ganglion_rpc::amount::ntx_text;
use ganglion_rpc::audit::{BondInfo, MarketOffer};
use ganglion_rpc::types::{Amount, BondTx};

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
    /// This node's bonds on chain: stake, GPUs, free GPUs, unbonding; or post or top up one.
    Bond {
        #[command(subcommand)]
        action: Option<BondAction>,
    },
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

/// `ganglion provider bond …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum BondAction {
    /// Post a new bond naming this node's keys, paid by its wallet (when it has no active
    /// bond: after `provider withdraw`, say). The node offers its GPUs under it once it is on
    /// chain.
    Post {
        /// NTX base units to stake: at least the network's minimum per GPU × GPUs.
        #[arg(long)]
        stake_ntx: u64,
        /// GPUs the bond backs; default: the GPUs the node offers.
        #[arg(long)]
        gpus: Option<u64>,
    },
    /// Add NTX to this node's active bond (same bond, more stake): after a slash left it
    /// below its minimum, its GPUs are back on the market once the top-up is on chain.
    TopUp {
        /// NTX base units to add.
        #[arg(long)]
        stake_ntx: u64,
        /// The bond UTxO (`<tx hash hex>#<index>`); default: the node's only active bond.
        #[arg(long)]
        bond: Option<String>,
    },
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let config = args.remote.config.as_deref();
    match args.command {
        Command::Bond {
            action: Some(BondAction::Post { stake_ntx, gpus }),
        } => {
            let t: BondTx = call(config, |rpc| async move {
                ProviderApiClient::post(&rpc, Amount(stake_ntx).into(), gpus).await
            })?;
            if args.remote.json {
                return print_json(&t);
            }
            println!(
                "bond of {} posted: tx {}, bond {} (offered once on chain; `ganglion provider \
                 bond` shows it)",
                ntx_text(stake_ntx),
                t.tx_id,
                t.bond
            );
            Ok(())
        }
        Command::Bond {
            action: Some(BondAction::TopUp { stake_ntx, bond }),
        } => {
            let t: BondTx = call(config, |rpc| async move {
                ProviderApiClient::top_up(&rpc, Amount(stake_ntx).into(), bond).await
            })?;
            if args.remote.json {
                return print_json(&t);
            }
            println!(
                "top-up of {} to bond {} submitted: tx {}",
                ntx_text(stake_ntx),
                t.bond,
                t.tx_id
            );
            Ok(())
        }
        Command::Bond { action: None } => {
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
                    "no bond: set [provider] and [bond] in the config and run `ganglion node \
                     run`, or post one on the running node with `ganglion provider bond post`"
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

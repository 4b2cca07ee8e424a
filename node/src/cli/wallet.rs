//! `ganglion wallet new|address|balance|send`: the node's payment key and its funds.

use std::path::PathBuf;

use anyhow::Context as _;
use ganglion_node::settings::Settings;
use ganglion_node::wallet::Wallet;

/// The node's wallet (key in the data dir, balance and payments over N2C).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Node config (TOML); `GANGLION_*` variables override it.
    #[arg(long, env = "GANGLION_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// Wallet subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Create the payment key (refuses to overwrite one).
    New {
        /// Devnet only: import the public devnet key of this seed (seeds 0..4 are funded at
        /// genesis; another seed is a valid but empty key, said on stderr).
        #[arg(long)]
        devnet_seed: Option<u32>,
    },
    /// Print the wallet's address.
    Address,
    /// Print the wallet's balance (lovelace and native assets).
    Balance,
    /// Pay lovelace (and NTX) to an address and submit.
    Send {
        /// Destination address (bech32 or hex).
        #[arg(long)]
        to: String,
        /// Lovelace to send (at least the output's min-UTxO).
        #[arg(long)]
        lovelace: u64,
        /// NTX base units to send with it.
        #[arg(long, default_value_t = 0)]
        ntx: u64,
    },
}

/// Runs the subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let settings = Settings::load(args.config.as_deref()).context("loading the settings")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let out = match args.command {
        Command::New { devnet_seed } => {
            let w = Wallet::create(settings, devnet_seed).context("creating the wallet key")?;
            if let Some(seed) = devnet_seed.filter(|s| *s >= ganglion_cardano::devnet::FUNDED_KEYS)
            {
                eprintln!(
                    "note: devnet key {seed} holds nothing at genesis (keys 0 to {} are funded): \
                     fund it from a funded wallet with `ganglion wallet send --to {}`",
                    ganglion_cardano::devnet::FUNDED_KEYS - 1,
                    w.address()
                );
            }
            serde_json::json!({ "address": w.address(), "key_hash": hex::encode(w.key().key_hash()) })
        }
        Command::Address => {
            let w = Wallet::open(settings).context("opening the wallet")?;
            serde_json::json!({ "address": w.address() })
        }
        Command::Balance => {
            let w = Wallet::open(settings).context("opening the wallet")?;
            let b = rt
                .block_on(w.balance())
                .context("reading the balance from the node")?;
            serde_json::to_value(b)?
        }
        Command::Send { to, lovelace, ntx } => {
            let w = Wallet::open(settings).context("opening the wallet")?;
            let p = rt
                .block_on(w.send(&to, lovelace, ntx))
                .context("sending the payment")?;
            serde_json::to_value(p)?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if let Some(obj) = out.as_object() {
        for (k, v) in obj {
            match v {
                serde_json::Value::String(s) => println!("{k}: {s}"),
                other => println!("{k}: {other}"),
            }
        }
    }
    Ok(())
}

//! `ganglion-devnet`: start a devnet, write a genesis, submit a transaction file, print the
//! tip, inject a rollback.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ganglion_cardano::client::N2cClient;
use ganglion_testnet::devnet::{self, DevnetConfig};
use ganglion_testnet::genesis::Genesis;
use pallas_network::miniprotocols::localstate::queries_v16;

#[derive(Parser)]
#[command(
    name = "ganglion-devnet",
    about = "Embedded Cardano devnet for Ganglion"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write the default devnet genesis JSON (system start = now).
    Genesis {
        /// Output file.
        #[arg(long)]
        out: PathBuf,
        /// Slot length in milliseconds.
        #[arg(long, default_value_t = 1000)]
        slot_length_ms: u32,
    },
    /// Run a devnet until Ctrl-C; prints its addresses as one JSON line.
    Up {
        /// Data directory (chain store, sockets).
        #[arg(long)]
        data_dir: PathBuf,
        /// Genesis JSON (default: the built-in devnet genesis, started now).
        #[arg(long)]
        genesis: Option<PathBuf>,
        /// N2N TCP address.
        #[arg(long, default_value = "127.0.0.1:3001")]
        n2n: SocketAddr,
        /// N2C TCP address.
        #[arg(long, default_value = "127.0.0.1:3002")]
        n2c_tcp: SocketAddr,
        /// The HTTP API in Blockfrost's and Kupo's conventions (what a dApp library's
        /// Blockfrost provider is pointed at); `off` serves none.
        #[arg(long, default_value = "127.0.0.1:3003")]
        http: devnet::HttpListen,
        /// Forge an empty block when no block was forged for this many seconds (slots of 1 s),
        /// so a node's confirmation depth is reached without other traffic; 0 = only blocks
        /// with transactions.
        #[arg(long, default_value_t = 5)]
        idle_block_s: u64,
    },
    /// Submit a transaction file (hex text or raw CBOR) over N2C.
    Submit {
        /// N2C Unix socket of the devnet.
        #[arg(long)]
        socket: PathBuf,
        /// Network magic.
        #[arg(long, default_value_t = 42)]
        magic: u64,
        /// Transaction file.
        file: PathBuf,
    },
    /// Print the tip (local-state-query over N2C).
    Tip {
        /// N2C Unix socket of the devnet.
        #[arg(long)]
        socket: PathBuf,
        /// Network magic.
        #[arg(long, default_value_t = 42)]
        magic: u64,
    },
    /// Roll back the last n blocks (through the control socket).
    Rollback {
        /// Control socket of the devnet (`<data_dir>/control.socket`).
        #[arg(long)]
        control: PathBuf,
        /// Number of blocks.
        n: u64,
    },
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::FAILURE
}

/// Print an error with its chain of causes.
fn fail_err(e: &dyn std::error::Error) -> ExitCode {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    fail(text)
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Genesis {
            out,
            slot_length_ms,
        } => {
            let mut g = match Genesis::devnet() {
                Ok(g) => g,
                Err(e) => return fail_err(&e),
            };
            g.slot_length_ms = slot_length_ms;
            match g.to_json().map(|j| std::fs::write(&out, j)) {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) => fail(format!("writing {}: {e}", out.display())),
                Err(e) => fail(e),
            }
        }
        Command::Up {
            data_dir,
            genesis,
            n2n,
            n2c_tcp,
            http,
            idle_block_s,
        } => {
            let (config, genesis_path) = match DevnetConfig::kept_in(
                &data_dir,
                genesis.as_deref(),
                n2n,
                n2c_tcp,
                http.0,
                idle_block_s,
            ) {
                Ok(c) => c,
                Err(e) => return fail_err(&e),
            };
            let handle = match devnet::start(config).await {
                Ok(h) => h,
                Err(e) => return fail_err(&e),
            };
            println!("{}", handle.addresses_json(&genesis_path));
            let _ = tokio::signal::ctrl_c().await;
            handle.shutdown().await;
            ExitCode::SUCCESS
        }
        Command::Submit {
            socket,
            magic,
            file,
        } => {
            let raw = match std::fs::read(&file) {
                Ok(r) => r,
                Err(e) => return fail(format!("reading {}: {e}", file.display())),
            };
            let text = String::from_utf8_lossy(&raw);
            let bytes = hex::decode(text.trim()).unwrap_or(raw);
            let mut client = match N2cClient::connect_unix(&socket, magic).await {
                Ok(c) => c,
                Err(e) => return fail_err(&e),
            };
            let r = client.submit(&bytes).await;
            client.close().await;
            match r {
                Ok(()) => {
                    println!("accepted");
                    ExitCode::SUCCESS
                }
                Err(e) => fail_err(&e),
            }
        }
        Command::Tip { socket, magic } => {
            let mut client = match N2cClient::connect_unix(&socket, magic).await {
                Ok(c) => c,
                Err(e) => return fail_err(&e),
            };
            let sq = client.statequery();
            let r = async {
                sq.acquire(None).await?;
                let p = queries_v16::get_chain_point(sq).await?;
                let n = queries_v16::get_chain_block_no(sq).await?;
                Ok::<_, pallas_network::miniprotocols::localstate::ClientError>((p, n))
            }
            .await;
            client.close().await;
            match r {
                Ok((p, n)) => {
                    println!(
                        "{}",
                        serde_json::json!({"point": format!("{p:?}"), "block_no": n.block_number})
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Rollback { control, n } => {
            match ganglion_testnet::control::request(&control, &format!("rollback {n}")).await {
                Ok(reply) => {
                    println!("{reply}");
                    if reply["ok"] == serde_json::json!(true) {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => fail(e),
            }
        }
    }
}

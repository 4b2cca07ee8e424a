//! `ganglion doctor [--json]`: read-only checks of this machine, one line each, with the fix
//! for anything that is not right. Exits 1 when a check fails (warnings do not).

use std::path::PathBuf;

use anyhow::Context as _;
use ganglion_node::doctor::{self, Verdict};
use ganglion_node::settings::Settings;

/// Check Docker, the GPU runtime, GPUs, the chain connection, the RPC port and disk space.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Node config (TOML); `GANGLION_*` variables override it.
    #[arg(long, env = "GANGLION_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Runs the checks and prints them.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let settings = Settings::load(args.config.as_deref()).context("loading the settings")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let checks = rt.block_on(doctor::run(&settings));
    if args.json {
        let out = serde_json::json!({ "ok": !doctor::failed(&checks), "checks": checks });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for c in &checks {
            let mark = match c.verdict {
                Verdict::Pass => "ok  ",
                Verdict::Warn => "warn",
                Verdict::Fail => "FAIL",
            };
            println!("[{mark}] {:<12} {}", c.name, c.detail);
            if let Some(fix) = &c.fix {
                println!("       {:<12} fix: {fix}", "");
            }
        }
    }
    if doctor::failed(&checks) {
        std::process::exit(1);
    }
    Ok(())
}

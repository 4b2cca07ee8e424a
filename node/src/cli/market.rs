//! `ganglion market`: the live, verified offers a running node sees (`market_offers`).

use ganglion_rpc::audit::MarketOffer;

use super::remote::{RemoteArgs, call, print_json};
use ganglion_rpc::api::MarketApiClient;

/// The live market as the node sees it.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// Prints offers one per line (text) or as JSON.
pub(crate) fn print_offers(offers: &[MarketOffer], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&offers);
    }
    if offers.is_empty() {
        println!("no live offers");
    }
    for o in offers {
        let free: u32 = o.gpus.iter().map(|g| g.free).sum();
        let models: Vec<_> = o.gpus.iter().map(|g| g.model.as_str()).collect();
        println!(
            "{} {} free GPUs ({}) at {}/GPU-h, score {}, {}, bond {} ({} GPUs), peer {}",
            o.provider,
            free,
            models.join(", "),
            ganglion_rpc::amount::ntx_text(o.price_per_gpu_hour.get()),
            o.score,
            if o.direct_capable {
                "direct"
            } else {
                "relay-only"
            },
            o.bond,
            o.bond_gpus,
            o.peer_id
        );
    }
    Ok(())
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let offers: Vec<MarketOffer> = call(args.remote.config.as_deref(), |rpc| async move {
        MarketApiClient::offers(&rpc).await
    })?;
    print_offers(&offers, args.remote.json)
}

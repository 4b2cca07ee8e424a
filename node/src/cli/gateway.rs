//! `ganglion gateway`: the service gateway in front of replicas you name, for a
//! `kind: service` spec's `serve` section — `/{service}/…` forwarded to the healthiest, least
//! loaded replica, with its health checks, retries, back-pressure and streaming
//! (`ganglion_gateway`). The autoscaler's rule runs on the live load and says when the spec's
//! `scale` would add or release a replica (the replicas themselves are yours to start here).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ganglion_gateway::{Autoscaler, Decision, Endpoint, Gateway, Replica};
use ganglion_market::{Ensemble, JobKind};
use tokio_util::sync::CancellationToken;

/// Serve a service's replicas behind a gateway.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The `kind: service` spec whose `serve`, `replicas` and `scale` apply.
    #[arg(long)]
    pub spec: PathBuf,
    /// A replica, `NAME=HOST:PORT` (its HTTP address; a host name is resolved once, at start);
    /// repeat for each. Names are 1–64 of `A-Z a-z 0-9 . _ -`, each given once.
    #[arg(long = "replica", value_name = "NAME=HOST:PORT", required = true, value_parser = parse_replica)]
    pub replicas: Vec<(String, SocketAddr)>,
    /// The path segment the service is served under (`/{name}/…`); default: the spec file's
    /// name without extension.
    #[arg(long)]
    pub name: Option<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
}

fn parse_replica(text: &str) -> Result<(String, SocketAddr), String> {
    let (name, host_port) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=HOST:PORT"))?;
    let name_ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !name_ok {
        return Err(format!(
            "`{name}`: a replica's name is 1–64 of A-Z a-z 0-9 . _ - (it is sent back in X-Ganglion-Replica)"
        ));
    }
    let addr = std::net::ToSocketAddrs::to_socket_addrs(host_port)
        .map_err(|e| format!("`{host_port}` is not HOST:PORT: {e}"))?
        .next()
        .ok_or_else(|| format!("`{host_port}` resolves to no address"))?;
    if addr.port() == 0 {
        return Err(format!("`{host_port}`: port 0 is not a replica's port"));
    }
    Ok((name.to_string(), addr))
}

/// Runs the subcommand until SIGINT or SIGTERM.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let text = std::fs::read_to_string(&args.spec)
        .with_context(|| format!("reading {}", args.spec.display()))?;
    let spec = Ensemble::parse(&text, ganglion_p2p::now_ms())
        .with_context(|| args.spec.display().to_string())?;
    let (JobKind::Service, Some(serve), Some(replicas)) = (spec.kind, &spec.serve, spec.replicas)
    else {
        anyhow::bail!(
            "{}: not a `kind: service` spec (a gateway serves a service's replicas)",
            args.spec.display()
        );
    };
    let name = match &args.name {
        Some(n) => n.clone(),
        None => args
            .spec
            .file_stem()
            .map(|s| s.to_string_lossy().to_lowercase())
            .unwrap_or_default(),
    };
    let mut names = std::collections::BTreeSet::new();
    for (id, _) in &args.replicas {
        anyhow::ensure!(
            names.insert(id.as_str()),
            "replica `{id}` is named twice (each --replica needs its own name)"
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let gateway = Gateway::new();
        let pool = gateway
            .add(&name, serve)
            .with_context(|| format!("routing `{name}` (give another with --name)"))?;
        for (id, addr) in &args.replicas {
            pool.add(Replica {
                id: id.clone(),
                endpoint: Endpoint::Tcp(*addr),
                rtt: None,
            });
        }
        let stop = CancellationToken::new();
        let listening = ganglion_gateway::listen(args.listen, gateway, stop.clone())
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        println!(
            "gateway: serving /{name}/ on http://{} over {} replica(s); status: GET http://{}/_gateway/services",
            listening.addr,
            args.replicas.len(),
            listening.addr
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        let mut scaler = Autoscaler::new(replicas, spec.scale.as_ref());
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        // Said once per change of advice, not every second.
        let mut said = Decision::Hold;
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                _ = ticks.tick() => {
                    let load = pool.load(Duration::from_secs(10));
                    let decision = scaler.decide(Instant::now(), &load, load.healthy);
                    if decision != said && decision != Decision::Hold {
                        tracing::info!(
                            ?decision,
                            healthy = load.healthy,
                            in_flight = load.in_flight,
                            p90_ms = load.p90_ms,
                            "autoscaler: the spec's scale rule asks for one replica {} (start or stop one and restart the gateway with it)",
                            if decision == Decision::Add { "more" } else { "fewer" }
                        );
                    }
                    said = decision;
                }
            }
        }
        tracing::info!("gateway stopping");
        stop.cancel();
        // The listener lets the requests in flight finish (at most ganglion_gateway::server::DRAIN).
        let _ = listening.task.await;
        Ok(())
    })
}

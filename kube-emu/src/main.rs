//! The `kube-emu` binary: serves the emulator on 127.0.0.1 and writes a kubeconfig for kubectl.

use clap::Parser;

/// Command line.
#[derive(Parser, Debug)]
#[command(name = "kube-emu", about = "In-memory Kubernetes API server emulator")]
struct Cli {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Where to write the kubeconfig.
    #[arg(long, default_value = "kube-emu.kubeconfig")]
    kubeconfig: std::path::PathBuf,
    /// Watch history window (events).
    #[arg(long, default_value_t = 10_000)]
    history: usize,
    /// Keep the store in this file across restarts (loaded at start, written after changes and
    /// on Ctrl-C; a corrupt file fails the start).
    #[arg(long, value_name = "FILE")]
    snapshot: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let cli = Cli::parse();
    let emu = kube_emu::Emulator::start(kube_emu::Options {
        port: cli.port,
        history_limit: cli.history,
        snapshot: cli.snapshot,
        ..Default::default()
    })
    .await?;
    std::fs::write(&cli.kubeconfig, emu.kubeconfig_yaml())?;
    eprintln!(
        "kube-emu serving on {}; kubeconfig written to {} (export KUBECONFIG={})",
        emu.url(),
        cli.kubeconfig.display(),
        cli.kubeconfig.display()
    );
    tokio::signal::ctrl_c().await?;
    emu.stop().await?;
    Ok(())
}

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
    /// Give Deployments, StatefulSets, DaemonSets, Jobs, PVCs and LoadBalancer Services the status
    /// a controller would, this long after each change (`0s`: at once); the annotation
    /// `kube-emu.opmodel.dev/simulate: fail|hold` asks for a failed or a never-ending rollout.
    #[arg(long, value_name = "DELAY", value_parser = parse_delay)]
    simulate_workloads: Option<std::time::Duration>,
}

/// `2s`, `500ms` or bare seconds.
fn parse_delay(s: &str) -> Result<std::time::Duration, String> {
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: u64 = num.parse().map_err(|_| format!("not a delay: {s:?}"))?;
    match unit {
        "s" => Ok(std::time::Duration::from_secs(n)),
        "ms" => Ok(std::time::Duration::from_millis(n)),
        _ => Err(format!("not a delay (use 2s or 500ms): {s:?}")),
    }
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
        workloads: cli
            .simulate_workloads
            .map(kube_emu::simulate::Workloads::after),
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

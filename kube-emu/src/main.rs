//! The `kube-emu` binary: serves the emulator on 127.0.0.1 (never another address) and writes
//! a kubeconfig for kubectl (cluster-admin). Flags map onto `kube_emu::Options`: `--tls` +
//! `--ca-file`, `--service-url NS/NAME=URL`, `--token TOKEN=USER[,GROUP...]`, `--audit-log`,
//! `--snapshot`, `--simulate-workloads`. The CA file and the kubeconfig are written before
//! the line announcing the URL on stderr, so a caller may read them once it sees that line.

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
    /// Give Deployments, StatefulSets, DaemonSets, Jobs, HPAs, PDBs, PVCs and LoadBalancer
    /// Services the status a controller would, this long after each change (`0s`: at once); the annotation
    /// `kube-emu.opmodel.dev/simulate: fail|hold` asks for a failed or a never-ending rollout.
    #[arg(long, value_name = "DELAY", value_parser = parse_delay)]
    simulate_workloads: Option<std::time::Duration>,
    /// Serve HTTPS with a self-signed certificate (for 127.0.0.1, localhost and
    /// kubernetes.default.svc); the kubeconfig trusts it, `--ca-file` gets its PEM.
    #[arg(long)]
    tls: bool,
    /// With `--tls`: write the serving CA (PEM) to this file.
    #[arg(long, value_name = "FILE", requires = "tls")]
    ca_file: Option<std::path::PathBuf>,
    /// Where a webhook Service resolves: `NAMESPACE/NAME=URL` (repeatable).
    #[arg(long, value_name = "NS/NAME=URL", value_parser = parse_service_url)]
    service_url: Vec<(String, String)>,
    /// A static bearer token: `TOKEN=USER[,GROUP...]` (repeatable); RBAC applies to its user.
    #[arg(long, value_name = "TOKEN=USER[,GROUP...]", value_parser = parse_token)]
    token: Vec<(String, kube_emu::UserInfo)>,
    /// Append one audit.k8s.io/v1 Event (level Metadata) per request to this file.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<std::path::PathBuf>,
}

/// `NS/NAME=URL` → (`NS/NAME`, `URL`).
fn parse_service_url(s: &str) -> Result<(String, String), String> {
    let (service, url) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAMESPACE/NAME=URL, got {s:?}"))?;
    match service.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !url.is_empty() => {
            Ok((service.to_string(), url.to_string()))
        }
        _ => Err(format!("expected NAMESPACE/NAME=URL, got {s:?}")),
    }
}

/// `TOKEN=USER[,GROUP...]` → (token, user); the user is also in `system:authenticated`.
fn parse_token(s: &str) -> Result<(String, kube_emu::UserInfo), String> {
    let (token, who) = s
        .split_once('=')
        .ok_or_else(|| format!("expected TOKEN=USER[,GROUP...], got {s:?}"))?;
    let mut parts = who.split(',').map(str::trim);
    let user = parts.next().unwrap_or("");
    if token.is_empty() || user.is_empty() {
        return Err(format!("expected TOKEN=USER[,GROUP...], got {s:?}"));
    }
    let mut groups: Vec<String> = parts
        .filter(|g| !g.is_empty())
        .map(str::to_string)
        .collect();
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    Ok((
        token.to_string(),
        kube_emu::UserInfo {
            username: user.to_string(),
            groups,
            uid: String::new(),
        },
    ))
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
        tls: cli.tls,
        service_urls: cli.service_url.into_iter().collect(),
        tokens: cli.token.into_iter().collect(),
        audit_log: cli.audit_log,
        ..Default::default()
    })
    .await?;
    if let (Some(path), Some(pem)) = (&cli.ca_file, emu.ca_pem()) {
        std::fs::write(path, pem)?;
    }
    std::fs::write(&cli.kubeconfig, emu.kubeconfig_yaml())?;
    eprintln!(
        "kube-emu serving on {}; kubeconfig written to {} (export KUBECONFIG={})",
        emu.url(),
        cli.kubeconfig.display(),
        cli.kubeconfig.display()
    );
    // Ctrl-C or SIGTERM (how a test or a process supervisor stops it): a clean stop.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    emu.stop().await?;
    Ok(())
}

//! The `opm-operator` binary: a thin CLI over the library. Each subcommand's arguments are defined in
//! the module that implements it.

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "opm-operator",
    version = opm_operator::VERSION,
    about = "Open Platform Model operator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `serve`: the HTTP server's flags and the controllers' flags.
#[derive(clap::Args, Debug)]
struct ServeCmd {
    #[command(flatten)]
    server: opm_operator::server::ServeArgs,
    #[command(flatten)]
    controllers: opm_operator::cmd::serve::ControllerArgs,
}

#[derive(Subcommand, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at start; boxing buys nothing"
)]
enum Command {
    /// Serve the admission webhooks (HTTPS), probes and metrics (plain HTTP) on every replica, and
    /// run the Platform and TransformerRegistration controllers on the elected leader.
    Serve(ServeCmd),
    /// Run the whole product on this machine with no cluster: an embedded Kubernetes API
    /// (kube-emu over HTTPS), the CRDs, the example catalog and module, a Platform and an example
    /// ModuleInstance, the webhooks, controllers and render API. Ctrl-C stops it.
    Dev(opm_operator::cmd::dev::DevArgs),
    /// Print the CustomResourceDefinitions as YAML.
    Crds,
    /// Print the OpenAPI document of the HTTP API (the content of openapi/openapi.json).
    Openapi,
    /// Work with CUE modules in OCI registries.
    #[command(subcommand)]
    Module(opm_operator::cmd::module::ModuleCommand),
    /// Render a module (MODULE@VERSION or a directory) on a platform, offline: YAML or JSON out.
    Render(opm_operator::cmd::render::RenderArgs),
}

fn main() -> anyhow::Result<()> {
    // One process-wide rustls provider (ring), installed before anything touches TLS. An error
    // means one is installed already, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => {
            let sidecar =
                opm_operator::cmd::serve::operator_sidecar(&args.server, args.controllers)?;
            Ok(opm_operator::server::run_with(args.server, Some(sidecar))?)
        }
        Command::Dev(args) => Ok(opm_operator::cmd::dev::run(args)?),
        Command::Crds => {
            print!("{}", crds::all_crds_yaml()?);
            Ok(())
        }
        Command::Openapi => {
            print!("{}", opm_operator::server::openapi::openapi_json()?);
            Ok(())
        }
        Command::Module(cmd) => Ok(opm_operator::cmd::module::run_module_command(cmd)?),
        Command::Render(args) => match opm_operator::cmd::render::run(&args) {
            Ok((out, warnings)) => {
                for w in warnings {
                    eprintln!("warning: {w}");
                }
                print!("{out}");
                Ok(())
            }
            Err(e) => Err(anyhow::anyhow!("{e}")),
        },
    }
}

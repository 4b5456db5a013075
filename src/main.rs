//! The `opm-operator` binary: a thin CLI over the library. Each subcommand's arguments are defined in
//! the module that implements it.

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "opm-operator", version, about = "Open Platform Model operator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at start; boxing buys nothing"
)]
enum Command {
    /// Serve the admission webhooks (HTTPS), probes and metrics (plain HTTP).
    Serve(opm_operator::server::ServeArgs),
    /// Print the CustomResourceDefinitions as YAML.
    Crds,
    /// Print the OpenAPI document of the HTTP API (the content of openapi/openapi.json).
    Openapi,
    /// Work with CUE modules in OCI registries.
    #[command(subcommand)]
    Module(opm_operator::registry::ModuleCommand),
    /// Render a module (MODULE@VERSION or a directory) on a platform, offline: YAML or JSON out.
    Render(opm_operator::render::cli::RenderArgs),
}

fn main() -> anyhow::Result<()> {
    // One process-wide rustls provider (ring), installed before anything touches TLS. An error
    // means one is installed already, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => Ok(opm_operator::server::run(args)?),
        Command::Crds => {
            print!("{}", crds::all_crds_yaml()?);
            Ok(())
        }
        Command::Openapi => {
            print!("{}", opm_operator::server::openapi::openapi_json()?);
            Ok(())
        }
        Command::Module(cmd) => Ok(opm_operator::registry::run_module_command(cmd)?),
        Command::Render(args) => match opm_operator::render::cli::run(&args) {
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

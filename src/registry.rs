//! CUE module registry client over OCI (skeleton; see issue #4).

/// Errors of the registry module.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {}

/// `opm-operator module ...` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum ModuleCommand {}

/// Runs a `module` subcommand.
pub fn run_module_command(cmd: ModuleCommand) -> Result<(), Error> {
    match cmd {}
}

//! HTTP server: admission webhooks over rustls, probes and metrics. (Skeleton; see issue #2.)

/// Errors of the server module.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server is not built yet.
    #[error("serve is not built yet")]
    NotBuilt,
}

/// Flags of `opm-operator serve` (operator-spec.md §7).
#[derive(clap::Args, Debug)]
pub struct ServeArgs {}

/// Runs the server until SIGTERM.
pub fn run(_args: ServeArgs) -> Result<(), Error> {
    Err(Error::NotBuilt)
}

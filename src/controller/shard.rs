//! A replica's shard (issue 32): which ModuleInstances and ModulePackages it reconciles and which
//! leader Lease it takes; what each replica runs is stated in [`super::manager`].
//!
//! Rules:
//! - `--shard NAME` must be a DNS label (it is a label value and part of the Lease name);
//!   `--shard-label` a label key (`[prefix/]name`). Anything else is refused at boot.
//! - Shard NAME selects `<label>=NAME`, leases `NAME.4cc9e43e.opmodel.dev` and reports events as
//!   `NAME/<identity>`; the unsharded replica (no or empty `--shard`) selects `!<label>` (label
//!   absent), leases `4cc9e43e.opmodel.dev` and reports as `<identity>`.

use kube::runtime::watcher;

/// The default `--shard-label`.
pub const DEFAULT_SHARD_LABEL: &str = "sharding.opmodel.dev/key";

/// Which ModuleInstances and ModulePackages a replica reconciles, and which lease it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    label: String,
    name: Option<String>,
}

impl Default for Shard {
    /// The unsharded replica with the default label.
    fn default() -> Self {
        Shard {
            label: DEFAULT_SHARD_LABEL.to_owned(),
            name: None,
        }
    }
}

/// Why `--shard` or `--shard-label` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// `--shard-label` is not a label key.
    #[error("--shard-label {0:?} is not a label key ([prefix/]name, name of 1-63 alphanumerics, '-', '_', '.', alphanumeric at both ends)")]
    Label(String),
    /// `--shard` is not usable as a label value and in the lease name.
    #[error("--shard {0:?} must be a DNS label (1-63 lowercase alphanumerics or '-', alphanumeric at both ends): it is a label value and part of the Lease name")]
    Name(String),
}

fn label_name_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn dns_label_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.first().is_some_and(|c| *c != b'-')
        && b.last().is_some_and(|c| *c != b'-')
}

fn label_key_ok(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => {
            !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.split('.').all(dns_label_ok)
                && label_name_ok(name)
        }
        None => label_name_ok(key),
    }
}

impl Shard {
    /// The shard `name` (empty: the unsharded replica) keyed by `label`.
    pub fn new(label: &str, name: &str) -> Result<Shard, ShardError> {
        if !label_key_ok(label) {
            return Err(ShardError::Label(label.to_owned()));
        }
        let name = match name {
            "" => None,
            n if dns_label_ok(n) => Some(n.to_owned()),
            n => return Err(ShardError::Name(n.to_owned())),
        };
        Ok(Shard {
            label: label.to_owned(),
            name,
        })
    }

    /// The shard's name (`None`: the unsharded replica).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The label selector of the ModuleInstance and ModulePackage watches: `label=name`, or
    /// `!label` (label absent) for the unsharded replica.
    pub fn selector(&self) -> String {
        match &self.name {
            Some(n) => format!("{}={n}", self.label),
            None => format!("!{}", self.label),
        }
    }

    /// The leader Lease of this shard: [`crds::LEADER_ELECTION_ID`], prefixed with the shard name.
    pub fn lease_name(&self) -> String {
        match &self.name {
            Some(n) => format!("{n}.{}", crds::LEADER_ELECTION_ID),
            None => crds::LEADER_ELECTION_ID.to_owned(),
        }
    }

    /// How this replica names itself in events: `identity`, or `<shard>/<identity>`.
    pub fn reporting_instance(&self, identity: &str) -> String {
        match &self.name {
            Some(n) => format!("{n}/{identity}"),
            None => identity.to_owned(),
        }
    }

    /// The watcher configuration of the ModuleInstance and ModulePackage controllers.
    pub fn watcher_config(&self) -> watcher::Config {
        watcher::Config::default().labels(&self.selector())
    }
}

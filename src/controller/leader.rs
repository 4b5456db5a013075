//! Leader election through a `coordination.k8s.io/v1` Lease (docs/design/operator.md §7.1; docs/design/principles.md
//! rule 20; the client-go `leaderelection` protocol).
//!
//! Rules implemented here:
//! - The lease `<namespace>/4cc9e43e.opmodel.dev` (a shard's: `<shard>.4cc9e43e.opmodel.dev`,
//!   one election per shard) names its holder in `spec.holderIdentity`. A
//!   candidate acquires it when it does not exist (create; AlreadyExists loses), when it has no
//!   holder, or when `renewTime + leaseDurationSeconds` has passed (takeover, counted in
//!   `leaseTransitions`). The holder renews by writing `renewTime`.
//! - Every write carries the resourceVersion just read, so of two candidates racing for one lease
//!   exactly one wins (the other gets 409 and stays a follower).
//! - A leader that cannot renew within the renew deadline stops leading (its controllers stop)
//!   before the lease can expire for the others: renew deadline < lease duration.
//! - Releasing (graceful shutdown) clears the holder and sets a 1-second duration, so a follower
//!   takes over at its next retry instead of waiting for expiry.

use std::time::Duration;

use crds::k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use crds::k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use crds::k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{ObjectMeta, PostParams};
use kube::Api;

use super::runtime::{is_not_found, Error};

/// Timing of the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a lease is valid after its last renewal (whole seconds are written).
    pub lease_duration: Duration,
    /// How long a leader keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// The interval between attempts (acquire or renew).
    pub retry_period: Duration,
}

impl Default for Timing {
    /// controller-runtime's defaults: 15 s, 10 s, 2 s.
    fn default() -> Self {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Why a timing is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// The renew deadline must be shorter than the lease duration.
    #[error("the renew deadline ({renew:?}) must be shorter than the lease duration ({lease:?})")]
    DeadlineNotBelowDuration {
        /// Renew deadline.
        renew: Duration,
        /// Lease duration.
        lease: Duration,
    },
    /// The retry period must be shorter than the renew deadline.
    #[error("the retry period ({retry:?}) must be shorter than the renew deadline ({renew:?})")]
    RetryNotBelowDeadline {
        /// Retry period.
        retry: Duration,
        /// Renew deadline.
        renew: Duration,
    },
    /// The lease duration must be at least one second (the Lease stores whole seconds).
    #[error("the lease duration must be at least 1s")]
    DurationTooShort,
}

impl Timing {
    /// Checks the ordering retry < renew deadline < lease duration.
    pub fn validate(&self) -> Result<(), TimingError> {
        if self.lease_duration < Duration::from_secs(1) {
            return Err(TimingError::DurationTooShort);
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(TimingError::DeadlineNotBelowDuration {
                renew: self.renew_deadline,
                lease: self.lease_duration,
            });
        }
        if self.retry_period >= self.renew_deadline {
            return Err(TimingError::RetryNotBelowDeadline {
                retry: self.retry_period,
                renew: self.renew_deadline,
            });
        }
        Ok(())
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// Whether a lease held with `renew` and `duration_secs` has expired at `now`.
pub fn expired(renew: Option<Timestamp>, duration_secs: Option<i32>, now: Timestamp) -> bool {
    match (renew, duration_secs) {
        (Some(renew), Some(secs)) => {
            match renew.checked_add(SignedDuration::from_secs(i64::from(secs))) {
                Ok(until) => until < now,
                // Beyond the representable range: never expires.
                Err(_) => false,
            }
        }
        _ => true,
    }
}

/// One candidate for the lease.
#[derive(Clone)]
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: Timing,
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("timing", &self.timing)
            .finish_non_exhaustive()
    }
}

impl Elector {
    /// A candidate `identity` for lease `name` in `namespace`.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timing: Timing,
    ) -> Self {
        Elector {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            timing,
        }
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The timing.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    fn what(&self) -> String {
        format!("Lease {} (leader election)", self.name)
    }

    /// One attempt: acquires or renews the lease. `Ok(true)` while this candidate holds it.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, Error> {
        let now = Timestamp::now();
        let current = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| Error::kube(self.what(), e))?;
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(self.timing.duration_seconds()),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(Error::kube(self.what(), e)),
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let mine = holder == self.identity;
        if !mine
            && !holder.is_empty()
            && !expired(
                spec.renew_time.as_ref().map(|t| t.0),
                spec.lease_duration_seconds,
                now,
            )
        {
            return Ok(false);
        }
        if !mine {
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        spec.renew_time = Some(MicroTime(now));
        spec.lease_duration_seconds = Some(self.timing.duration_seconds());
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(Error::kube(self.what(), e)),
        }
    }

    /// Releases the lease if this candidate holds it (graceful shutdown).
    pub async fn release(&self) -> Result<(), Error> {
        let mut lease = match self.api.get(&self.name).await {
            Ok(l) => l,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(Error::kube(self.what(), e)),
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        let now = Timestamp::now();
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(now));
        spec.acquire_time = Some(MicroTime(now));
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
            .map_err(|e| Error::kube(self.what(), e))
    }

    /// The current holder, if any.
    pub async fn holder(&self) -> Result<Option<String>, Error> {
        let lease = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| Error::kube(self.what(), e))?;
        Ok(lease
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_timing_is_ordered() {
        assert_eq!(Timing::default().validate(), Ok(()));
        let bad = Timing {
            lease_duration: Duration::from_secs(5),
            renew_deadline: Duration::from_secs(5),
            retry_period: Duration::from_secs(1),
        };
        assert!(matches!(
            bad.validate(),
            Err(TimingError::DeadlineNotBelowDuration { .. })
        ));
        let bad = Timing {
            lease_duration: Duration::from_secs(5),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_secs(2),
        };
        assert!(matches!(
            bad.validate(),
            Err(TimingError::RetryNotBelowDeadline { .. })
        ));
    }

    #[test]
    fn a_lease_expires_after_its_duration() {
        let t0 = Timestamp::UNIX_EPOCH;
        let at = |s: i64| {
            t0.checked_add(SignedDuration::from_secs(s))
                .unwrap_or(Timestamp::MAX)
        };
        assert!(!expired(Some(t0), Some(15), at(15)));
        assert!(expired(Some(t0), Some(15), at(16)));
        assert!(expired(None, Some(15), at(0)));
        assert!(expired(Some(t0), None, at(0)));
    }
}

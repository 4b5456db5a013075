//! The health verbs of the engine: the live health of applied objects and the wait for them
//! (docs/design/principles.md rule 7; issue 29 “Ready means healthy”).
//!
//! Rules:
//! - [`Engine::health_of`] reads, in order and at most [`super::EngineOptions::concurrency`]
//!   requests at once, every object of a render that a health check reads
//!   ([`health::needs_check`]) and assesses it in kstatus terms ([`health::assess`]); an absent
//!   object is [`health::Health::NotFound`], a read error is returned for that object alone.
//! - [`Engine::health_of_with`] adds the custom health checks ([`health::cel`]): the objects of a
//!   kind they judge are read even when [`health::needs_check`] would skip the kind (not when
//!   `opm.dev/wait: disabled`), and judged by the rules instead of kstatus. Objects
//!   `opm.dev/apply: Ignore` ([`super::policy`]) are never read.
//! - [`Engine::wait_ready`] polls every [`super::EngineOptions::wait_interval`] until each object
//!   is Current, failing fast on a terminal failure, or until the timeout, or until the
//!   cancellation fires ([`health::wait_for`]).

use std::time::Duration;

use futures::stream::{self, StreamExt};
use serde_json::Value;

use super::health::{self, Cancel};
use super::object::ObjectRef;
use super::{policy, Engine, Error};

impl Engine {
    /// The live kstatus of every object of `objects` (rendered objects) that a health check
    /// reads ([`health::needs_check`]), in order, at most [`EngineOptions::concurrency`]
    /// requests at once; an absent object is [`health::Health::NotFound`].
    pub async fn health_of(
        &self,
        objects: &[Value],
    ) -> Vec<(ObjectRef, Result<health::Health, Error>)> {
        self.health_of_with(objects, None).await
    }

    /// [`Engine::health_of`] with the custom health checks `rules` ([`health::cel`]): the objects
    /// of a kind they judge are read even when [`health::needs_check`] would skip the kind (not
    /// when `opm.dev/wait: disabled`), and judged by the rules instead of kstatus; objects
    /// `opm.dev/apply: Ignore` ([`policy`]) are not read.
    pub async fn health_of_with(
        &self,
        objects: &[Value],
        rules: Option<&health::cel::HealthRules>,
    ) -> Vec<(ObjectRef, Result<health::Health, Error>)> {
        let judged = |o: &Value| {
            rules.is_some_and(|rules| {
                let s = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or_default();
                rules.judges(s("apiVersion"), s("kind")) && !health::wait_disabled(o)
            })
        };
        let refs: Vec<ObjectRef> = objects
            .iter()
            .filter(|o| health::needs_check(o) || judged(o))
            .filter(|o| !policy::Policy::of(o).is_ok_and(|p| p.ignored()))
            .filter_map(|o| ObjectRef::of(o).ok())
            .collect();
        stream::iter(refs)
            .map(|r| async move {
                let h = match self.get_live(&r).await {
                    Ok(Some(live)) => Ok(rules
                        .and_then(|rules| rules.assess(&live))
                        .unwrap_or_else(|| health::assess(&live))),
                    Ok(None) => Ok(health::Health::NotFound),
                    Err(e) => Err(e),
                };
                (r, h)
            })
            .buffered(self.opts.concurrency.max(1))
            .collect()
            .await
    }

    /// Waits until every object in `refs` is Current (kstatus), failing fast on a terminal
    /// failure, or until `timeout`, or until `cancel` fires.
    pub async fn wait_ready(
        &self,
        refs: &[ObjectRef],
        timeout: Duration,
        cancel: Cancel,
    ) -> Result<(), Error> {
        self.wait_refs(refs, timeout, cancel).await
    }

    pub(super) async fn wait_refs(
        &self,
        refs: &[ObjectRef],
        timeout: Duration,
        cancel: Cancel,
    ) -> Result<(), Error> {
        let names: Vec<String> = refs.iter().map(ToString::to_string).collect();
        health::wait_for(
            &names,
            |i| self.get_live(&refs[i]),
            timeout,
            self.opts.wait_interval,
            cancel,
        )
        .await
    }
}

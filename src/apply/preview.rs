//! The preview of a render (the render API's `validate` and `diff` modes): what applying each
//! object would do, with both sides.
//!
//! Rules:
//! - Fail-slow: each entry is what applying that object would do (the plan of
//!   [`super::plan`]: GET and server-side dry-run with the engine's identity), or why the server
//!   refused it. Nothing is written.
//! - An invalid object (no kind or name, duplicates) fails the whole call.
//! - `live` and `planned` have `status`, `managedFields`, `resourceVersion` and `generation`
//!   removed, so any difference between them is a change the apply would make.

use futures::stream::{self, StreamExt};
use serde_json::Value;

use super::object::ObjectRef;
use super::plan::{Plan, Prepared};
use super::{Action, ApplyOptions, Engine, Error};

/// What applying one object would do, with both sides (for render previews: validate and diff).
/// `live` and `planned` have `status`, `managedFields`, `resourceVersion` and `generation`
/// removed, so any difference between them is a change the apply would make.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    /// The object.
    pub object: ObjectRef,
    /// What an apply would do.
    pub action: Action,
    /// The live object, if it exists.
    pub live: Option<Value>,
    /// The object as the server-side dry-run returned it.
    pub planned: Value,
}

impl Engine {
    /// A preview of every object, fail-slow: each entry is what applying that object would do
    /// (GET + server-side dry-run with this engine's identity), or why the server refused it.
    /// Nothing is written. An invalid object (no kind/name, duplicates) fails the whole call.
    pub async fn preview(
        &self,
        objects: &[Value],
        opts: &ApplyOptions,
    ) -> Result<Vec<(ObjectRef, Result<Preview, Error>)>, Error> {
        let prepared = self.prepare_all(objects, opts)?;
        let recreate = opts.recreate;
        let owner = opts.instance.as_ref();
        // Owned items (not `iter()`): the future must be `Send` for any caller, including an
        // axum handler, which a closure over `&Prepared` cannot prove.
        let planned: Vec<(Prepared, Result<Plan, Error>)> = stream::iter(prepared)
            .map(|p| async move {
                let r = self.plan_one(&p, recreate, owner).await;
                (p, r)
            })
            .buffered(self.opts.concurrency.max(1))
            .collect()
            .await;
        Ok(planned
            .into_iter()
            .map(|(p, r)| {
                let object = p.r.clone();
                let preview = r.map(|plan| Preview {
                    object: p.r,
                    action: plan.action,
                    live: plan.live,
                    planned: plan.planned,
                });
                (object, preview)
            })
            .collect())
    }
}

//! The one "render on a lease" entry of the operator: the REST render API and the ModuleInstance /
//! ModulePackage reconcilers both render this way.
//!
//! Rules:
//! - The caller leases the platform first (`Store::lease`), so a missing platform is answered
//!   before anything waits (a 503 or `PlatformNotReady`).
//! - The render runs on a blocking thread (the kernel is synchronous; its threads have the
//!   evaluator's stack, `opm_kernel::stack`), with the leased platform and its skew policy.
//! - The lease (and whatever else `hold` holds, e.g. a render permit) is released when the render
//!   returns, on that thread: a caller that stops waiting (a timeout) never pulls the platform
//!   directory from under a render still running.

use std::sync::Arc;

use crate::kernel::{BuiltPlatform, SkewPolicy};
use crate::platform::{Generated, LeaseGuard};

/// A platform lease: the record and the guard releasing it.
pub type Lease = (Arc<Generated<BuiltPlatform>>, LeaseGuard);

/// Runs `render` on a blocking thread with the platform of `lease`; the lease and `hold` are
/// dropped when it returns. `Err` is the blocking task's failure (a panic or a cancelled runtime).
pub async fn render_on_lease<T, H, F>(
    lease: Lease,
    hold: H,
    render: F,
) -> Result<T, tokio::task::JoinError>
where
    T: Send + 'static,
    H: Send + 'static,
    F: FnOnce(&BuiltPlatform, SkewPolicy) -> T + Send + 'static,
{
    let (record, guard) = lease;
    tokio::task::spawn_blocking(move || {
        let out = render(&record.platform, record.skew);
        drop(guard);
        drop(hold);
        out
    })
    .await
}

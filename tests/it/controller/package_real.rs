//! ModulePackage scenarios 31, 44 and 47–51, 64–66 (docs/design/operator.md §8; §2.3, §2.4) on the REAL
//! kernel: the authored instance package `fixtures/opm/package/shop` served as a tar.gz artifact
//! by the Flux stand-in of `package.rs` (an OCIRepository whose status artifact points at the
//! test's HTTP server), extracted, loaded and rendered by `opm_operator::render::Renderer` with
//! `demo` pulled from the real `docker-registry`, on the platform the real `PlatformKernel`
//! recorded (harness: `real.rs`). The package renders exactly
//! `fixtures/opm/expected/demo-valid.json` into namespace `prod`; the ModulePackage lives in
//! `team-a`.
//!
//! What the fake-renderer tests (`package.rs`) assert only as far as the reconciler carries it is
//! asserted here end to end: the objects applied are the expected render; a new artifact
//! revision with other values updates them and prunes the content-hash ConfigMap it renamed; the
//! real loader refuses a package whose root is a `Module` (UnsupportedKind); the kernel's values,
//! resolution and instance errors stall with their own words; a repeated failure emits one
//! Warning although every reconcile extracts the artifact into a new temporary directory; and the
//! gates (dependsOn, source, fetch) hold the real render until they open.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crds::conditions::types;
use crds::module_package::{ModulePackage, ModulePackageStatus};
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::Api;
use kube_emu::fault::{FaultKind, FaultRule};
use opm_operator::controller::context::{Context, Reconciled};
use opm_operator::controller::outcome::Outcome;
use opm_operator::controller::package::source::kind_resource;
use opm_operator::controller::{manager, package};
use opm_operator::inventory;
use serde_json::json;

use super::common::*;
use super::package::{
    create_base, depending_on_base, digest, fetch_failed, install_oci_repository_crd,
    mark_base_ready, raw_tgz, serve, serve_artifact, set_source, shop_files, test_package, tgz_of,
    Artifacts,
};
use super::real::*;
use crate::platform::gen::opm;

const NS: &str = "team-a";
const NAME: &str = "pkg";
const SRC: &str = "src";
const FIVE_MIN: Duration = Duration::from_secs(300);
const STALLED: Duration = Duration::from_secs(30 * 60);
/// The package's module path, which names it in the kernel's messages.
const PACKAGE: &str = "fixtures.test/packages/shop@v0";

/// The real harness, namespaces `team-a` (packages) and `prod` (the rendered objects), the
/// artifact server.
struct Pkg {
    r: Real,
    artifacts: Artifacts,
    addr: SocketAddr,
}

/// `flux`: the OCIRepository CRD installed; `platform`: Platform `cluster` (mini) recorded.
async fn pkg_with(flux: bool, platform: bool, customise: impl FnOnce(&mut Context)) -> Pkg {
    let r = rendering(customise).await;
    namespace(&r.client, NS).await;
    namespace(&r.client, SHOP_NS).await;
    if flux {
        install_oci_repository_crd(&r.client).await;
    }
    if platform {
        record(&r, &[(MINI, None)]).await;
    }
    let artifacts = Artifacts::default();
    let addr = serve(artifacts.clone()).await;
    Pkg { r, artifacts, addr }
}

async fn pkg() -> Pkg {
    pkg_with(true, true, |_| {}).await
}

/// The shop package with each `(path, text)` of `replace` written over (or added to) its files
/// under `app/`, and the files of `drop` left out.
fn shop(replace: &[(&str, &str)], drop: &[&str]) -> Files {
    let mut files = shop_files();
    files.retain(|(p, _)| !drop.contains(&p.as_str()) && !replace.iter().any(|(r, _)| r == p));
    for (p, text) in replace {
        files.push(((*p).to_owned(), text.as_bytes().to_vec()));
    }
    files
}

/// The shop package's `values.cue` with `edit` applied to the original text.
fn shop_values(from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(opm("package/shop/values.cue")).unwrap();
    assert_eq!(text.matches(from).count(), 1, "{from:?} in values.cue");
    text.replace(from, to)
}

impl Pkg {
    fn packages(&self) -> Api<ModulePackage> {
        Api::namespaced(self.r.client.clone(), NS)
    }

    async fn reconcile(&self) -> Reconciled {
        self.reconcile_named(NAME).await
    }

    async fn reconcile_named(&self, name: &str) -> Reconciled {
        package::reconcile(NS, name, &self.r.ctx).await.unwrap()
    }

    async fn get(&self) -> ModulePackage {
        self.packages().get(NAME).await.unwrap()
    }

    async fn status(&self) -> ModulePackageStatus {
        self.get().await.status.unwrap()
    }

    async fn ready_condition(&self) -> (String, String, String) {
        condition(&self.status().await.conditions, types::READY).unwrap()
    }

    /// Serves `files` as a tar.gz at revision `revision`; returns (url, digest).
    async fn publish(&self, revision: &str, files: &Files) -> (String, String) {
        self.publish_bytes(revision, tgz_of(files)).await
    }

    async fn publish_bytes(&self, revision: &str, bytes: Vec<u8>) -> (String, String) {
        let d = digest(&bytes);
        let url = serve_artifact(
            &self.r.client,
            &self.artifacts,
            self.addr,
            revision,
            bytes,
            &d,
        )
        .await;
        (url, d)
    }

    /// Creates package `mp` and runs the finalizer reconcile.
    async fn create(&self, mp: ModulePackage) {
        let name = mp.metadata.name.clone().unwrap();
        create(&self.packages(), mp).await;
        let out = self.reconcile_named(&name).await;
        assert_eq!(
            out.requeue,
            Some(Duration::ZERO),
            "finalizer first: {out:?}"
        );
    }

    /// Reconciles once and checks the stall (`assert_stalled`); returns the message.
    async fn stalled(&self, reason: &str) -> String {
        let out = self.reconcile().await;
        assert_stalled(&out, &self.status().await.conditions, reason)
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_47_the_shop_package_is_fetched_rendered_and_follows_new_revisions() {
    let p = pkg().await;
    let (url, d) = p.publish("main@sha1:aaaa", &shop_files()).await;
    p.create(test_package()).await;

    let out = p.reconcile().await;
    assert_eq!(
        (out.reason, out.requeue, out.outcome),
        (
            Some("ReconciliationSucceeded"),
            Some(FIVE_MIN),
            Some(Outcome::Applied)
        ),
        "{:?}",
        p.get().await.status
    );
    let mp = p.get().await;
    let s = mp.status.clone().unwrap();
    let src = s.source.clone().unwrap();
    assert_eq!(src.r#ref.as_deref(), Some("OCIRepository/team-a/src"));
    assert_eq!(src.artifact_revision.as_deref(), Some("main@sha1:aaaa"));
    assert_eq!(src.artifact_digest.as_deref(), Some(d.as_str()));
    assert_eq!(src.artifact_url.as_deref(), Some(url.as_str()));
    assert_shop_applied(&p.r, &s.reconcile).await;
    // The Source digest is the artifact digest verbatim, the Config digest that of no values.
    assert_eq!(s.reconcile.last_applied_source_digest, Some(d.clone()));
    assert_eq!(
        s.reconcile.last_applied_config_digest,
        Some(inventory::config_digest(None))
    );
    assert_eq!(s.reconcile.inventory.as_ref().unwrap().revision, 1);
    assert_eq!(s.reconcile.history.len(), 1);
    assert_eq!(s.observed_generation, mp.metadata.generation);
    assert_eq!(
        condition(&s.conditions, types::READY).unwrap(),
        (
            "True".into(),
            "ReconciliationSucceeded".into(),
            "Reconciliation succeeded".into()
        )
    );
    assert_eq!(
        one_event(&events(&p.r.client, NAME, "Applied").await).2,
        "Applied 3 resources (3 created, 0 updated, 0 unchanged)"
    );
    assert_eq!(
        events(&p.r.client, NAME, "ReconciliationSucceeded")
            .await
            .len(),
        1
    );

    // The same artifact again: NoOp after the real render, requeue after the interval, the
    // history and attempt fields untouched.
    let renders = p.r.renderer.renders();
    let out = p.reconcile().await;
    assert_eq!(
        (out.outcome, out.requeue),
        (Some(Outcome::NoOp), Some(FIVE_MIN))
    );
    assert_eq!(p.r.renderer.renders(), renders + 1);
    let again = p.status().await;
    assert_eq!(again.reconcile.history, s.reconcile.history);
    assert_eq!(
        again.reconcile.last_attempted_at,
        s.reconcile.last_attempted_at
    );
    assert_eq!(
        one_event(&events(&p.r.client, NAME, "NoOp").await).2,
        "No changes detected"
    );

    // A new revision with other values: the Deployment is updated, the hosts ConfigMap renamed
    // by its content hash and the old one pruned.
    let values = shop_values("replicas: 3", "replicas: 2").replace(
        "hosts: [\"a.example\", \"b.example\"]",
        "hosts: [\"a.example\"]",
    );
    let (_, d2) = p
        .publish("main@sha1:bbbb", &shop(&[("app/values.cue", &values)], &[]))
        .await;
    let out = p.reconcile().await;
    assert_eq!(out.outcome, Some(Outcome::AppliedAndPruned), "{out:?}");
    assert_eq!(replicas(&p.r).await, Some(2));
    assert!(live_cm(&p.r, HOSTS).await.is_none(), "pruned");
    let s = p.status().await;
    let inv = s.reconcile.inventory.unwrap();
    assert_eq!((inv.revision, inv.count), (2, 3));
    let hosts: Vec<&str> = inv
        .entries
        .iter()
        .filter(|e| e.name.starts_with("shop-hosts-"))
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(hosts.len(), 1);
    assert_eq!(
        live_cm(&p.r, hosts[0]).await.unwrap().data.unwrap()["hosts"],
        "a.example"
    );
    let src = s.source.unwrap();
    assert_eq!(src.artifact_revision.as_deref(), Some("main@sha1:bbbb"));
    assert_eq!(s.reconcile.last_applied_source_digest, Some(d2));
    assert_eq!(
        one_event(&events(&p.r.client, NAME, "Pruned").await).2,
        "Pruned 1 stale resources"
    );

    // A custom interval is the requeue.
    patch_spec(&p.packages(), NAME, json!({"interval": "90s"})).await;
    assert_eq!(p.reconcile().await.requeue, Some(Duration::from_secs(90)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_50_64_the_real_loader_and_kernel_stall_package_failures_once() {
    let p = pkg().await;
    let module_cue = std::fs::read_to_string(opm("package/shop/cue.mod/module.cue")).unwrap();
    let demo_pin = "\"fixtures.test/modules/demo@v0\": {\n\t\tv: \"v0.1.0\"";
    assert_eq!(module_cue.matches(demo_pin).count(), 1);
    let unpublished = module_cue.replace(
        demo_pin,
        "\"fixtures.test/modules/demo@v0\": {\n\t\tv: \"v0.9.9\"",
    );
    let mut files = shop_files();
    files.push(("docs/readme.md".into(), b"no package here".to_vec()));
    p.publish("r-docs", &files).await;

    // 50: a missing path, a `..` path and a directory without instance.cue stall before any
    // render.
    let mut mp = test_package();
    mp.spec.path = "./missing".into();
    p.create(mp).await;
    let message = p.stalled("PathNotFound").await;
    assert!(message.contains("missing"), "{message}");
    patch_spec(&p.packages(), NAME, json!({"path": "app/../../etc"})).await;
    let message = p.stalled("PathNotFound").await;
    assert!(message.contains("must not contain `..`"), "{message}");
    let evs = events(&p.r.client, NAME, "PathNotFound").await;
    assert_eq!(evs.len(), 2, "one Warning per distinct message");
    assert!(evs.iter().all(|e| e.action.as_deref() == Some("Load")));
    patch_spec(&p.packages(), NAME, json!({"path": "docs"})).await;
    p.stalled("InstanceFileNotFound").await;
    assert_eq!(p.r.renderer.renders(), 0);
    patch_spec(&p.packages(), NAME, json!({"path": "./app"})).await;

    // The real loader: a root embedding the demo *module* is not an instance package.
    let module_root = "package shop\n\nimport demo \"fixtures.test/modules/demo@v0\"\n\ndemo\n";
    p.publish(
        "r-module",
        &shop(&[("app/instance.cue", module_root)], &["app/values.cue"]),
    )
    .await;
    let message = p.stalled("UnsupportedKind").await;
    assert_eq!(
        message,
        format!(
            "{PACKAGE}: not an OPM module instance package: kind is \"Module\", not \
             \"ModuleInstance\""
        )
    );
    // 64: the same failure again (extracted into another temporary directory): the same
    // message, no second Warning.
    assert_eq!(p.stalled("UnsupportedKind").await, message);
    let (ty, action, note) = one_event(&events(&p.r.client, NAME, "UnsupportedKind").await);
    assert_eq!(
        (ty.as_str(), action.as_str(), note.as_str()),
        ("Warning", "Render", message.as_str())
    );

    // The kernel's errors: values out of the schema's bounds (ResolutionFailed naming
    // `values.replicas` and the bound in the demo module), a module version never published
    // (ResolutionFailed), an invalid instance (RenderFailed naming the field). Each once.
    let over = shop_values("replicas: 3", "replicas: 11");
    let cases: [(&str, Files, &str, &str); 3] = [
        (
            "ResolutionFailed",
            shop(&[("app/values.cue", &over)], &[]),
            "invalid values",
            "values.replicas: invalid value 11 (out of bound <=10) \
             (fixtures.test/modules/demo@v0.1.0/module.cue:33:",
        ),
        (
            "ResolutionFailed",
            shop(&[("app/cue.mod/module.cue", &unpublished)], &[]),
            "the module does not load",
            "fixtures.test/modules/demo@v0.9.9: not found",
        ),
        (
            "RenderFailed",
            shop(
                &[(
                    "app/broken.cue",
                    "package shop\n\n#module: #components: web: metadata: labels: tier: \
                     \"backend\"\n",
                )],
                &[],
            ),
            "the instance is not valid",
            "components.web.metadata.labels.tier: conflicting values \"backend\" and \
             \"frontend\"",
        ),
    ];
    for (i, (reason, files, head, detail)) in cases.iter().enumerate() {
        p.publish(&format!("r-bad-{i}"), files).await;
        let message = p.stalled(reason).await;
        assert!(
            message.starts_with(&format!("{PACKAGE}: {head}\n")) && message.contains(detail),
            "{message}"
        );
        assert_eq!(
            p.stalled(reason).await,
            message,
            "stable across extractions"
        );
        let evs = events(&p.r.client, NAME, reason).await;
        assert_eq!(
            evs.iter()
                .filter(|e| e.note.as_deref() == Some(message.as_str()))
                .count(),
            1,
            "one Warning for {message}"
        );
    }
    assert!(live_cm(&p.r, "settings").await.is_none(), "nothing applied");

    // The fix renders.
    p.publish("r-good", &shop_files()).await;
    let out = p.reconcile().await;
    assert_eq!(out.reason, Some("ReconciliationSucceeded"), "{out:?}");
    assert!(condition(&p.status().await.conditions, types::STALLED).is_none());
    assert_shop_applied(&p.r, &p.status().await.reconcile).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_48_49_51_the_gates_hold_the_real_render_until_they_open() {
    let p = pkg().await;
    let mp = depending_on_base();
    p.create(mp).await;

    // 51: the dependency is missing, then not Ready: DependenciesNotReady, requeue interval.
    let out = p.reconcile().await;
    assert_eq!(
        (out.reason, out.requeue),
        (Some("DependenciesNotReady"), Some(FIVE_MIN))
    );
    assert_eq!(
        p.ready_condition().await,
        (
            "False".into(),
            "DependenciesNotReady".into(),
            "waiting for dependency team-a/base (not found)".into()
        )
    );
    create_base(&p.packages()).await;
    assert_eq!(p.reconcile().await.reason, Some("DependenciesNotReady"));
    assert_eq!(
        p.ready_condition().await.2,
        "waiting for dependency team-a/base"
    );
    mark_base_ready(&p.packages()).await;
    // A dependency in another namespace is refused with the cross-namespace message.
    patch_spec(
        &p.packages(),
        NAME,
        json!({"dependsOn": [{"name": "base", "namespace": "other"}]}),
    )
    .await;
    let out = p.reconcile().await;
    assert_eq!(
        (out.reason, out.requeue),
        (Some("DependenciesNotReady"), Some(FIVE_MIN))
    );
    let message = p.ready_condition().await.2;
    assert!(
        message.contains("cross-namespace dependencies are not supported"),
        "{message}"
    );
    patch_spec(
        &p.packages(),
        NAME,
        json!({"dependsOn": [{"name": "base"}]}),
    )
    .await;

    // 48: a source of kind HelmChart is unsupported and a missing source (both Stalled, 30 min);
    // a source not ready, then one without an artifact (soft blocks, requeue interval).
    patch_spec(
        &p.packages(),
        NAME,
        json!({"sourceRef": {"kind": "HelmChart", "name": SRC}}),
    )
    .await;
    let message = p.stalled("SourceNotReady").await;
    assert!(message.contains("HelmChart"), "{message}");
    patch_spec(
        &p.packages(),
        NAME,
        json!({"sourceRef": {"kind": "OCIRepository", "name": SRC}}),
    )
    .await;
    let message = p.stalled("SourceNotReady").await;
    assert!(
        message.contains("OCIRepository/team-a/src not found"),
        "{message}"
    );
    set_source(&p.r.client, NS, SRC, false, None).await;
    let out = p.reconcile().await;
    assert_eq!(
        (out.reason, out.requeue),
        (Some("SourceNotReady"), Some(FIVE_MIN))
    );
    assert!(p.ready_condition().await.2.contains("is not ready"));
    set_source(&p.r.client, NS, SRC, true, None).await;
    assert_eq!(p.reconcile().await.requeue, Some(FIVE_MIN));
    assert!(p.ready_condition().await.2.contains("has no artifact"));

    // 49: a digest mismatch and a `..` entry fail the fetch; nothing is written outside.
    let good = tgz_of(&shop_files());
    let url = serve_artifact(
        &p.r.client,
        &p.artifacts,
        p.addr,
        "r-mismatch",
        good.clone(),
        &digest(b"something else"),
    )
    .await;
    assert!(url.ends_with("/r-mismatch.tar.gz"));
    let out = p.reconcile().await;
    fetch_failed(&p.r.client, &p.get().await, out, "digest mismatch").await;
    let escape = format!("../pkg-real-escape-{}.txt", std::process::id());
    p.publish_bytes(
        "r-dotdot",
        raw_tgz(&[
            ("app/instance.cue", b'0', "", b"x"),
            (&escape, b'0', "", b"pwned"),
        ]),
    )
    .await;
    let out = p.reconcile().await;
    fetch_failed(
        &p.r.client,
        &p.get().await,
        out,
        "escapes the extraction directory",
    )
    .await;
    assert!(!std::env::temp_dir()
        .join(escape.trim_start_matches("../"))
        .exists());
    assert_eq!(p.r.renderer.renders(), 0, "no gate let a render through");
    assert!(live_cm(&p.r, "settings").await.is_none());

    // Every gate open: the real render is applied.
    p.publish_bytes("r-good", good).await;
    let out = p.reconcile().await;
    assert_eq!(out.reason, Some("ReconciliationSucceeded"), "{out:?}");
    assert_shop_applied(&p.r, &p.status().await.reconcile).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_44_package_deletion_prunes_fail_slow_orphans_and_stalls_on_a_lost_sa() {
    let p = pkg().await;
    p.publish("r1", &shop_files()).await;

    // Suspend never blocks deletion; one failed delete keeps the finalizer and returns the
    // error after the other deletes; the retry finishes.
    p.create(test_package()).await;
    assert_eq!(p.reconcile().await.reason, Some("ReconciliationSucceeded"));
    patch_spec(&p.packages(), NAME, json!({"suspend": true})).await;
    assert_eq!(p.reconcile().await.reason, Some("Suspended"));
    p.packages()
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    let fired = p.r.emu.faults_fired();
    p.r.emu.inject_fault(
        FaultRule::any(1, FaultKind::Internal)
            .method(http::Method::DELETE)
            .path_contains("/deployments/shop-web"),
    );
    assert!(package::reconcile(NS, NAME, &p.r.ctx).await.is_err());
    assert_eq!(p.r.emu.faults_fired(), fired + 1);
    assert!(live_cm(&p.r, "settings").await.is_none());
    assert!(live_cm(&p.r, HOSTS).await.is_none());
    assert!(deployments(&p.r)
        .get_opt("shop-web")
        .await
        .unwrap()
        .is_some());
    assert!(p.packages().get_opt(NAME).await.unwrap().is_some());
    assert_eq!(p.reconcile().await, Reconciled::done());
    assert!(deployments(&p.r)
        .get_opt("shop-web")
        .await
        .unwrap()
        .is_none());
    assert!(p.packages().get_opt(NAME).await.unwrap().is_none());

    // prune=false: released, every object kept.
    let mut keep = test_package();
    keep.metadata.name = Some("keep".into());
    keep.spec.prune = Some(false);
    p.create(keep).await;
    assert_eq!(
        p.reconcile_named("keep").await.reason,
        Some("ReconciliationSucceeded")
    );
    p.packages()
        .delete("keep", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(p.reconcile_named("keep").await, Reconciled::done());
    assert!(p.packages().get_opt("keep").await.unwrap().is_none());
    assert_eq!(replicas(&p.r).await, Some(3), "orphaned");

    // The ServiceAccount in effect is gone: Stalled DeletionSAMissing (one Warning across
    // retries, nothing deleted); `"true"` orphans in the same pass.
    let mut sa = test_package();
    sa.metadata.name = Some("sa".into());
    p.create(sa).await;
    assert_eq!(
        p.reconcile_named("sa").await.reason,
        Some("ReconciliationSucceeded")
    );
    patch_spec(
        &p.packages(),
        "sa",
        json!({"serviceAccountName": "deploy-sa"}),
    )
    .await;
    p.packages()
        .delete("sa", &DeleteParams::default())
        .await
        .unwrap();
    for _ in 0..2 {
        let out = p.reconcile_named("sa").await;
        assert_eq!(
            (out.reason, out.requeue),
            (Some("DeletionSAMissing"), Some(STALLED))
        );
    }
    let s = p.packages().get("sa").await.unwrap().status.unwrap();
    let (_, _, message) = condition(&s.conditions, types::STALLED).unwrap();
    assert!(
        message.contains("ServiceAccount team-a/deploy-sa not found"),
        "{message}"
    );
    assert_eq!(
        events(&p.r.client, "sa", "DeletionSAMissing").await.len(),
        1
    );
    assert!(live_cm(&p.r, "settings").await.is_some(), "nothing deleted");
    p.packages()
        .patch(
            "sa",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "opm.dev/force-delete-orphan": "true"
            }}})),
        )
        .await
        .unwrap();
    assert_eq!(p.reconcile_named("sa").await, Reconciled::done());
    assert!(p.packages().get_opt("sa").await.unwrap().is_none());
    assert!(
        one_event(&events(&p.r.client, "sa", "OrphanedOnDeletion").await)
            .2
            .starts_with("Orphaned 3 managed resources")
    );
    assert!(live_cm(&p.r, "settings").await.is_some(), "orphaned");
}

/// Scenarios 31, 65 and 66 through the running controllers, without the Flux CRDs and without a
/// Platform at start: the package waits on its missing source; the CRD and a source with an
/// artifact appear (the source watch starts and enqueues it) and it waits on PlatformNotReady
/// (its own requeue is 5 minutes away); the Platform recorded enqueues it and the real render is
/// applied; status-only updates of the source and of the package render nothing; a new artifact
/// revision and a spec change do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_31_65_66_the_running_controllers_follow_the_source_the_platform_and_the_spec() {
    let p = pkg_with(false, false, |c| {
        c.source_discovery_interval = Duration::from_millis(200);
    })
    .await;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(manager::run_controllers(Arc::clone(&p.r.ctx), stop_rx));
    create(&p.packages(), test_package()).await;
    let reason_is = |want: &'static str| {
        let p = &p;
        move || async move {
            p.packages()
                .get(NAME)
                .await
                .unwrap()
                .status
                .and_then(|s| condition(&s.conditions, types::READY))
                .is_some_and(|c| c.1 == want)
        }
    };
    let waited_on_source = eventually(20, reason_is("SourceNotReady")).await;
    install_oci_repository_crd(&p.r.client).await;
    p.publish("r1", &shop_files()).await;
    let waited_on_platform = eventually(20, reason_is("PlatformNotReady")).await;
    create(&platforms(&p.r.client), plat(&[(MINI, None)])).await;
    let applied = eventually(20, reason_is("ReconciliationSucceeded")).await;
    let first = replicas(&p.r).await;
    // Let the start-up wakes settle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let settled = p.r.renderer.renders();
    // A status-only change of the source (same artifact) and of the package: nothing renders.
    let sources: Api<DynamicObject> = Api::namespaced_with(
        p.r.client.clone(),
        NS,
        &kind_resource("OCIRepository", "v1"),
    );
    sources
        .patch_status(
            SRC,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observedGeneration": 7}})),
        )
        .await
        .unwrap();
    patch_status(
        &p.packages(),
        NAME,
        json!({"lastAttemptedAction": "by-hand"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let after_status = p.r.renderer.renders();
    // A new revision re-renders and applies.
    let values = shop_values("replicas: 3", "replicas: 2");
    p.publish("r2", &shop(&[("app/values.cue", &values)], &[]))
        .await;
    let revised = eventually(20, || async { replicas(&p.r).await == Some(2) }).await;
    // A spec change renders.
    let before_spec = p.r.renderer.renders();
    patch_spec(&p.packages(), NAME, json!({"interval": "7m"})).await;
    let spec_rendered = eventually(10, || async { p.r.renderer.renders() > before_spec }).await;
    stop_tx.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(20), task).await;
    assert!(waited_on_source, "no SourceNotReady without the Flux CRDs");
    assert!(
        waited_on_platform,
        "the source watch did not enqueue the package"
    );
    assert!(applied, "the recorded Platform did not enqueue the package");
    assert_eq!(first, Some(3));
    assert_eq!(after_status, settled, "a status-only update rendered again");
    assert!(revised, "a new artifact revision was not applied");
    assert!(spec_rendered, "a spec change was not reconciled");
}

//! Signed modules in the reconcilers (`spec.verify`, issue 41): where the trusted keys come from
//! and how a render or a platform build is held to them. The signature layout and the check by
//! digest are the registry client's (`opm_registry::verify`, `client` docs).
//!
//! Rules:
//! - Keys: every data key ending in `.pub` of the Secret `spec.verify.secretRef.name` (PEM
//!   `PUBLIC KEY`, P-256), read with the controller's identity at every reconcile that needs
//!   them. A ModuleInstance's Secret is in its own namespace; the Platform's in the operator's
//!   namespace ([`Context::operator_namespace`], `--leader-elect-namespace`, which defaults to the
//!   Pod's `POD_NAMESPACE`). A missing Secret, one without a `*.pub` key, or a key that does not
//!   parse is `Ready=False` reason `VerificationFailed` naming the Secret and the key; a failed
//!   read (403, 5xx) is a reconcile error.
//! - Platform `spec.verify` sets the registry-wide policy of the process's client
//!   ([`Signatures::require`]) before the platform is generated and built, and clears it when
//!   the field is removed: from then on every module and catalog any render of the cluster
//!   fetches (ModuleInstance, ModulePackage, the render API) and every catalog the platform build
//!   reads must verify with one of those keys. A catalog that does not fails the build with
//!   `VerificationFailed` and the last good package keeps serving (but renders verify what they
//!   fetch themselves). A package recorded under other keys is built again.
//! - ModuleInstance `spec.verify` requires its module (the coordinate of `spec.module`) to verify
//!   with one of its own keys, in addition to the Platform's policy; the render fetches through
//!   a verifying view of the shared client ([`Signatures::render`]), so the module is verified by
//!   digest before any of its bytes is read, and a failure (of the module, or under the
//!   Platform's policy of a dependency) is `Ready=False` `VerificationFailed` naming the module
//!   and why: nothing is rendered, applied or pruned.
//! - A key rotation (new content of the Secret) takes effect at the next reconcile of the object
//!   (the Secret is not watched; `reconcile.fluxcd.io/requestedAt` asks for one now): verified
//!   digests are cached per key set, so new keys verify again.

use std::sync::{Arc, Mutex, PoisonError};

use crds::k8s_openapi::api::core::v1::Secret;
use crds::verify::Verify;
use kube::Api;

use super::runtime::Error;
use crate::kernel::{
    BuiltPlatform, ErrorClass, KernelError, ModuleRequest, RenderResult, SkewPolicy,
};
use crate::registry::{ModuleRegistry, TrustedKeys, VerifyingRegistry};
use crate::render::Renderer;

/// The signature side of the kernel: the shared registry client (its registry-wide policy) and
/// the renderer that fetches through verifying views of it.
pub struct Signatures {
    registry: Arc<ModuleRegistry>,
    renderer: Renderer,
    /// `(package identity, key fingerprint)` of the platform package last built under a policy.
    built: Mutex<Option<(String, String)>>,
}

impl std::fmt::Debug for Signatures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signatures")
            .field("required", &self.registry.required())
            .finish_non_exhaustive()
    }
}

impl Signatures {
    /// Signatures over the shared client `registry`; `renderer` is the kernel's renderer (its
    /// limits and runtime name are kept, its registry replaced per render).
    pub fn new(registry: Arc<ModuleRegistry>, renderer: Renderer) -> Signatures {
        Signatures {
            registry,
            renderer,
            built: Mutex::new(None),
        }
    }

    /// Sets (or clears) the registry-wide policy (Platform `spec.verify`).
    pub fn require(&self, keys: Option<Arc<TrustedKeys>>) {
        self.registry.require(keys);
    }

    /// The registry-wide policy in force.
    pub fn required(&self) -> Option<Arc<TrustedKeys>> {
        self.registry.required()
    }

    /// Whether the platform package `identity` was built under `keys` (module docs).
    pub fn built_under(&self, identity: &str, keys: Option<&TrustedKeys>) -> bool {
        let built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        match (keys, built.as_ref()) {
            (None, _) => true,
            (Some(k), Some((id, fp))) => id == identity && fp == k.fingerprint(),
            (Some(_), None) => false,
        }
    }

    /// Records that the package `identity` was built under `keys`.
    pub fn record_built(&self, identity: &str, keys: Option<&TrustedKeys>) {
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        *built = keys.map(|k| (identity.to_owned(), k.fingerprint().to_owned()));
    }

    /// Renders `req` on `platform` through a verifying view: the module must also verify with
    /// `keys` when given. A verification failure anywhere in the render is class
    /// [`ErrorClass::Verification`] with the registry's message (module and why).
    pub fn render(
        &self,
        req: &ModuleRequest,
        platform: &BuiltPlatform,
        skew: SkewPolicy,
        keys: Option<Arc<TrustedKeys>>,
    ) -> Result<RenderResult, KernelError> {
        let view = Arc::new(VerifyingRegistry::new(
            self.registry.clone(),
            keys.map(|k| (req.path.clone(), k)),
        ));
        let renderer = self.renderer.with_registry(view.clone());
        renderer
            .render(req, platform, skew)
            .map_err(|e| match view.failure() {
                Some(failure) => KernelError::new(ErrorClass::Verification, failure.to_string()),
                None => KernelError::from(e),
            })
    }
}

/// Why the trusted keys could not be had.
#[derive(Debug)]
pub enum KeysError {
    /// The Secret is missing or holds no usable key: `Ready=False` `VerificationFailed`
    /// with this message.
    Unusable(String),
    /// The Secret could not be read (a reconcile error).
    Read(Error),
}

fn unusable(message: String) -> KeysError {
    KeysError::Unusable(message)
}

/// The trusted keys of `verify` from its Secret in `namespace` (module docs).
pub async fn trusted_keys(
    client: &kube::Client,
    namespace: &str,
    verify: &Verify,
) -> Result<Arc<TrustedKeys>, KeysError> {
    let name = &verify.secret_ref.name;
    let shown = format!("Secret {namespace}/{name}");
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api.get_opt(name).await.map_err(|e| {
        KeysError::Read(Error::kube(
            format!("reading the verification keys ({shown})"),
            e,
        ))
    })?;
    let Some(secret) = secret else {
        return Err(unusable(format!(
            "spec.verify: {shown} (the public keys) not found"
        )));
    };
    let entries: Vec<(String, Vec<u8>)> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k.ends_with(".pub"))
        .map(|(k, v)| (k, v.0))
        .collect();
    if entries.is_empty() {
        return Err(unusable(format!(
            "spec.verify: {shown} holds no *.pub public key"
        )));
    }
    TrustedKeys::from_pems(&shown, &entries)
        .map(Arc::new)
        .map_err(|e| unusable(format!("spec.verify: {shown}: {e}")))
}

//! `spec.verify`: the signature policy of a Platform (every module and catalog the cluster
//! renders) or of a ModuleInstance (its module), in the shape of Flux's OCIRepository
//! `spec.verify`.
//!
//! Rules (the operator enforces them; the types only carry them):
//! - `provider` is `cosign` (the only provider; key-based: keyless signatures, Fulcio/Rekor and
//!   Flux's `matchOIDCIdentity`, are not supported).
//! - The public keys are every data key of the Secret `secretRef.name` whose name ends in `.pub`
//!   (PEM `PUBLIC KEY`, ECDSA P-256, as `cosign generate-key-pair` writes `cosign.pub`); a module
//!   verifies when one of its signatures verifies with any one of them. The Secret of a
//!   ModuleInstance is in the instance's namespace; that of the Platform in the operator's own
//!   namespace (`--namespace`, the Pod's namespace).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The signature provider.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VerifyProvider {
    /// Cosign key-based signatures (`sha256-<digest>.sig`, simple signing, ECDSA P-256).
    #[default]
    Cosign,
}

/// A reference to a Secret by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretRef {
    /// The Secret's name.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// Require signed modules: verified by digest before any byte of a module is evaluated;
/// unsigned, wrong key or tampered is `Ready=False` reason `VerificationFailed`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Verify {
    /// `cosign`.
    pub provider: VerifyProvider,
    /// The Secret holding the trusted public keys, one per `*.pub` data key.
    pub secret_ref: SecretRef,
}

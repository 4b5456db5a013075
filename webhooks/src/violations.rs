//! Collects every rule violation of one request (field path + message) so a denial lists them all,
//! in the order the rules ran, and collects warnings the same way.

/// The findings of one admission request.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    violations: Vec<String>,
    warnings: Vec<String>,
}

impl Findings {
    /// Records a violation of the field at `path` (e.g. `spec.catalog`).
    pub(crate) fn deny(&mut self, path: impl AsRef<str>, msg: impl AsRef<str>) {
        self.violations
            .push(format!("{}: {}", path.as_ref(), msg.as_ref()));
    }

    /// Records a warning about the field at `path`.
    pub(crate) fn warn(&mut self, path: impl AsRef<str>, msg: impl AsRef<str>) {
        self.warnings
            .push(format!("{}: {}", path.as_ref(), msg.as_ref()));
    }

    /// Ratcheting: turns another findings' violations into warnings of this one (a stored object's
    /// faults, reported but not enforced on a metadata-only update).
    pub(crate) fn ratchet(&mut self, stored: Findings) {
        for v in stored.violations {
            self.warnings.push(format!(
                "stored object violates an admission rule (allowed because spec is unchanged): {v}"
            ));
        }
        self.warnings.extend(stored.warnings);
    }

    /// Turns the findings into a response built from the request (so the uid is echoed): denied with
    /// every violation joined by `"; "` when there is any, allowed otherwise; warnings ride along in
    /// both cases.
    pub(crate) fn respond(
        self,
        resp: kube_core::admission::AdmissionResponse,
    ) -> kube_core::admission::AdmissionResponse {
        let mut resp = resp;
        if !self.warnings.is_empty() {
            resp.warnings = Some(self.warnings);
        }
        if self.violations.is_empty() {
            resp
        } else {
            let msg = self.violations.join("; ");
            let mut resp = resp.deny(msg);
            resp.result.code = 422;
            resp.result.reason = "Invalid".to_owned();
            resp
        }
    }
}

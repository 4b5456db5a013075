//! Collects every rule violation of one request (field path + message) so a denial lists them all,
//! in the order the rules ran, and collects warnings the same way.
//!
//! A denial is HTTP-status-like 422 `Invalid` (the API server reports it as "admission webhook ...
//! denied the request: `<message>`"): `message` joins every violation with `"; "`, and
//! `details.causes` carries one `FieldValueInvalid` cause per violation with its field path.

use kube_core::response::{StatusCause, StatusDetails, StatusSummary};

use crate::view::RequestView;

/// Longest single violation message (bytes); longer ones (echoing huge user input) are cut.
const MAX_MESSAGE: usize = 512;

/// The findings of one admission request.
#[derive(Debug, Default)]
pub(crate) struct Findings<'r> {
    violations: Vec<String>,
    causes: Vec<StatusCause>,
    warnings: Vec<String>,
    name: &'r str,
    kind: &'r str,
}

impl<'r> Findings<'r> {
    /// Findings for one request: the denial's `status.details` name its object and kind.
    pub(crate) fn for_request(req: &'r RequestView<'_>) -> Self {
        Findings {
            name: &req.name,
            kind: &req.kind.kind,
            ..Findings::default()
        }
    }

    /// Records a violation of the field at `path` (e.g. `spec.catalog`, or a
    /// [`crate::common::FieldPath`], formatted only here). The denial joins violations with `"; "`,
    /// so that separator inside one message (possible only through user input echoed back) is
    /// rewritten to `", "` to keep the list splittable, and a message echoing huge input is cut at
    /// [`MAX_MESSAGE`] bytes.
    pub(crate) fn deny(&mut self, path: impl std::fmt::Display, msg: impl AsRef<str>) {
        let path = path.to_string();
        let mut msg = msg.as_ref().replace("; ", ", ");
        if msg.len() > MAX_MESSAGE {
            let mut cut = MAX_MESSAGE;
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            msg.truncate(cut);
            msg.push_str("...");
        }
        self.violations.push(format!("{path}: {msg}"));
        self.causes.push(StatusCause {
            reason: "FieldValueInvalid".to_owned(),
            message: msg,
            field: path,
        });
    }

    /// Records a warning about the field at `path`.
    pub(crate) fn warn(&mut self, path: impl std::fmt::Display, msg: impl AsRef<str>) {
        self.warnings.push(format!("{path}: {}", msg.as_ref()));
    }

    /// Ratcheting: turns another findings' violations into warnings of this one (a stored object's
    /// faults, reported but not enforced on a metadata-only update).
    pub(crate) fn ratchet(&mut self, stored: Findings<'_>) {
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
            resp.result.status = Some(StatusSummary::Failure);
            resp.result.code = 422;
            resp.result.reason = "Invalid".to_owned();
            resp.result.details = Some(StatusDetails {
                name: self.name.to_owned(),
                group: crds::GROUP.to_owned(),
                kind: self.kind.to_owned(),
                uid: String::new(),
                causes: self.causes,
                retry_after_seconds: 0,
            });
            resp
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn violations_stay_splittable_and_bounded() {
        let mut f = Findings::default();
        f.deny("spec.type", "a; b");
        f.deny("spec.catalog", "é".repeat(1000));
        assert_eq!(f.violations[0], "spec.type: a, b");
        assert!(f.violations[1].len() <= "spec.catalog: ".len() + MAX_MESSAGE + 3);
        assert!(f.violations[1].ends_with("..."));
    }
}

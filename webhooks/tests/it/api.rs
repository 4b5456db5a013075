//! Response shape and dispatch: the uid is echoed, the review's type meta is copied, denials carry
//! status code 422, routes map to kinds, and typed builders from the crds crate pass validation.

use kube_core::admission::{AdmissionRequest, AdmissionReview, Operation};
use kube_core::DynamicObject;
use webhooks::WebhookKind;

fn request(kind: &str, op: &str, object: serde_json::Value, old: serde_json::Value) -> Vec<u8> {
    let plural = format!("{}s", kind.to_lowercase());
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "abc-123",
            "kind": {"group": "opmodel.dev", "version": "v1alpha1", "kind": kind},
            "resource": {"group": "opmodel.dev", "version": "v1alpha1", "resource": plural},
            "operation": op,
            "userInfo": {"username": "admin"},
            "object": object,
            "oldObject": old,
        }
    }))
    .unwrap()
}

#[test]
fn typed_fixtures_from_crds_are_allowed() {
    let p = serde_json::to_value(crds::Platform::test()).unwrap();
    let r = webhooks::review(
        WebhookKind::Platform,
        &request("Platform", "CREATE", p, serde_json::Value::Null),
    )
    .unwrap();
    let resp = r.response.unwrap();
    assert!(resp.allowed, "{}", resp.result.message);
    let t = serde_json::to_value(crds::TransformerRegistration::test()).unwrap();
    let r = webhooks::review(
        WebhookKind::TransformerRegistration,
        &request(
            "TransformerRegistration",
            "CREATE",
            t,
            serde_json::Value::Null,
        ),
    )
    .unwrap();
    assert!(r.response.unwrap().allowed);
}

#[test]
fn response_echoes_uid_and_type_meta() {
    let p = serde_json::to_value(crds::Platform::test().named("prod")).unwrap();
    let review = webhooks::review(
        WebhookKind::Platform,
        &request("Platform", "CREATE", p, serde_json::Value::Null),
    )
    .unwrap();
    let json = serde_json::to_value(&review).unwrap();
    assert_eq!(json["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(json["kind"], "AdmissionReview");
    assert!(
        json.get("request").is_none(),
        "the response review carries no request"
    );
    assert_eq!(json["response"]["uid"], "abc-123");
    assert_eq!(json["response"]["allowed"], false);
    assert_eq!(json["response"]["status"]["code"], 422);
    assert!(json["response"]["status"]["message"]
        .as_str()
        .unwrap()
        .starts_with("metadata.name: "));
}

#[test]
fn validate_functions_are_callable_directly() {
    let body = request(
        "TransformerRegistration",
        "UPDATE",
        serde_json::to_value(crds::TransformerRegistration::test().with_provides(&[])).unwrap(),
        serde_json::to_value(crds::TransformerRegistration::test()).unwrap(),
    );
    let req: AdmissionRequest<DynamicObject> = webhooks::parse_request(&body).unwrap();
    assert_eq!(req.operation, Operation::Update);
    let resp = webhooks::validate_transformer_registration(&req);
    assert!(resp.allowed);
    assert_eq!(resp.uid, "abc-123");
    assert_eq!(resp.warnings.unwrap().len(), 1);
    // The same request on the Platform webhook is a misrouted kind.
    let resp = webhooks::validate_platform(&req);
    assert!(!resp.allowed);
    assert!(resp.result.message.starts_with("request.kind: "));
}

#[test]
fn a_response_review_serializes_as_into_review_does() {
    let allowed = request(
        "Platform",
        "CREATE",
        serde_json::to_value(crds::Platform::test()).unwrap(),
        serde_json::Value::Null,
    );
    let denied = request(
        "Platform",
        "CREATE",
        serde_json::to_value(crds::Platform::test().named("prod")).unwrap(),
        serde_json::Value::Null,
    );
    for (body, expect_allowed) in [(allowed, true), (denied, false)] {
        let req = webhooks::RequestView::parse(&body).unwrap();
        let resp = WebhookKind::Platform.validate_view(&req);
        assert_eq!(resp.allowed, expect_allowed, "{}", resp.result.message);
        assert_eq!(
            serde_json::to_string(&webhooks::ResponseReview::new(&resp)).unwrap(),
            serde_json::to_string(&resp.clone().into_review()).unwrap()
        );
    }
}

#[test]
fn routes_map_to_kinds() {
    for kind in WebhookKind::ALL {
        assert_eq!(WebhookKind::from_path(kind.path()), Some(kind));
        assert!(kind.path().ends_with(kind.plural()));
    }
    assert_eq!(WebhookKind::from_path("/validate/other"), None);
}

#[test]
fn review_output_parses_as_a_review() {
    let p = serde_json::to_value(crds::Platform::test()).unwrap();
    let review = webhooks::review(
        WebhookKind::Platform,
        &request("Platform", "CREATE", p, serde_json::Value::Null),
    )
    .unwrap();
    let text = serde_json::to_string(&review).unwrap();
    let back: AdmissionReview<DynamicObject> = serde_json::from_str(&text).unwrap();
    assert!(back.response.unwrap().allowed);
}

#[test]
fn garbage_never_panics() {
    // Byte strings around the shapes the parser distinguishes; every one must return, not panic.
    let inputs: [&[u8]; 8] = [
        b"",
        b"\xff\xfe",
        b"null",
        b"{\"apiVersion\": 1}",
        b"{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionReview\", \"request\": 7}",
        b"{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionReview\", \"request\": {\"uid\": 7}}",
        b"{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionReview\", \"request\": {\"uid\": \"u\"}}",
        b"{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionReview\", \"request\": {\"uid\": \"u\", \"kind\": {}, \"resource\": {}, \"operation\": \"CREATE\", \"userInfo\": {}, \"object\": {\"spec\": [1]}}}",
    ];
    for input in inputs {
        for kind in WebhookKind::ALL {
            let r = webhooks::review(kind, input);
            if let Ok(review) = r {
                assert!(
                    !review.response.unwrap().allowed,
                    "{:?}",
                    String::from_utf8_lossy(input)
                );
            }
        }
    }
}

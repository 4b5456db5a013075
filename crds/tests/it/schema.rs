//! Invariants of the generated CRDs (docs/design/operator.md §1): scope, short names, printer columns,
//! the status subresource, conditions as a list-map keyed by `type`, CEL rules, required fields.

use serde_json::Value;

fn crd(kind: &str) -> Value {
    let crd = crds::all_crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .unwrap();
    serde_json::to_value(crd).unwrap()
}

fn schema(c: &Value) -> &Value {
    &c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
}

fn columns(c: &Value) -> Vec<(String, String)> {
    c["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|col| {
            (
                col["name"].as_str().unwrap().to_owned(),
                col["jsonPath"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn names_scope_and_subresources() {
    for (kind, short, scope) in [
        ("ModuleInstance", "mi", "Namespaced"),
        ("ModulePackage", "mpkg", "Namespaced"),
        ("Platform", "plat", "Cluster"),
        ("TransformerRegistration", "treg", "Cluster"),
    ] {
        let c = crd(kind);
        assert_eq!(c["spec"]["group"], "opmodel.dev", "{kind}");
        assert_eq!(c["spec"]["scope"], scope, "{kind}");
        assert_eq!(
            c["spec"]["names"]["shortNames"],
            serde_json::json!([short]),
            "{kind}"
        );
        let v = &c["spec"]["versions"][0];
        assert_eq!(v["name"], "v1alpha1");
        assert_eq!(v["served"], true);
        assert_eq!(v["storage"], true);
        assert_eq!(
            v["subresources"]["status"],
            serde_json::json!({}),
            "{kind} has a status subresource"
        );
    }
}

#[test]
fn conditions_are_a_list_map_keyed_by_type() {
    for kind in [
        "ModuleInstance",
        "ModulePackage",
        "Platform",
        "TransformerRegistration",
    ] {
        let c = crd(kind);
        let status = &schema(&c)["properties"]["status"]["properties"];
        let conds = &status["conditions"];
        assert_eq!(conds["x-kubernetes-list-type"], "map", "{kind}");
        assert_eq!(
            conds["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"]),
            "{kind}"
        );
        assert!(
            conds["items"]["required"]
                .as_array()
                .unwrap()
                .contains(&"type".into()),
            "{kind}"
        );
        assert_eq!(status["observedGeneration"]["type"], "integer", "{kind}");
    }
}

#[test]
fn printer_columns() {
    let ready = ".status.conditions[?(@.type==\"Ready\")].status".to_owned();
    let has = |kind: &str, name: &str, path: &str| {
        assert!(
            columns(&crd(kind)).contains(&(name.to_owned(), path.to_owned())),
            "{kind} lacks column {name} = {path}"
        );
    };
    has("ModuleInstance", "Ready", &ready);
    has("ModuleInstance", "Module", ".spec.module.path");
    has("ModuleInstance", "Version", ".spec.module.version");
    has("ModuleInstance", "Retry", ".status.nextRetryAt");
    has("ModulePackage", "Source", ".spec.sourceRef.name");
    has("ModulePackage", "Path", ".spec.path");
    has(
        "ModulePackage",
        "Revision",
        ".status.source.artifactRevision",
    );
    has("Platform", "Type", ".spec.type");
    has("Platform", "Ready", &ready);
    has(
        "Platform",
        "Reason",
        ".status.conditions[?(@.type==\"Ready\")].reason",
    );
    has("Platform", "Operator", ".status.operatorVersion");
    has("TransformerRegistration", "Catalog", ".spec.catalog");
    has("TransformerRegistration", "Version", ".spec.version");
    has("TransformerRegistration", "Accepted", ".status.accepted");
    has("TransformerRegistration", "Active", ".status.active");
    let retry = crd("ModuleInstance")["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Retry")
        .cloned()
        .unwrap();
    assert_eq!(
        (retry["type"].as_str(), retry["priority"].as_i64()),
        (Some("date"), Some(1))
    );
}

#[test]
fn cel_rules() {
    let rule = |kind: &str| {
        schema(&crd(kind))["x-kubernetes-validations"][0]["rule"]
            .as_str()
            .map(str::to_owned)
    };
    assert_eq!(
        rule("Platform").as_deref(),
        Some("self.metadata.name == 'cluster'")
    );
    assert_eq!(
        rule("TransformerRegistration").as_deref(),
        Some("self.metadata.name.contains('.')")
    );
    let msg = schema(&crd("Platform"))["x-kubernetes-validations"][0]["message"].clone();
    assert_eq!(
        msg,
        "Platform is a cluster singleton; the only permitted name is 'cluster'"
    );
}

#[test]
fn required_fields() {
    let req = |c: &Value, pointer: &str| -> Vec<String> {
        c.pointer(pointer)
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    };
    let tr = crd("TransformerRegistration");
    let spec = "/spec/versions/0/schema/openAPIV3Schema/properties/spec";
    assert_eq!(
        req(&tr, &format!("{spec}/required")),
        ["catalog", "providerRef", "provides", "version"]
    );
    assert_eq!(
        req(&tr, &format!("{spec}/properties/providerRef/required")),
        ["name", "namespace"]
    );
    let p = crd("Platform");
    assert_eq!(req(&p, &format!("{spec}/required")), ["type"]);
    let entry = format!("{spec}/properties/registry/additionalProperties");
    assert_eq!(req(&p, &format!("{entry}/required")), ["version"]);
    assert!(
        p.pointer(&format!("{entry}/properties/version/default"))
            .is_none(),
        "version has no default"
    );
    assert_eq!(
        p.pointer(&format!("{spec}/properties/skewPolicy/enum"))
            .unwrap(),
        &serde_json::json!(["Warn", "Refuse"])
    );
    let mi = crd("ModuleInstance");
    assert_eq!(
        req(&mi, &format!("{spec}/properties/module/required")),
        ["path", "version"]
    );
    assert_eq!(
        mi.pointer(&format!(
            "{spec}/properties/module/properties/path/minLength"
        ))
        .unwrap(),
        1
    );
    assert_eq!(
        mi.pointer(&format!(
            "{spec}/properties/values/x-kubernetes-preserve-unknown-fields"
        ))
        .unwrap(),
        true
    );
    assert_eq!(
        mi.pointer(&format!("{spec}/properties/owner/enum"))
            .unwrap(),
        &serde_json::json!(["cli", "operator"])
    );
    assert_eq!(
        mi.pointer("/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/requiredContracts/x-kubernetes-list-type")
            .unwrap(),
        "atomic"
    );
    let mp = crd("ModulePackage");
    assert_eq!(req(&mp, &format!("{spec}/required")), ["path", "sourceRef"]);
}

/// Structural-schema rules the API server enforces: every node has a `type` (or preserves unknown
/// fields), and none uses `$ref`, `anyOf`/`oneOf`/`allOf` with types, `additionalProperties` together
/// with `properties`, or `definitions`.
fn check_structural(node: &Value, at: &str, errs: &mut Vec<String>) {
    let Some(obj) = node.as_object() else { return };
    if !obj.contains_key("type")
        && obj.get("x-kubernetes-preserve-unknown-fields") != Some(&Value::Bool(true))
    {
        errs.push(format!("{at}: no type"));
    }
    for banned in ["$ref", "anyOf", "oneOf", "allOf", "definitions", "$defs"] {
        if obj.contains_key(banned) {
            errs.push(format!("{at}: uses {banned}"));
        }
    }
    if obj.contains_key("properties") && obj.contains_key("additionalProperties") {
        errs.push(format!("{at}: properties and additionalProperties"));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            check_structural(v, &format!("{at}.{k}"), errs);
        }
    }
    if let Some(items) = obj.get("items") {
        check_structural(items, &format!("{at}[]"), errs);
    }
    if let Some(ap) = obj.get("additionalProperties").filter(|v| v.is_object()) {
        check_structural(ap, &format!("{at}{{}}"), errs);
    }
}

#[test]
fn schemas_are_structural() {
    for kind in [
        "ModuleInstance",
        "ModulePackage",
        "Platform",
        "TransformerRegistration",
    ] {
        let c = crd(kind);
        let mut errs = Vec::new();
        check_structural(schema(&c), kind, &mut errs);
        assert!(errs.is_empty(), "{errs:#?}");
    }
}

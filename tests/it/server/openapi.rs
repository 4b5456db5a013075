//! `openapi/openapi.json` is generated from the handlers and must match the checked-in file.

#[test]
fn openapi_json_is_up_to_date() {
    let generated = opm_operator::server::openapi::openapi_json().unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/openapi.json");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "openapi/openapi.json is out of date; regenerate it with \
         `UPDATE_EXPECT=1 cargo test --test it openapi` (or `opm-operator openapi > openapi/openapi.json`)"
    );
}

#[test]
fn openapi_documents_every_route_and_the_error_shape() {
    let doc: serde_json::Value =
        serde_json::from_str(&opm_operator::server::openapi::openapi_json().unwrap()).unwrap();
    for path in [
        "/validate/transformerregistrations",
        "/validate/platforms",
        "/healthz",
        "/readyz",
        "/metrics",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} missing");
    }
    let error = &doc["components"]["schemas"]["ErrorBody"];
    assert_eq!(error["required"], serde_json::json!(["error"]), "{error}");
    let codes = &doc["components"]["schemas"]["ErrorCode"]["enum"];
    for code in opm_operator::server::ErrorCode::ALL {
        assert!(
            codes.as_array().unwrap().iter().any(|c| c == code.as_str()),
            "{} missing from {codes}",
            code.as_str()
        );
    }
}

/// Every 403 body the render API sends is described: the Status shape (SAR denied) and the error
/// shape (diff: the named ModuleInstance may not be read).
#[test]
fn the_render_403_documents_both_shapes() {
    let doc: serde_json::Value =
        serde_json::from_str(&opm_operator::server::openapi::openapi_json().unwrap()).unwrap();
    let forbidden = &doc["paths"]["/v1/namespaces/{ns}/render"]["post"]["responses"]["403"];
    assert_eq!(
        forbidden["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ForbiddenBody",
        "{forbidden}"
    );
    let one_of = doc["components"]["schemas"]["ForbiddenBody"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["$ref"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>();
    assert_eq!(
        one_of,
        [
            "#/components/schemas/KubeStatus",
            "#/components/schemas/ErrorBody"
        ],
        "{}",
        doc["components"]["schemas"]["ForbiddenBody"]
    );
}

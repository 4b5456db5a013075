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

//! Credentials from a docker config file against a registry that requires HTTP basic auth.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use cue::module::{ModuleVersion, RegistryError};
use opm_operator::registry::auth::Credentials;
use opm_operator::registry::{Mapping, ModuleRegistry, RegistryConfig};

use crate::registry::harness::{cli_with_docker_config, fixtures, test_timeouts, DistRegistry};

/// `opm:s3cret`, bcrypt cost 4 (a throwaway test credential).
const HTPASSWD: &str = "opm:$2b$04$0zVJB0arNHpSeNBQUXDsPefQBHk1ofO3iMx/o4LsrS1excnKBukOK";

fn docker_config(host: &str, user_pass: &str) -> tempfile::TempDir {
    use base64::Engine as _;
    let d = tempfile::tempdir().unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(user_pass);
    std::fs::write(
        d.path().join("config.json"),
        format!("{{\"auths\": {{\"{host}\": {{\"auth\": \"{auth}\"}}}}}}"),
    )
    .unwrap();
    d
}

fn client(reg: &DistRegistry, creds: Credentials) -> ModuleRegistry {
    let mut cfg = RegistryConfig::new(Mapping::parse(&reg.mapping()).unwrap());
    cfg.timeouts = test_timeouts();
    cfg.credentials = creds;
    ModuleRegistry::new(cfg).unwrap()
}

#[test]
fn docker_config_credentials_authenticate_publish_and_fetch() {
    let reg = DistRegistry::start_with_auth(HTPASSWD);
    let good = docker_config(&reg.host, "opm:s3cret");
    let dir = fixtures().join("schema");
    let spec = reg.mapping();
    let args = [
        "module",
        "publish",
        dir.to_str().unwrap(),
        "v0.1.0",
        "--registry",
        &spec,
    ];
    let o = cli_with_docker_config(&args, good.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let m = ModuleVersion {
        path: "fixtures.test/schema@v0".into(),
        version: "v0.1.0".into(),
    };
    let creds = Credentials::from_file(&good.path().join("config.json")).unwrap();
    let f = client(&reg, creds).fetch_module(&m).unwrap();
    assert!(f.files.iter().any(|(p, _)| p == "schema.cue"));

    // Anonymous and wrong-password access are refused as Denied, naming the coordinate.
    for creds in [
        Credentials::anonymous(),
        Credentials::parse(
            format!(
                "{{\"auths\": {{\"{}\": {{\"username\": \"opm\", \"password\": \"nope\"}}}}}}",
                reg.host
            )
            .as_bytes(),
        )
        .unwrap(),
    ] {
        match client(&reg, creds).fetch_module(&m) {
            Err(RegistryError::Denied { module, .. }) => {
                assert_eq!(module, "fixtures.test/schema@v0.1.0")
            }
            other => panic!("expected Denied, got {other:?}"),
        }
    }
    let bad = docker_config(&reg.host, "opm:wrong");
    let o = cli_with_docker_config(&args, bad.path());
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("fixtures.test/schema@v0.1.0") && err.contains("denied"),
        "{err}"
    );
}

//! Shared fixtures: the Widget custom resource, its CRD, and helpers.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::core::Status;
use kube::CustomResource;
use kube_emu::{Emulator, Options};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The test custom resource.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema, PartialEq)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    pub size: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
}

/// Its status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The Widget CRD, written by hand so the schema exercises enum, default, required and
/// preserve-unknown-fields.
pub fn widget_crd() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["size"],
                            "properties": {
                                "size": {"type": "string", "enum": ["S", "M", "L"]},
                                "color": {"type": "string", "default": "blue"},
                                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                "ports": {
                                    "type": "array",
                                    "x-kubernetes-list-type": "map",
                                    "x-kubernetes-list-map-keys": ["name"],
                                    "items": {"type": "object", "required": ["name"], "properties": {
                                        "name": {"type": "string"}, "port": {"type": "integer"}}}
                                }
                            }
                        },
                        "status": {
                            "type": "object",
                            "properties": {
                                "ready": {"type": "boolean"},
                                "observedGeneration": {"type": "integer"},
                                "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
                            }
                        }
                    }
                }}
            }]
        }
    })
}

/// Starts an emulator with default options.
pub async fn start() -> Emulator {
    Emulator::start(Options::default()).await.unwrap()
}

/// Starts an emulator and installs the Widget CRD.
pub async fn start_with_widgets() -> (Emulator, kube::Client) {
    let emu = start().await;
    let client = emu.client().unwrap();
    install_widget_crd(&client).await;
    (emu, client)
}

/// Installs the Widget CRD.
pub async fn install_widget_crd(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(widget_crd()).unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
}

/// A Widget object.
pub fn widget(name: &str, size: &str) -> Widget {
    Widget::new(
        name,
        WidgetSpec {
            size: size.into(),
            color: None,
        },
    )
}

/// The Status of an API error (panics on other errors).
pub fn api_status(e: kube::Error) -> Box<Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

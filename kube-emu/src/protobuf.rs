//! Kubernetes protobuf request bodies (`Content-Type: application/vnd.kubernetes.protobuf`),
//! decoded to the JSON the rest of the emulator works on.
//!
//! Why: kubectl ≥ 1.3x sends its typed writes of built-in kinds (`kubectl create namespace`,
//! `create configmap|secret|deployment|service|serviceaccount|job|role|rolebinding|clusterrole|
//! clusterrolebinding`, `auth can-i`) as protobuf, and client-go has no fallback for it: a 415
//! answer is only a cue to stop sending CBOR (checked: kubectl 1.37.1 reports the 415 as the
//! command's error and never retries in JSON). Everything else kubectl and kube-rs send is JSON.
//!
//! Rules implemented:
//! - The body is the 4-byte magic `k8s\0` and a `runtime.Unknown` (typeMeta 1 {apiVersion 1,
//!   kind 2}, raw 2, contentEncoding 3, contentType 4); `raw` is the kind's message. A body
//!   without the magic, with a content encoding, or of a kind not in the table is 400 BadRequest.
//! - Each message is decoded by a field table (field number → JSON name, type) transcribed from
//!   the upstream `generated.proto` files for the kinds kube-emu serves and the messages they
//!   reach; a field number the table lacks is 400 BadRequest naming the message and number, so
//!   nothing a client sent is silently dropped.
//! - JSON shape as the Go types marshal it: an embedded Go struct (`ProbeHandler` in `Probe`,
//!   `VolumeSource` in `Volume`, `LocalObjectReference` in the key selectors) is inlined;
//!   `Time` is RFC 3339 (zero time omitted), `MicroTime` RFC 3339 with microseconds, `Quantity`
//!   its string, `IntOrString` an integer or a string, `FieldsV1` and `RawExtension` their JSON
//!   bytes, ``map<string, bytes>` values base64. Maps are `{key: value}` objects.
//! - Go's non-pointer scalars are always on the wire; their zero value (`""`, 0, false) is
//!   omitted, as `omitempty` does in JSON. Fields marked as pointers in the table keep zeros
//!   (`replicas: 0`, `automountServiceAccountToken: false`). Messages are kept even when empty
//!   (`resources: {}`), as Go marshals non-pointer structs.

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::api_error::{ApiError, ApiResult};
use crate::timefmt;

/// The Kubernetes protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The magic prefix of a protobuf-encoded Kubernetes object.
const MAGIC: &[u8] = b"k8s\0";

/// Whether a `Content-Type` header names the Kubernetes protobuf encoding.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type.split(';').next().map(str::trim) == Some(MEDIA_TYPE)
}

/// A field's value type.
#[derive(Debug, Clone, Copy)]
enum T {
    Str,
    Bool,
    I32,
    I64,
    /// A message, by name in [`fields`] (or one of the special ones, see [`special`]).
    Msg(&'static str),
    /// `map<string, string>`.
    MapStr,
    /// `map<string, bytes>`.
    MapBytes,
    /// `map<string, Quantity>`.
    MapQty,
}

/// One field of a message.
#[derive(Debug, Clone, Copy)]
struct Fd {
    num: u64,
    name: &'static str,
    t: T,
    repeated: bool,
    /// A Go pointer field: a zero value is meaningful and kept.
    keep_zero: bool,
    /// A Go embedded struct: its fields are the parent's JSON fields.
    inline: bool,
}

const fn o(num: u64, name: &'static str, t: T) -> Fd {
    Fd {
        num,
        name,
        t,
        repeated: false,
        keep_zero: false,
        inline: false,
    }
}

const fn p(num: u64, name: &'static str, t: T) -> Fd {
    Fd {
        keep_zero: true,
        ..o(num, name, t)
    }
}

const fn r(num: u64, name: &'static str, t: T) -> Fd {
    Fd {
        repeated: true,
        ..o(num, name, t)
    }
}

const fn inl(num: u64, msg: &'static str) -> Fd {
    Fd {
        inline: true,
        ..o(num, "", T::Msg(msg))
    }
}

use T::{Bool as B, MapBytes as MB, MapQty as MQ, MapStr as MS, Str as S, I32, I64};

const fn m(name: &'static str) -> T {
    T::Msg(name)
}

/// The message a root kind decodes as: `(group, kind)` → message name.
fn root_message(group: &str, kind: &str) -> Option<&'static str> {
    Some(match (group, kind) {
        ("", "Namespace") => "Namespace",
        ("", "ConfigMap") => "ConfigMap",
        ("", "Secret") => "Secret",
        ("", "ServiceAccount") => "ServiceAccount",
        ("", "Service") => "Service",
        ("", "Pod") => "Pod",
        ("", "Event") => "Event",
        ("apps", "Deployment") => "Deployment",
        ("apps", "StatefulSet") => "StatefulSet",
        ("apps", "DaemonSet") => "DaemonSet",
        ("apps", "ReplicaSet") => "ReplicaSet",
        ("batch", "Job") => "Job",
        ("rbac.authorization.k8s.io", "Role") => "Role",
        ("rbac.authorization.k8s.io", "ClusterRole") => "ClusterRole",
        ("rbac.authorization.k8s.io", "RoleBinding") => "RoleBinding",
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => "ClusterRoleBinding",
        ("authorization.k8s.io", "SelfSubjectAccessReview") => "SelfSubjectAccessReview",
        ("authentication.k8s.io", "TokenRequest") => "TokenRequest",
        ("" | "meta.k8s.io", "DeleteOptions") => "DeleteOptions",
        _ => return None,
    })
}

/// The field table of a message (from the upstream `generated.proto` files).
fn fields(msg: &str) -> Option<&'static [Fd]> {
    Some(match msg {
        // meta/v1
        "ObjectMeta" => {
            const {
                &[
                    o(1, "name", S),
                    o(2, "generateName", S),
                    o(3, "namespace", S),
                    o(4, "selfLink", S),
                    o(5, "uid", S),
                    o(6, "resourceVersion", S),
                    o(7, "generation", I64),
                    o(8, "creationTimestamp", m("Time")),
                    o(9, "deletionTimestamp", m("Time")),
                    p(10, "deletionGracePeriodSeconds", I64),
                    o(11, "labels", MS),
                    o(12, "annotations", MS),
                    r(13, "ownerReferences", m("OwnerReference")),
                    r(14, "finalizers", S),
                    r(17, "managedFields", m("ManagedFieldsEntry")),
                ]
            }
        }
        "OwnerReference" => {
            const {
                &[
                    o(5, "apiVersion", S),
                    o(1, "kind", S),
                    o(3, "name", S),
                    o(4, "uid", S),
                    p(6, "controller", B),
                    p(7, "blockOwnerDeletion", B),
                ]
            }
        }
        "ManagedFieldsEntry" => {
            const {
                &[
                    o(1, "manager", S),
                    o(2, "operation", S),
                    o(3, "apiVersion", S),
                    o(4, "time", m("Time")),
                    o(6, "fieldsType", S),
                    o(7, "fieldsV1", m("FieldsV1")),
                    o(8, "subresource", S),
                ]
            }
        }
        "LabelSelector" => {
            const {
                &[
                    o(1, "matchLabels", MS),
                    r(2, "matchExpressions", m("LabelSelectorRequirement")),
                ]
            }
        }
        "DeleteOptions" => {
            const {
                &[
                    p(1, "gracePeriodSeconds", I64),
                    o(2, "preconditions", m("Preconditions")),
                    p(3, "orphanDependents", B),
                    p(4, "propagationPolicy", S),
                    r(5, "dryRun", S),
                ]
            }
        }
        "Preconditions" => const { &[p(1, "uid", S), p(2, "resourceVersion", S)] },
        "LabelSelectorRequirement" => {
            const { &[o(1, "key", S), o(2, "operator", S), r(3, "values", S)] }
        }
        // core/v1
        "Namespace" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "spec", m("NamespaceSpec")),
                    o(3, "status", m("NamespaceStatus")),
                ]
            }
        }
        "NamespaceSpec" => const { &[r(1, "finalizers", S)] },
        "NamespaceStatus" => const { &[o(1, "phase", S)] },
        "ConfigMap" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    p(4, "immutable", B),
                    o(2, "data", MS),
                    o(3, "binaryData", MB),
                ]
            }
        }
        "Secret" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    p(5, "immutable", B),
                    o(2, "data", MB),
                    o(4, "stringData", MS),
                    o(3, "type", S),
                ]
            }
        }
        "ServiceAccount" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    r(2, "secrets", m("ObjectReference")),
                    r(3, "imagePullSecrets", m("LocalObjectReference")),
                    p(4, "automountServiceAccountToken", B),
                ]
            }
        }
        "ObjectReference" => {
            const {
                &[
                    o(1, "kind", S),
                    o(2, "namespace", S),
                    o(3, "name", S),
                    o(4, "uid", S),
                    o(5, "apiVersion", S),
                    o(6, "resourceVersion", S),
                    o(7, "fieldPath", S),
                ]
            }
        }
        "LocalObjectReference" => const { &[o(1, "name", S)] },
        "Service" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "spec", m("ServiceSpec")),
                    o(3, "status", m("ServiceStatus")),
                ]
            }
        }
        "ServiceSpec" => {
            const {
                &[
                    r(1, "ports", m("ServicePort")),
                    o(2, "selector", MS),
                    o(3, "clusterIP", S),
                    r(18, "clusterIPs", S),
                    o(4, "type", S),
                    r(5, "externalIPs", S),
                    o(7, "sessionAffinity", S),
                    o(8, "loadBalancerIP", S),
                    r(9, "loadBalancerSourceRanges", S),
                    o(10, "externalName", S),
                    o(11, "externalTrafficPolicy", S),
                    o(12, "healthCheckNodePort", I32),
                    o(13, "publishNotReadyAddresses", B),
                    o(14, "sessionAffinityConfig", m("SessionAffinityConfig")),
                    r(19, "ipFamilies", S),
                    o(17, "ipFamilyPolicy", S),
                    p(20, "allocateLoadBalancerNodePorts", B),
                    o(21, "loadBalancerClass", S),
                    o(22, "internalTrafficPolicy", S),
                    o(23, "trafficDistribution", S),
                ]
            }
        }
        "ServicePort" => {
            const {
                &[
                    o(1, "name", S),
                    o(2, "protocol", S),
                    o(6, "appProtocol", S),
                    o(3, "port", I32),
                    o(4, "targetPort", m("IntOrString")),
                    o(5, "nodePort", I32),
                ]
            }
        }
        "SessionAffinityConfig" => const { &[o(1, "clientIP", m("ClientIPConfig"))] },
        "ClientIPConfig" => const { &[p(1, "timeoutSeconds", I32)] },
        "ServiceStatus" => const { &[o(1, "loadBalancer", m("LoadBalancerStatus"))] },
        "LoadBalancerStatus" => const { &[] },
        "Pod" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "spec", m("PodSpec")),
                    o(3, "status", m("PodStatus")),
                ]
            }
        }
        "PodStatus" => const { &[o(1, "phase", S)] },
        "PodTemplateSpec" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "spec", m("PodSpec")),
                ]
            }
        }
        "PodSpec" => {
            const {
                &[
                    r(1, "volumes", m("Volume")),
                    r(20, "initContainers", m("Container")),
                    r(2, "containers", m("Container")),
                    o(3, "restartPolicy", S),
                    p(4, "terminationGracePeriodSeconds", I64),
                    p(5, "activeDeadlineSeconds", I64),
                    o(6, "dnsPolicy", S),
                    o(7, "nodeSelector", MS),
                    o(8, "serviceAccountName", S),
                    o(9, "serviceAccount", S),
                    p(21, "automountServiceAccountToken", B),
                    o(10, "nodeName", S),
                    o(11, "hostNetwork", B),
                    o(12, "hostPID", B),
                    o(13, "hostIPC", B),
                    p(27, "shareProcessNamespace", B),
                    o(14, "securityContext", m("PodSecurityContext")),
                    r(15, "imagePullSecrets", m("LocalObjectReference")),
                    o(16, "hostname", S),
                    o(17, "subdomain", S),
                    o(19, "schedulerName", S),
                    r(22, "tolerations", m("Toleration")),
                    r(23, "hostAliases", m("HostAlias")),
                    o(24, "priorityClassName", S),
                    p(25, "priority", I32),
                    o(26, "dnsConfig", m("PodDNSConfig")),
                    r(28, "readinessGates", m("PodReadinessGate")),
                    p(29, "runtimeClassName", S),
                    p(30, "enableServiceLinks", B),
                    p(31, "preemptionPolicy", S),
                    p(35, "setHostnameAsFQDN", B),
                    p(37, "hostUsers", B),
                ]
            }
        }
        "Container" => {
            const {
                &[
                    o(1, "name", S),
                    o(2, "image", S),
                    r(3, "command", S),
                    r(4, "args", S),
                    o(5, "workingDir", S),
                    r(6, "ports", m("ContainerPort")),
                    r(19, "envFrom", m("EnvFromSource")),
                    r(7, "env", m("EnvVar")),
                    o(8, "resources", m("ResourceRequirements")),
                    p(24, "restartPolicy", S),
                    r(9, "volumeMounts", m("VolumeMount")),
                    o(10, "livenessProbe", m("Probe")),
                    o(11, "readinessProbe", m("Probe")),
                    o(22, "startupProbe", m("Probe")),
                    o(12, "lifecycle", m("Lifecycle")),
                    o(13, "terminationMessagePath", S),
                    o(20, "terminationMessagePolicy", S),
                    o(14, "imagePullPolicy", S),
                    o(15, "securityContext", m("SecurityContext")),
                    o(16, "stdin", B),
                    o(17, "stdinOnce", B),
                    o(18, "tty", B),
                ]
            }
        }
        "ContainerPort" => {
            const {
                &[
                    o(1, "name", S),
                    o(2, "hostPort", I32),
                    o(3, "containerPort", I32),
                    o(4, "protocol", S),
                    o(5, "hostIP", S),
                ]
            }
        }
        "EnvVar" => {
            const {
                &[
                    o(1, "name", S),
                    o(2, "value", S),
                    o(3, "valueFrom", m("EnvVarSource")),
                ]
            }
        }
        "EnvVarSource" => {
            const {
                &[
                    o(1, "fieldRef", m("ObjectFieldSelector")),
                    o(2, "resourceFieldRef", m("ResourceFieldSelector")),
                    o(3, "configMapKeyRef", m("KeySelector")),
                    o(4, "secretKeyRef", m("KeySelector")),
                ]
            }
        }
        // ConfigMapKeySelector and SecretKeySelector have the same fields.
        "KeySelector" => {
            const {
                &[
                    inl(1, "LocalObjectReference"),
                    o(2, "key", S),
                    p(3, "optional", B),
                ]
            }
        }
        "ObjectFieldSelector" => const { &[o(1, "apiVersion", S), o(2, "fieldPath", S)] },
        "ResourceFieldSelector" => {
            const {
                &[
                    o(1, "containerName", S),
                    o(2, "resource", S),
                    o(3, "divisor", m("Quantity")),
                ]
            }
        }
        // ConfigMapEnvSource and SecretEnvSource have the same fields.
        "EnvSource" => const { &[inl(1, "LocalObjectReference"), p(2, "optional", B)] },
        "EnvFromSource" => {
            const {
                &[
                    o(1, "prefix", S),
                    o(2, "configMapRef", m("EnvSource")),
                    o(3, "secretRef", m("EnvSource")),
                ]
            }
        }
        "ResourceRequirements" => const { &[o(1, "limits", MQ), o(2, "requests", MQ)] },
        "VolumeMount" => {
            const {
                &[
                    o(1, "name", S),
                    o(2, "readOnly", B),
                    p(7, "recursiveReadOnly", S),
                    o(3, "mountPath", S),
                    o(4, "subPath", S),
                    p(5, "mountPropagation", S),
                    o(6, "subPathExpr", S),
                ]
            }
        }
        "Volume" => const { &[o(1, "name", S), inl(2, "VolumeSource")] },
        "VolumeSource" => {
            const {
                &[
                    o(1, "hostPath", m("HostPathVolumeSource")),
                    o(2, "emptyDir", m("EmptyDirVolumeSource")),
                    o(6, "secret", m("SecretVolumeSource")),
                    o(
                        10,
                        "persistentVolumeClaim",
                        m("PersistentVolumeClaimVolumeSource"),
                    ),
                    o(16, "downwardAPI", m("DownwardAPIVolumeSource")),
                    o(19, "configMap", m("ConfigMapVolumeSource")),
                    o(26, "projected", m("ProjectedVolumeSource")),
                ]
            }
        }
        "HostPathVolumeSource" => const { &[o(1, "path", S), p(2, "type", S)] },
        "EmptyDirVolumeSource" => const { &[o(1, "medium", S), o(2, "sizeLimit", m("Quantity"))] },
        "SecretVolumeSource" => {
            const {
                &[
                    o(1, "secretName", S),
                    r(2, "items", m("KeyToPath")),
                    p(3, "defaultMode", I32),
                    p(4, "optional", B),
                ]
            }
        }
        "ConfigMapVolumeSource" => {
            const {
                &[
                    inl(1, "LocalObjectReference"),
                    r(2, "items", m("KeyToPath")),
                    p(3, "defaultMode", I32),
                    p(4, "optional", B),
                ]
            }
        }
        "PersistentVolumeClaimVolumeSource" => {
            const { &[o(1, "claimName", S), o(2, "readOnly", B)] }
        }
        "DownwardAPIVolumeSource" => {
            const {
                &[
                    r(1, "items", m("DownwardAPIVolumeFile")),
                    p(2, "defaultMode", I32),
                ]
            }
        }
        "DownwardAPIVolumeFile" => {
            const {
                &[
                    o(1, "path", S),
                    o(2, "fieldRef", m("ObjectFieldSelector")),
                    o(3, "resourceFieldRef", m("ResourceFieldSelector")),
                    p(4, "mode", I32),
                ]
            }
        }
        "ProjectedVolumeSource" => {
            const {
                &[
                    r(1, "sources", m("VolumeProjection")),
                    p(2, "defaultMode", I32),
                ]
            }
        }
        "VolumeProjection" => {
            const {
                &[
                    o(1, "secret", m("ProjectionSource")),
                    o(2, "downwardAPI", m("DownwardAPIProjection")),
                    o(3, "configMap", m("ProjectionSource")),
                    o(4, "serviceAccountToken", m("ServiceAccountTokenProjection")),
                ]
            }
        }
        // SecretProjection and ConfigMapProjection have the same fields.
        "ProjectionSource" => {
            const {
                &[
                    inl(1, "LocalObjectReference"),
                    r(2, "items", m("KeyToPath")),
                    p(4, "optional", B),
                ]
            }
        }
        "DownwardAPIProjection" => const { &[r(1, "items", m("DownwardAPIVolumeFile"))] },
        "ServiceAccountTokenProjection" => {
            const {
                &[
                    o(1, "audience", S),
                    p(2, "expirationSeconds", I64),
                    o(3, "path", S),
                ]
            }
        }
        "KeyToPath" => const { &[o(1, "key", S), o(2, "path", S), p(3, "mode", I32)] },
        "Probe" => {
            const {
                &[
                    inl(1, "ProbeHandler"),
                    o(2, "initialDelaySeconds", I32),
                    o(3, "timeoutSeconds", I32),
                    o(4, "periodSeconds", I32),
                    o(5, "successThreshold", I32),
                    o(6, "failureThreshold", I32),
                    p(7, "terminationGracePeriodSeconds", I64),
                ]
            }
        }
        "ProbeHandler" => {
            const {
                &[
                    o(1, "exec", m("ExecAction")),
                    o(2, "httpGet", m("HTTPGetAction")),
                    o(3, "tcpSocket", m("TCPSocketAction")),
                    o(4, "grpc", m("GRPCAction")),
                ]
            }
        }
        "Lifecycle" => {
            const {
                &[
                    o(1, "postStart", m("LifecycleHandler")),
                    o(2, "preStop", m("LifecycleHandler")),
                ]
            }
        }
        "LifecycleHandler" => {
            const {
                &[
                    o(1, "exec", m("ExecAction")),
                    o(2, "httpGet", m("HTTPGetAction")),
                    o(3, "tcpSocket", m("TCPSocketAction")),
                    o(4, "sleep", m("SleepAction")),
                ]
            }
        }
        "ExecAction" => const { &[r(1, "command", S)] },
        "HTTPGetAction" => {
            const {
                &[
                    o(1, "path", S),
                    o(2, "port", m("IntOrString")),
                    o(3, "host", S),
                    o(4, "scheme", S),
                    r(5, "httpHeaders", m("HTTPHeader")),
                ]
            }
        }
        "HTTPHeader" => const { &[o(1, "name", S), o(2, "value", S)] },
        "TCPSocketAction" => const { &[o(1, "port", m("IntOrString")), o(2, "host", S)] },
        "GRPCAction" => const { &[o(1, "port", I32), p(2, "service", S)] },
        "SleepAction" => const { &[o(1, "seconds", I64)] },
        "SecurityContext" => {
            const {
                &[
                    o(1, "capabilities", m("Capabilities")),
                    p(2, "privileged", B),
                    o(3, "seLinuxOptions", m("SELinuxOptions")),
                    p(4, "runAsUser", I64),
                    p(8, "runAsGroup", I64),
                    p(5, "runAsNonRoot", B),
                    p(6, "readOnlyRootFilesystem", B),
                    p(7, "allowPrivilegeEscalation", B),
                    p(9, "procMount", S),
                    o(11, "seccompProfile", m("SeccompProfile")),
                ]
            }
        }
        "PodSecurityContext" => {
            const {
                &[
                    o(1, "seLinuxOptions", m("SELinuxOptions")),
                    p(2, "runAsUser", I64),
                    p(6, "runAsGroup", I64),
                    p(3, "runAsNonRoot", B),
                    r(4, "supplementalGroups", I64),
                    p(5, "fsGroup", I64),
                    p(9, "fsGroupChangePolicy", S),
                    o(10, "seccompProfile", m("SeccompProfile")),
                ]
            }
        }
        "Capabilities" => const { &[r(1, "add", S), r(2, "drop", S)] },
        "SELinuxOptions" => {
            const {
                &[
                    o(1, "user", S),
                    o(2, "role", S),
                    o(3, "type", S),
                    o(4, "level", S),
                ]
            }
        }
        "SeccompProfile" => const { &[o(1, "type", S), p(2, "localhostProfile", S)] },
        "Toleration" => {
            const {
                &[
                    o(1, "key", S),
                    o(2, "operator", S),
                    o(3, "value", S),
                    o(4, "effect", S),
                    p(5, "tolerationSeconds", I64),
                ]
            }
        }
        "HostAlias" => const { &[o(1, "ip", S), r(2, "hostnames", S)] },
        "PodDNSConfig" => {
            const {
                &[
                    r(1, "nameservers", S),
                    r(2, "searches", S),
                    r(3, "options", m("PodDNSConfigOption")),
                ]
            }
        }
        "PodDNSConfigOption" => const { &[o(1, "name", S), p(2, "value", S)] },
        "PodReadinessGate" => const { &[o(1, "conditionType", S)] },
        "Event" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "involvedObject", m("ObjectReference")),
                    o(3, "reason", S),
                    o(4, "message", S),
                    o(5, "source", m("EventSource")),
                    o(6, "firstTimestamp", m("Time")),
                    o(7, "lastTimestamp", m("Time")),
                    o(8, "count", I32),
                    o(9, "type", S),
                    o(10, "eventTime", m("MicroTime")),
                    o(12, "action", S),
                    o(13, "related", m("ObjectReference")),
                    o(14, "reportingComponent", S),
                    o(15, "reportingInstance", S),
                ]
            }
        }
        "EventSource" => const { &[o(1, "component", S), o(2, "host", S)] },
        // apps/v1
        "Deployment" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "spec", m("DeploymentSpec")),
                    o(3, "status", m("DeploymentStatus")),
                ]
            }
        }
        "DeploymentSpec" => {
            const {
                &[
                    p(1, "replicas", I32),
                    o(2, "selector", m("LabelSelector")),
                    o(3, "template", m("PodTemplateSpec")),
                    o(4, "strategy", m("DeploymentStrategy")),
                    o(5, "minReadySeconds", I32),
                    p(6, "revisionHistoryLimit", I32),
                    o(7, "paused", B),
                    p(9, "progressDeadlineSeconds", I32),
                ]
            }
        }
        "DeploymentStrategy" => {
            const {
                &[
                    o(1, "type", S),
                    o(2, "rollingUpdate", m("RollingUpdateDeployment")),
                ]
            }
        }
        "RollingUpdateDeployment" => {
            const {
                &[
                    o(1, "maxUnavailable", m("IntOrString")),
                    o(2, "maxSurge", m("IntOrString")),
                ]
            }
        }
        // Statuses: kubectl sends them on create with every non-pointer field at zero; a
        // condition list is not expected from clients and is refused.
        "DeploymentStatus" => {
            const {
                &[
                    o(1, "observedGeneration", I64),
                    o(2, "replicas", I32),
                    o(3, "updatedReplicas", I32),
                    o(7, "readyReplicas", I32),
                    o(4, "availableReplicas", I32),
                    o(5, "unavailableReplicas", I32),
                    p(9, "terminatingReplicas", I32),
                    p(8, "collisionCount", I32),
                ]
            }
        }
        "StatefulSetStatus" => {
            const {
                &[
                    o(1, "observedGeneration", I64),
                    o(2, "replicas", I32),
                    o(3, "readyReplicas", I32),
                    o(4, "currentReplicas", I32),
                    o(5, "updatedReplicas", I32),
                    o(6, "currentRevision", S),
                    o(7, "updateRevision", S),
                    p(9, "collisionCount", I32),
                    o(11, "availableReplicas", I32),
                ]
            }
        }
        "DaemonSetStatus" => {
            const {
                &[
                    o(1, "currentNumberScheduled", I32),
                    o(2, "numberMisscheduled", I32),
                    o(3, "desiredNumberScheduled", I32),
                    o(4, "numberReady", I32),
                    o(5, "observedGeneration", I64),
                    o(6, "updatedNumberScheduled", I32),
                    o(7, "numberAvailable", I32),
                    o(8, "numberUnavailable", I32),
                    p(9, "collisionCount", I32),
                ]
            }
        }
        "ReplicaSetStatus" => {
            const {
                &[
                    o(1, "replicas", I32),
                    o(2, "fullyLabeledReplicas", I32),
                    o(4, "readyReplicas", I32),
                    o(5, "availableReplicas", I32),
                    p(7, "terminatingReplicas", I32),
                    o(3, "observedGeneration", I64),
                ]
            }
        }
        "JobStatus" => {
            const {
                &[
                    o(2, "startTime", m("Time")),
                    o(3, "completionTime", m("Time")),
                    o(4, "active", I32),
                    o(5, "succeeded", I32),
                    o(6, "failed", I32),
                    p(11, "terminating", I32),
                    o(7, "completedIndexes", S),
                    o(10, "failedIndexes", S),
                    p(9, "ready", I32),
                ]
            }
        }
        "StatefulSet" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "spec", m("StatefulSetSpec")),
                    o(3, "status", m("StatefulSetStatus")),
                ]
            }
        }
        "StatefulSetSpec" => {
            const {
                &[
                    p(1, "replicas", I32),
                    o(2, "selector", m("LabelSelector")),
                    o(3, "template", m("PodTemplateSpec")),
                    o(5, "serviceName", S),
                    o(6, "podManagementPolicy", S),
                    p(8, "revisionHistoryLimit", I32),
                    o(9, "minReadySeconds", I32),
                ]
            }
        }
        "DaemonSet" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "spec", m("DaemonSetSpec")),
                    o(3, "status", m("DaemonSetStatus")),
                ]
            }
        }
        "DaemonSetSpec" => {
            const {
                &[
                    o(1, "selector", m("LabelSelector")),
                    o(2, "template", m("PodTemplateSpec")),
                    o(4, "minReadySeconds", I32),
                    p(6, "revisionHistoryLimit", I32),
                ]
            }
        }
        "ReplicaSet" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "spec", m("ReplicaSetSpec")),
                    o(3, "status", m("ReplicaSetStatus")),
                ]
            }
        }
        "ReplicaSetSpec" => {
            const {
                &[
                    p(1, "replicas", I32),
                    o(4, "minReadySeconds", I32),
                    o(2, "selector", m("LabelSelector")),
                    o(3, "template", m("PodTemplateSpec")),
                ]
            }
        }
        // batch/v1
        "Job" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "spec", m("JobSpec")),
                    o(3, "status", m("JobStatus")),
                ]
            }
        }
        "JobSpec" => {
            const {
                &[
                    p(1, "parallelism", I32),
                    p(2, "completions", I32),
                    p(3, "activeDeadlineSeconds", I64),
                    p(7, "backoffLimit", I32),
                    p(12, "backoffLimitPerIndex", I32),
                    p(13, "maxFailedIndexes", I32),
                    o(4, "selector", m("LabelSelector")),
                    p(5, "manualSelector", B),
                    o(6, "template", m("PodTemplateSpec")),
                    p(8, "ttlSecondsAfterFinished", I32),
                    p(9, "completionMode", S),
                    p(10, "suspend", B),
                    p(14, "podReplacementPolicy", S),
                    p(15, "managedBy", S),
                ]
            }
        }
        // rbac.authorization.k8s.io/v1
        "Role" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    r(2, "rules", m("PolicyRule")),
                ]
            }
        }
        "ClusterRole" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    r(2, "rules", m("PolicyRule")),
                    o(3, "aggregationRule", m("AggregationRule")),
                ]
            }
        }
        "PolicyRule" => {
            const {
                &[
                    r(1, "verbs", S),
                    r(2, "apiGroups", S),
                    r(3, "resources", S),
                    r(4, "resourceNames", S),
                    r(5, "nonResourceURLs", S),
                ]
            }
        }
        "AggregationRule" => const { &[r(1, "clusterRoleSelectors", m("LabelSelector"))] },
        "RoleBinding" | "ClusterRoleBinding" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    r(2, "subjects", m("Subject")),
                    o(3, "roleRef", m("RoleRef")),
                ]
            }
        }
        "Subject" => {
            const {
                &[
                    o(1, "kind", S),
                    o(2, "apiGroup", S),
                    o(3, "name", S),
                    o(4, "namespace", S),
                ]
            }
        }
        "RoleRef" => const { &[o(1, "apiGroup", S), o(2, "kind", S), o(3, "name", S)] },
        // authorization.k8s.io/v1
        "SelfSubjectAccessReview" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "spec", m("SelfSubjectAccessReviewSpec")),
                    o(3, "status", m("SubjectAccessReviewStatus")),
                ]
            }
        }
        // authentication/v1
        "TokenRequest" => {
            const {
                &[
                    o(1, "metadata", m("ObjectMeta")),
                    o(2, "spec", m("TokenRequestSpec")),
                    o(3, "status", m("TokenRequestStatus")),
                ]
            }
        }
        "TokenRequestSpec" => {
            const {
                &[
                    r(1, "audiences", S),
                    p(4, "expirationSeconds", I64),
                    o(3, "boundObjectRef", m("BoundObjectReference")),
                ]
            }
        }
        "BoundObjectReference" => {
            const {
                &[
                    o(1, "kind", S),
                    o(2, "apiVersion", S),
                    o(3, "name", S),
                    o(4, "uid", S),
                ]
            }
        }
        "TokenRequestStatus" => {
            const { &[o(1, "token", S), o(2, "expirationTimestamp", m("Time"))] }
        }
        "SelfSubjectAccessReviewSpec" => {
            const {
                &[
                    o(1, "resourceAttributes", m("ResourceAttributes")),
                    o(2, "nonResourceAttributes", m("NonResourceAttributes")),
                ]
            }
        }
        "ResourceAttributes" => {
            const {
                &[
                    o(1, "namespace", S),
                    o(2, "verb", S),
                    o(3, "group", S),
                    o(4, "version", S),
                    o(5, "resource", S),
                    o(6, "subresource", S),
                    o(7, "name", S),
                ]
            }
        }
        "NonResourceAttributes" => const { &[o(1, "path", S), o(2, "verb", S)] },
        "SubjectAccessReviewStatus" => {
            const {
                &[
                    o(1, "allowed", B),
                    o(4, "denied", B),
                    o(2, "reason", S),
                    o(3, "evaluationError", S),
                ]
            }
        }
        _ => return None,
    })
}

/// One wire value.
enum Wire<'a> {
    Varint(u64),
    Len(&'a [u8]),
    Fixed,
}

/// A protobuf wire-format reader.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

fn malformed(msg: &str) -> ApiError {
    ApiError::bad_request(format!(
        "error decoding protobuf body: malformed {msg} message"
    ))
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Self {
        Reader { b, pos: 0 }
    }

    fn varint(&mut self) -> Option<u64> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.pos)?;
            self.pos += 1;
            out |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(out);
            }
        }
        None
    }

    /// The next `(field number, value)`, `Ok(None)` at the end, `Err(())` on malformed input.
    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>, ()> {
        if self.pos >= self.b.len() {
            return Ok(None);
        }
        let key = self.varint().ok_or(())?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint().ok_or(())?),
            1 => {
                self.pos = self.pos.checked_add(8).ok_or(())?;
                Wire::Fixed
            }
            2 => {
                let n = usize::try_from(self.varint().ok_or(())?).map_err(|_| ())?;
                let end = self.pos.checked_add(n).ok_or(())?;
                let s = self.b.get(self.pos..end).ok_or(())?;
                self.pos = end;
                Wire::Len(s)
            }
            5 => {
                self.pos = self.pos.checked_add(4).ok_or(())?;
                Wire::Fixed
            }
            _ => return Err(()),
        };
        if self.pos > self.b.len() {
            return Err(());
        }
        Ok(Some((key >> 3, wire)))
    }
}

/// Decodes a protobuf request body to the object's JSON (see the module doc).
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let raw = body.strip_prefix(MAGIC).ok_or_else(|| {
        ApiError::bad_request("error decoding protobuf body: the k8s\\0 prefix is missing")
    })?;
    let (mut api_version, mut kind, mut object, mut encoding) =
        (String::new(), String::new(), &[][..], String::new());
    let mut rd = Reader::new(raw);
    while let Some((num, w)) = rd.next().map_err(|()| malformed("runtime.Unknown"))? {
        match (num, w) {
            (1, Wire::Len(tm)) => {
                let mut t = Reader::new(tm);
                while let Some((n, w)) = t.next().map_err(|()| malformed("TypeMeta"))? {
                    if let Wire::Len(s) = w {
                        let s = String::from_utf8_lossy(s).into_owned();
                        match n {
                            1 => api_version = s,
                            2 => kind = s,
                            _ => {}
                        }
                    }
                }
            }
            (2, Wire::Len(s)) => object = s,
            (3, Wire::Len(s)) => encoding = String::from_utf8_lossy(s).into_owned(),
            _ => {}
        }
    }
    if !encoding.is_empty() {
        return Err(ApiError::bad_request(format!(
            "error decoding protobuf body: content encoding {encoding:?} is not supported"
        )));
    }
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let msg = root_message(group, &kind).ok_or_else(|| {
        ApiError::unsupported_body_media_type(&format!(
            "kube-emu decodes {MEDIA_TYPE} for the built-in kinds it serves, not {api_version}, Kind={kind}"
        ))
    })?;
    let mut v = message(msg, object)?;
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!(kind));
    }
    Ok(v)
}

/// The JSON of a special message (`Time`, `Quantity`, ...), or `None` for a tabled one.
fn special(msg: &str, b: &[u8]) -> Option<ApiResult<Value>> {
    let ints = |b: &[u8]| -> ApiResult<(i64, i64, String)> {
        let (mut a, mut c, mut s) = (0i64, 0i64, String::new());
        let mut rd = Reader::new(b);
        while let Some((n, w)) = rd.next().map_err(|()| malformed(msg))? {
            match (n, w) {
                (1, Wire::Varint(x)) => a = x as i64,
                (2, Wire::Varint(x)) => c = x as i64,
                (1 | 3, Wire::Len(x)) => s = String::from_utf8_lossy(x).into_owned(),
                _ => {}
            }
        }
        Ok((a, c, s))
    };
    Some(match msg {
        "Time" => ints(b).map(|(secs, _, _)| match u64::try_from(secs) {
            Ok(s) if s > 0 => json!(timefmt::format_unix(s)),
            _ => Value::Null,
        }),
        "MicroTime" => ints(b).map(|(secs, nanos, _)| match u64::try_from(secs) {
            Ok(s) if s > 0 || nanos > 0 => {
                let t = timefmt::format_unix(s);
                let base = t.trim_end_matches('Z');
                json!(format!("{base}.{:06}Z", nanos / 1000))
            }
            _ => Value::Null,
        }),
        "Quantity" => ints(b).map(|(_, _, s)| json!(s)),
        "IntOrString" => {
            let mut rd = Reader::new(b);
            let (mut ty, mut int, mut s) = (0u64, 0i64, String::new());
            loop {
                match rd.next() {
                    Ok(Some((1, Wire::Varint(x)))) => ty = x,
                    Ok(Some((2, Wire::Varint(x)))) => int = i64::from(x as i32),
                    Ok(Some((3, Wire::Len(x)))) => s = String::from_utf8_lossy(x).into_owned(),
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(()) => return Some(Err(malformed("IntOrString"))),
                }
            }
            Ok(if ty == 1 { json!(s) } else { json!(int) })
        }
        "FieldsV1" | "RawExtension" => {
            let mut rd = Reader::new(b);
            let mut raw: &[u8] = &[];
            loop {
                match rd.next() {
                    Ok(Some((1, Wire::Len(x)))) => raw = x,
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(()) => return Some(Err(malformed(msg))),
                }
            }
            if raw.is_empty() {
                Ok(json!({}))
            } else {
                serde_json::from_slice(raw).map_err(|e| {
                    ApiError::bad_request(format!(
                        "error decoding protobuf body: {msg} is not JSON: {e}"
                    ))
                })
            }
        }
        _ => return None,
    })
}

fn scalar(t: T, w: &Wire<'_>, msg: &str) -> ApiResult<Value> {
    let bad = || {
        ApiError::bad_request(format!(
            "error decoding protobuf body: wrong wire type in message {msg}"
        ))
    };
    Ok(match (t, w) {
        (T::Str, Wire::Len(s)) => json!(String::from_utf8_lossy(s)),
        (T::Bool, Wire::Varint(x)) => json!(*x != 0),
        (T::I32, Wire::Varint(x)) => json!(*x as i32),
        (T::I64, Wire::Varint(x)) => json!(*x as i64),
        _ => return Err(bad()),
    })
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Null => true,
        _ => false,
    }
}

/// A `map<string, X>` entry: `(key, value)`.
fn map_entry(b: &[u8], t: T, msg: &str) -> ApiResult<(String, Value)> {
    let mut rd = Reader::new(b);
    let (mut k, mut v) = (String::new(), Value::Null);
    while let Some((n, w)) = rd.next().map_err(|()| malformed(msg))? {
        match (n, w) {
            (1, Wire::Len(s)) => k = String::from_utf8_lossy(s).into_owned(),
            (2, Wire::Len(s)) => {
                v = match t {
                    T::MapStr => json!(String::from_utf8_lossy(s)),
                    T::MapBytes => json!(base64::engine::general_purpose::STANDARD.encode(s)),
                    _ => match special("Quantity", s) {
                        Some(q) => q?,
                        None => Value::Null,
                    },
                }
            }
            _ => {}
        }
    }
    if v.is_null() {
        v = match t {
            T::MapQty => json!("0"),
            _ => json!(""),
        };
    }
    Ok((k, v))
}

/// Decodes message `msg` from `b` by its field table.
fn message(msg: &str, b: &[u8]) -> ApiResult<Value> {
    if let Some(v) = special(msg, b) {
        return v;
    }
    let table = fields(msg).ok_or_else(|| {
        ApiError::bad_request(format!(
            "error decoding protobuf body: message {msg} is not known to kube-emu; send JSON"
        ))
    })?;
    let mut out = Map::new();
    let mut rd = Reader::new(b);
    while let Some((num, w)) = rd.next().map_err(|()| malformed(msg))? {
        let fd = table.iter().find(|f| f.num == num).ok_or_else(|| {
            ApiError::bad_request(format!(
                "error decoding protobuf body: field {num} of message {msg} is not known to kube-emu; send JSON"
            ))
        })?;
        match fd.t {
            T::MapStr | T::MapBytes | T::MapQty => {
                let Wire::Len(s) = w else {
                    return Err(malformed(msg));
                };
                let (k, v) = map_entry(s, fd.t, msg)?;
                let entry = out
                    .entry(fd.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(m) = entry.as_object_mut() {
                    m.insert(k, v);
                }
            }
            T::Msg(sub) => {
                let Wire::Len(s) = w else {
                    return Err(malformed(msg));
                };
                let v = message(sub, s)?;
                if fd.inline {
                    if let Value::Object(inner) = v {
                        out.extend(inner);
                    }
                } else if fd.repeated {
                    push(&mut out, fd.name, v);
                } else if !v.is_null() {
                    out.insert(fd.name.into(), v);
                }
            }
            t => {
                // Packed repeated varints (proto3 style) as well as one value per field.
                if let (true, Wire::Len(s), T::I32 | T::I64 | T::Bool) = (fd.repeated, &w, t) {
                    let mut rd = Reader::new(s);
                    while rd.pos < s.len() {
                        let x = rd.varint().ok_or_else(|| malformed(msg))?;
                        push(&mut out, fd.name, scalar(t, &Wire::Varint(x), msg)?);
                    }
                    continue;
                }
                let v = scalar(t, &w, msg)?;
                if fd.repeated {
                    push(&mut out, fd.name, v);
                } else if fd.keep_zero || !is_zero(&v) {
                    out.insert(fd.name.into(), v);
                }
            }
        }
    }
    Ok(Value::Object(out))
}

fn push(out: &mut Map<String, Value>, name: &str, v: Value) {
    let entry = out.entry(name).or_insert_with(|| Value::Array(Vec::new()));
    if let Some(a) = entry.as_array_mut() {
        a.push(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A protobuf message under construction (test encoder).
    #[derive(Default)]
    struct Pb(Vec<u8>);

    impl Pb {
        fn varint(&mut self, mut n: u64) -> &mut Self {
            loop {
                let b = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    self.0.push(b);
                    return self;
                }
                self.0.push(b | 0x80);
            }
        }
        fn int(&mut self, f: u64, n: u64) -> &mut Self {
            self.varint(f << 3).varint(n)
        }
        fn bytes(&mut self, f: u64, b: &[u8]) -> &mut Self {
            self.varint(f << 3 | 2).varint(b.len() as u64);
            self.0.extend_from_slice(b);
            self
        }
        fn str(&mut self, f: u64, s: &str) -> &mut Self {
            self.bytes(f, s.as_bytes())
        }
        fn msg(&mut self, f: u64, m: &Pb) -> &mut Self {
            self.bytes(f, &m.0)
        }
    }

    fn envelope(api_version: &str, kind: &str, obj: &Pb) -> Vec<u8> {
        let mut tm = Pb::default();
        tm.str(1, api_version).str(2, kind);
        let mut u = Pb::default();
        u.msg(1, &tm).msg(2, obj).str(3, "").str(4, "");
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&u.0);
        out
    }

    #[test]
    fn the_namespace_kubectl_create_sends() {
        // The body kubectl 1.37.1 sent for `kubectl create namespace prod`.
        let body = b"k8s\x00\x0a\x0f\x0a\x02v1\x12\x09Namespace\x12\x1c\x0a\x14\x0a\x04prod\x12\x00\x1a\x00\x22\x00\x2a\x00\x32\x00\x38\x00\x42\x00\x12\x00\x1a\x02\x0a\x00\x1a\x00\x22\x00";
        assert_eq!(
            decode(body).unwrap(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"},
                   "spec": {}, "status": {}})
        );
    }

    #[test]
    fn deployment_with_maps_quantities_int_or_string_and_pointer_zeros() {
        let mut labels = Pb::default();
        labels.str(1, "app").str(2, "web");
        let mut meta = Pb::default();
        meta.str(1, "web").msg(11, &labels).msg(8, &Pb::default());
        let mut qty = Pb::default();
        qty.str(1, "100m");
        let mut limit = Pb::default();
        limit.str(1, "cpu").msg(2, &qty);
        let mut res = Pb::default();
        res.msg(1, &limit);
        let mut port = Pb::default();
        port.str(1, "").int(2, 0).int(3, 80).str(4, "TCP");
        let mut c = Pb::default();
        c.str(1, "web")
            .str(2, "nginx")
            .msg(6, &port)
            .msg(8, &res)
            .str(5, "");
        let mut pod = Pb::default();
        pod.msg(2, &c);
        let mut tmeta = Pb::default();
        tmeta.msg(11, &labels);
        let mut tmpl = Pb::default();
        tmpl.msg(1, &tmeta).msg(2, &pod);
        let mut sel = Pb::default();
        sel.msg(1, &labels);
        let mut surge = Pb::default();
        surge.int(1, 1).str(3, "25%");
        let mut ru = Pb::default();
        ru.msg(2, &surge);
        let mut strat = Pb::default();
        strat.msg(2, &ru);
        let mut spec = Pb::default();
        spec.int(1, 0)
            .msg(2, &sel)
            .msg(3, &tmpl)
            .msg(4, &strat)
            .int(5, 0);
        let mut d = Pb::default();
        d.msg(1, &meta).msg(2, &spec).msg(3, &Pb::default());
        let v = decode(&envelope("apps/v1", "Deployment", &d)).unwrap();
        assert_eq!(
            v,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                        {"name": "web", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                         "resources": {"limits": {"cpu": "100m"}}}
                    ]}},
                    "strategy": {"rollingUpdate": {"maxSurge": "25%"}},
                },
                "status": {},
            })
        );
    }

    #[test]
    fn unknown_fields_and_kinds_are_refused_not_dropped() {
        let mut ns = Pb::default();
        ns.str(99, "x");
        let e = decode(&envelope("v1", "Namespace", &ns)).unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.contains("field 99 of message Namespace"),
            "{}",
            e.message
        );
        let e = decode(&envelope("example.com/v1", "Widget", &Pb::default())).unwrap_err();
        assert_eq!(e.code, 415);
        let e = decode(b"{\"kind\":\"Namespace\"}").unwrap_err();
        assert_eq!(e.code, 400);
        // A truncated length never reads past the end.
        let e = decode(b"k8s\x00\x12\x7f\x0a").unwrap_err();
        assert_eq!(e.code, 400);
    }

    #[test]
    fn inlined_embedded_structs_and_times() {
        let mut local = Pb::default();
        local.str(1, "cfg");
        let mut sel = Pb::default();
        sel.msg(1, &local).str(2, "k");
        let mut src = Pb::default();
        src.msg(3, &sel);
        let mut env = Pb::default();
        env.str(1, "A").msg(3, &src);
        let v = message("EnvVar", &env.0).unwrap();
        assert_eq!(
            v,
            json!({"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}})
        );
        let mut t = Pb::default();
        t.int(1, 1_700_000_000).int(2, 5_000);
        assert_eq!(
            message("MicroTime", &t.0).unwrap(),
            json!("2023-11-14T22:13:20.000005Z")
        );
        assert_eq!(
            message("Time", &t.0).unwrap(),
            json!("2023-11-14T22:13:20Z")
        );
    }
}

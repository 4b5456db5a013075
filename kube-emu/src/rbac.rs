//! Identity and a small RBAC authorizer.
//!
//! Rules: a request is made by the default identity (cluster-admin: group `system:masters`) unless
//! it carries a registered bearer token or `Impersonate-User`/`Impersonate-Group` headers.
//! `system:masters` is always allowed. Otherwise the request is allowed when a rule of a
//! ClusterRole bound by a ClusterRoleBinding, or of a Role/ClusterRole bound by a RoleBinding in
//! the request's namespace, matches: `verbs`, `apiGroups`, `resources` (`res/sub` for
//! subresources, `*`, `*/sub`) and `resourceNames` (when non-empty; never for list/watch/create).
//! Subjects match by User name, Group name, or ServiceAccount (`system:serviceaccount:<ns>:<name>`).
//! Aggregated ClusterRoles and nonResourceURLs are not evaluated (documented gap).

use serde_json::Value;

/// The authenticated (or impersonated) user.
#[derive(Debug, Clone, PartialEq)]
pub struct UserInfo {
    /// User name.
    pub username: String,
    /// Groups.
    pub groups: Vec<String>,
    /// UID (may be empty).
    pub uid: String,
}

impl UserInfo {
    /// The default cluster-admin identity.
    pub fn admin() -> Self {
        UserInfo {
            username: "kube-emu-admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
            uid: String::new(),
        }
    }

    /// Whether this user bypasses RBAC.
    pub fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }

    /// The user-info object of TokenReview and AdmissionReview.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::json!({"username": self.username, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = Value::String(self.uid.clone());
        }
        v
    }
}

/// The attributes of one request to authorize.
#[derive(Debug, Clone)]
pub struct Attributes<'a> {
    /// Verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`).
    pub verb: &'a str,
    /// API group.
    pub group: &'a str,
    /// Resource plural.
    pub resource: &'a str,
    /// Subresource, or `""`.
    pub subresource: &'a str,
    /// Namespace, or `""` for cluster scope.
    pub namespace: &'a str,
    /// Object name, or `""`.
    pub name: &'a str,
}

fn strs(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn subject_matches(s: &Value, user: &UserInfo) -> bool {
    let name = s["name"].as_str().unwrap_or("");
    match s["kind"].as_str().unwrap_or("") {
        "User" => name == user.username,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = s["namespace"].as_str().unwrap_or("");
            user.username == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn rule_matches(rule: &Value, a: &Attributes<'_>) -> bool {
    let verb_ok = strs(&rule["verbs"]).any(|v| v == "*" || v == a.verb);
    let group_ok = strs(&rule["apiGroups"]).any(|g| g == "*" || g == a.group);
    let full = if a.subresource.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let res_ok = strs(&rule["resources"]).any(|r| {
        r == "*" || r == full || (!a.subresource.is_empty() && r == format!("*/{}", a.subresource))
    });
    let names: Vec<&str> = strs(&rule["resourceNames"]).collect();
    let name_ok = names.is_empty() || (!a.name.is_empty() && names.contains(&a.name));
    verb_ok && group_ok && res_ok && name_ok
}

/// Decides a request. `lookup(kind, namespace, name)` returns a stored Role or ClusterRole;
/// `bindings` are all ClusterRoleBindings and the RoleBindings of the request's namespace.
pub fn allowed<'v>(
    user: &UserInfo,
    a: &Attributes<'_>,
    cluster_bindings: impl Iterator<Item = &'v Value>,
    ns_bindings: impl Iterator<Item = &'v Value>,
    lookup: impl Fn(&str, &str, &str) -> Option<Value>,
) -> bool {
    if user.is_admin() {
        return true;
    }
    let check = |binding: &Value, ns: &str| -> bool {
        if !strs_obj(&binding["subjects"]).any(|s| subject_matches(s, user)) {
            return false;
        }
        let rr = &binding["roleRef"];
        let kind = rr["kind"].as_str().unwrap_or("");
        let name = rr["name"].as_str().unwrap_or("");
        let role_ns = if kind == "Role" { ns } else { "" };
        lookup(kind, role_ns, name).is_some_and(|role| {
            role["rules"]
                .as_array()
                .is_some_and(|rules| rules.iter().any(|r| rule_matches(r, a)))
        })
    };
    for b in cluster_bindings {
        if check(b, "") {
            return true;
        }
    }
    if !a.namespace.is_empty() {
        for b in ns_bindings {
            if check(b, a.namespace) {
                return true;
            }
        }
    }
    false
}

fn strs_obj(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// The apiserver's Forbidden message.
pub fn forbidden_message(user: &UserInfo, a: &Attributes<'_>) -> String {
    let res = if a.group.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let obj = if a.name.is_empty() {
        res
    } else {
        format!("{res} \"{}\"", a.name)
    };
    let full = if a.subresource.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", a.namespace)
    };
    format!(
        "{obj} is forbidden: User \"{}\" cannot {} resource \"{full}\" in API group \"{}\" {scope}",
        user.username, a.verb, a.group
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn role_binding_grants_only_listed_verbs() {
        let user = UserInfo {
            username: "alice".into(),
            groups: vec![],
            uid: String::new(),
        };
        let role = json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]});
        let rb = json!({"subjects": [{"kind": "User", "name": "alice"}], "roleRef": {"kind": "Role", "name": "r"}});
        let lookup = |k: &str, ns: &str, n: &str| {
            (k == "Role" && ns == "default" && n == "r").then(|| role.clone())
        };
        let attrs = |verb| Attributes {
            verb,
            group: "",
            resource: "configmaps",
            subresource: "",
            namespace: "default",
            name: "x",
        };
        assert!(allowed(
            &user,
            &attrs("get"),
            std::iter::empty(),
            [&rb].into_iter(),
            lookup
        ));
        assert!(!allowed(
            &user,
            &attrs("create"),
            std::iter::empty(),
            [&rb].into_iter(),
            lookup
        ));
        assert!(forbidden_message(&user, &attrs("create"))
            .contains("cannot create resource \"configmaps\""));
    }
}

//! kubelet image credential provider files: the `CredentialProviderConfig`
//! naming the dynamic credential provider, its config (with the mirror and
//! credential strategy), and the static credentials as a kubelet
//! `CredentialProviderResponse`. All three are mode 0600.

use serde_json::{Map, Value, json};

use crate::error::BootstrapError;
use crate::render::RenderedFile;
use crate::validate::{ValidConfig, ValidEndpoint};

const KUBELET_CONFIG_PATH: &str = "/etc/kubernetes/image-credential-provider-config.yaml";
const DYNAMIC_CONFIG_PATH: &str = "/etc/kubernetes/dynamic-credential-provider-config.yaml";
const STATIC_CREDENTIALS_PATH: &str = "/etc/kubernetes/static-image-credentials.json";
const PLUGIN_BIN_DIR: &str = "/etc/kubernetes/image-credential-provider/";

/// Registry host patterns of one to six labels: every registry, for a mirror
/// that serves every image.
const ALL_REGISTRIES: [&str; 6] = ["*", "*.*", "*.*.*", "*.*.*.*", "*.*.*.*.*", "*.*.*.*.*.*"];

pub(super) fn render(config: &ValidConfig) -> Result<Vec<RenderedFile>, BootstrapError> {
    let with_credentials: Vec<&ValidEndpoint> = config.endpoints().filter(|e| e.credentials.is_some()).collect();
    if with_credentials.is_empty() {
        return Ok(Vec::new());
    }
    let mirror = config.mirror.as_ref().filter(|m| m.credentials.is_some());
    let registries_have_credentials = config.registries.iter().any(|r| r.credentials.is_some());

    let kubelet_patterns: Vec<String> = if mirror.is_some() {
        ALL_REGISTRIES.iter().map(|s| (*s).to_owned()).collect()
    } else {
        match_images(&with_credentials)
    };
    let kubelet_config = format!(
        "apiVersion: kubelet.config.k8s.io/v1\n\
         kind: CredentialProviderConfig\n\
         providers:\n\
         - name: dynamic-credential-provider\n\
         \x20 args:\n\
         \x20 - get-credentials\n\
         \x20 - -c\n\
         \x20 - {DYNAMIC_CONFIG_PATH}\n\
         \x20 matchImages:\n{}\
         \x20 defaultCacheDuration: \"0s\"\n\
         \x20 apiVersion: credentialprovider.kubelet.k8s.io/v1\n",
        yaml_list("  ", &kubelet_patterns)
    );

    let mut dynamic_config = String::from(
        "apiVersion: credentialprovider.d2iq.com/v1alpha1\n\
         kind: DynamicCredentialProviderConfig\n",
    );
    if let Some(mirror) = mirror {
        // With credentials for other registries as well, try the mirror's
        // first and keep the registry's own for the upstream fallback.
        let strategy = if registries_have_credentials { "MirrorCredentialsFirst" } else { "MirrorCredentialsOnly" };
        dynamic_config.push_str(&format!(
            "mirror:\n  endpoint: {}\n  credentialsStrategy: {}\n",
            quoted(&mirror.host),
            quoted(strategy)
        ));
    }
    dynamic_config.push_str(&format!(
        "credentialProviderPluginBinDir: {PLUGIN_BIN_DIR}\n\
         credentialProviders:\n\
         \x20 apiVersion: kubelet.config.k8s.io/v1\n\
         \x20 kind: CredentialProviderConfig\n\
         \x20 providers:\n\
         \x20 - name: static-credential-provider\n\
         \x20   args:\n\
         \x20   - {STATIC_CREDENTIALS_PATH}\n\
         \x20   matchImages:\n{}\
         \x20   defaultCacheDuration: \"0s\"\n\
         \x20   apiVersion: credentialprovider.kubelet.k8s.io/v1\n",
        yaml_list("    ", &match_images(&with_credentials))
    ));

    let mut auth = Map::new();
    for e in &with_credentials {
        if let Some(c) = &e.credentials {
            let entry = json!({ "username": c.username, "password": c.password });
            for host in registry_names(e) {
                auth.insert(host, entry.clone());
            }
        }
    }
    let response = json!({
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "kind": "CredentialProviderResponse",
        "cacheKeyType": "Registry",
        "cacheDuration": "0s",
        "auth": Value::Object(auth),
    });
    let static_credentials = serde_json::to_vec_pretty(&response)
        .map_err(|_| BootstrapError::field("credentials", "cannot be encoded as JSON"))?;

    Ok(vec![
        secret_file(KUBELET_CONFIG_PATH, kubelet_config.into_bytes()),
        secret_file(DYNAMIC_CONFIG_PATH, dynamic_config.into_bytes()),
        secret_file(STATIC_CREDENTIALS_PATH, static_credentials),
    ])
}

fn secret_file(path: &str, content: Vec<u8>) -> RenderedFile {
    RenderedFile { path: path.to_owned(), mode: 0o600, content }
}

/// The names kubelet matches images of this endpoint's host by
/// (`registry-1.docker.io` is the registry of `docker.io` images).
fn registry_names(e: &ValidEndpoint) -> Vec<String> {
    let mut names = vec![e.host.clone()];
    if e.host == "registry-1.docker.io" {
        names.push("docker.io".to_owned());
    }
    names
}

fn match_images(endpoints: &[&ValidEndpoint]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in endpoints.iter().flat_map(|e| registry_names(e)) {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

fn yaml_list(indent: &str, items: &[String]) -> String {
    items.iter().map(|i| format!("{indent}- {}\n", quoted(i))).collect()
}

/// A YAML double-quoted scalar (JSON string syntax is valid YAML).
fn quoted(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

//! containerd files: the `config_path` drop-in, the mirror's
//! `certs.d/_default/hosts.toml` and one `certs.d/<host>/ca.crt` per CA.

use std::collections::BTreeSet;

use crate::error::BootstrapError;
use crate::render::RenderedFile;
use crate::validate::{ValidConfig, ValidEndpoint};

/// The directory containerd's `config_path` points at.
pub(crate) const CERTS_DIR: &str = "/etc/containerd/certs.d";

/// Every capability containerd's `hosts.toml` parser accepts.
pub(crate) const KNOWN_CAPABILITIES: [&str; 3] = ["pull", "resolve", "push"];

/// Drop-in that enables `config_path` on containerd 2.x (see README for why
/// it is a version 2 file holding only the 2.x plugin key).
const DROP_IN_PATH: &str = "/etc/containerd/conf.d/50-machine-driver-registry.toml";

pub(crate) fn render(config: &ValidConfig) -> Result<Vec<RenderedFile>, BootstrapError> {
    let mut files = vec![file(DROP_IN_PATH, drop_in())?];
    if let Some(mirror) = &config.mirror {
        files.push(file(&format!("{CERTS_DIR}/_default/hosts.toml"), mirror_hosts_toml(mirror))?);
    }
    let mut seen = BTreeSet::new();
    for endpoint in config.endpoints() {
        if let Some(ca) = &endpoint.ca_pem
            && seen.insert(endpoint.host.as_str())
        {
            files.push(RenderedFile { path: ca_path(endpoint), mode: 0o644, content: ca.clone().into_bytes() });
        }
    }
    Ok(files)
}

/// Builds a TOML file, refusing to emit anything a TOML parser rejects:
/// containerd would only log such a file and silently ignore the mirror.
fn file(path: &str, content: String) -> Result<RenderedFile, BootstrapError> {
    let table = content.parse::<toml::Table>().map_err(|e| {
        BootstrapError::field("mirror.url", format!("rendered {path} is not valid TOML ({})", e.message()))
    })?;
    let hosts = table.get("host").and_then(toml::Value::as_table).into_iter().flat_map(|h| h.values());
    for host in hosts {
        let capabilities = host.get("capabilities").and_then(toml::Value::as_array).into_iter().flatten();
        for c in capabilities {
            if !c.as_str().is_some_and(|c| KNOWN_CAPABILITIES.contains(&c)) {
                return Err(BootstrapError::field("mirror", format!("rendered {path} has an unknown capability")));
            }
        }
    }
    Ok(RenderedFile { path: path.to_owned(), mode: 0o644, content: content.into_bytes() })
}

fn drop_in() -> String {
    format!(
        "# Rendered by the machine driver. Version 2 on purpose: containerd 2.x migrates it\n\
         # whatever the root config's version, and containerd 1.x ignores this plugin ID.\n\
         version = 2\n\
         \n\
         [plugins.\"io.containerd.cri.v1.images\".registry]\n\
         \x20 config_path = {}\n",
        toml_string(CERTS_DIR)
    )
}

fn ca_path(endpoint: &ValidEndpoint) -> String {
    format!("{CERTS_DIR}/{}/ca.crt", endpoint.host)
}

/// `_default/hosts.toml`: the mirror as the only host entry, pull and resolve
/// only, no `server` key so that the upstream registry stays the fallback.
fn mirror_hosts_toml(mirror: &ValidEndpoint) -> String {
    let mut out = String::from(
        "# Rendered by the machine driver: pull every image through the mirror;\n\
         # the registry itself stays the fallback (no `server` key).\n",
    );
    out.push_str(&format!("[host.{}]\n", toml_string(&mirror_host_url(mirror))));
    out.push_str("  capabilities = [\"pull\", \"resolve\"]\n");
    if mirror.ca_pem.is_some() {
        out.push_str(&format!("  ca = {}\n", toml_string(&ca_path(mirror))));
    }
    out.push_str("  override_path = true\n");
    out
}

/// `scheme://host[:port]/v2/<path>`: with `override_path = true` containerd
/// uses the path as the API root instead of appending `/v2` after it.
pub(crate) fn mirror_host_url(mirror: &ValidEndpoint) -> String {
    let path = mirror.url.path().trim_end_matches('/');
    let api_path = if path.is_empty() {
        "/v2".to_owned()
    } else if path == "/v2" || path.starts_with("/v2/") {
        path.to_owned()
    } else {
        format!("/v2{path}")
    };
    format!("{}://{}{}", mirror.url.scheme(), mirror.host, api_path)
}

/// A TOML basic string, escaped.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::toml_string;

    #[test]
    fn toml_string_escapes_quotes_backslashes_and_controls() {
        let s = toml_string("a\"b\\c\nd");
        let parsed: toml::Table = format!("k = {s}").parse().expect("valid toml");
        assert_eq!(parsed["k"].as_str(), Some("a\"b\\c\nd"));
    }
}

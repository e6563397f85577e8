//! Request authentication as ECS does it: V3 `ACS3-HMAC-SHA256` (headers, what
//! `alibabacloud_tea_openapi` and the Go/Rust V3 clients send) and V1 `HMAC-SHA1`
//! (query parameters, what `aliyun-python-sdk-core` sends), plus the per-AccessKey
//! `SignatureNonce` replay window and the 15-minute clock-skew window.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use axum::http::HeaderMap;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::error::EcsError;
use fake_cloud_support::wire::encode_component;

use crate::wire::{parse_request_time, request_time};

/// The V3 algorithm name.
pub(crate) const V3_ALGORITHM: &str = "ACS3-HMAC-SHA256";

/// How far a request's timestamp may be from the server clock, and how long nonces are remembered.
pub(crate) const WINDOW: Duration = Duration::from_secs(15 * 60);

/// Headers a V3 signature must cover.
pub(crate) const REQUIRED_SIGNED_HEADERS: &[&str] =
    &["host", "x-acs-action", "x-acs-content-sha256", "x-acs-date", "x-acs-signature-nonce", "x-acs-version"];

/// One seeded identity: an AccessKey pair and the account it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    /// The AccessKey id.
    pub(crate) access_key_id: &'static str,
    /// The AccessKey secret.
    pub(crate) secret: &'static str,
    /// The account (UID) it acts as.
    pub(crate) account: &'static str,
}

/// Every seeded identity.
pub(crate) const IDENTITIES: &[Identity] = &[
    Identity { access_key_id: crate::ACCESS_KEY_ID, secret: crate::ACCESS_KEY_SECRET, account: crate::ACCOUNT_ID },
    Identity {
        access_key_id: crate::OWNER_ACCESS_KEY_ID,
        secret: crate::OWNER_ACCESS_KEY_SECRET,
        account: crate::OWNER_ACCOUNT_ID,
    },
];

/// The identity of an AccessKey id, if it is seeded.
pub(crate) fn identity(access_key_id: &str) -> Option<Identity> {
    IDENTITIES.iter().copied().find(|i| i.access_key_id == access_key_id)
}

/// The parsed `Authorization: ACS3-HMAC-SHA256 Credential=..,SignedHeaders=..,Signature=..` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct V3Authorization {
    /// `Credential`: the AccessKey id.
    pub(crate) access_key_id: String,
    /// `SignedHeaders`, lowercased, sorted and deduplicated.
    pub(crate) signed_headers: Vec<String>,
    /// `Signature` (lowercase hex).
    pub(crate) signature: String,
}

impl V3Authorization {
    /// Parses the header value (after checking the algorithm).
    pub(crate) fn parse(header: &str) -> Result<Self, EcsError> {
        let Some(rest) = header.strip_prefix(V3_ALGORITHM).filter(|r| r.starts_with(' ')) else {
            let algorithm = header.split_whitespace().next().unwrap_or("");
            return Err(EcsError::incomplete_signature(&format!(
                "The signature algorithm \"{algorithm}\" is not supported; use {V3_ALGORITHM}."
            )));
        };
        let mut credential = None;
        let mut signed = None;
        let mut signature = None;
        for part in rest.split(',') {
            let Some((name, value)) = part.trim().split_once('=') else { continue };
            match name.trim() {
                "Credential" => credential = Some(value.trim().to_owned()),
                "SignedHeaders" => signed = Some(value.trim().to_owned()),
                "Signature" => signature = Some(value.trim().to_ascii_lowercase()),
                _ => {}
            }
        }
        let (Some(access_key_id), Some(signed), Some(signature)) = (credential, signed, signature) else {
            return Err(EcsError::incomplete_signature(
                "The Authorization header must carry Credential, SignedHeaders and Signature.",
            ));
        };
        let mut signed_headers: Vec<String> =
            signed.split(';').map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty()).collect();
        signed_headers.sort();
        signed_headers.dedup();
        Ok(Self { access_key_id, signed_headers, signature })
    }
}

/// The parts of an HTTP request a signature covers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signed<'a> {
    /// `POST` or `GET`.
    pub(crate) method: &'a str,
    /// The request path (`/`).
    pub(crate) path: &'a str,
    /// Decoded query parameters, in wire order.
    pub(crate) query: &'a [(String, String)],
    /// Decoded form-body parameters (V1 signs them with the query).
    pub(crate) form: &'a [(String, String)],
    /// The request headers.
    pub(crate) headers: &'a HeaderMap,
    /// The raw body.
    pub(crate) body: &'a [u8],
}

/// `k=v&...`: pairs sorted by name (then value), names and values RFC 3986-encoded.
pub(crate) fn canonical_query<'a>(pairs: impl IntoIterator<Item = &'a (String, String)>) -> String {
    let mut encoded: Vec<(String, String)> =
        pairs.into_iter().map(|(k, v)| (encode_component(k), encode_component(v))).collect();
    encoded.sort();
    encoded.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
}

/// Lowercase hex SHA-256.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

fn hmac_sha1(key: &[u8], data: &[u8]) -> Vec<u8> {
    match Hmac::<sha1::Sha1>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// The V3 canonical request for `signed_headers` (sorted lowercase names).
pub(crate) fn v3_canonical_request(req: &Signed<'_>, signed_headers: &[String], payload_hash: &str) -> String {
    let mut canonical_headers = String::new();
    for name in signed_headers {
        let mut values: Vec<String> = req
            .headers
            .get_all(name.as_str())
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_owned())
            .collect();
        values.sort();
        canonical_headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    let path = if req.path.is_empty() { "/" } else { req.path };
    format!(
        "{}\n{path}\n{}\n{canonical_headers}\n{}\n{payload_hash}",
        req.method,
        canonical_query(req.query),
        signed_headers.join(";")
    )
}

/// `(string to sign, hex signature)` of a V3 canonical request.
pub(crate) fn v3_signature(secret: &str, canonical_request: &str) -> (String, String) {
    let string_to_sign = format!("{V3_ALGORITHM}\n{}", sha256_hex(canonical_request.as_bytes()));
    let signature = hex::encode(hmac_sha256(secret.as_bytes(), string_to_sign.as_bytes()));
    (string_to_sign, signature)
}

/// Verifies a V3 request: signed-header coverage, the body hash, then the signature.
pub(crate) fn verify_v3(req: &Signed<'_>, auth: &V3Authorization, secret: &str) -> Result<(), EcsError> {
    let mut required: Vec<&str> = REQUIRED_SIGNED_HEADERS.to_vec();
    if req.headers.contains_key("content-type") {
        required.push("content-type");
    }
    let missing: Vec<&str> =
        required.into_iter().filter(|name| !auth.signed_headers.iter().any(|s| s == name)).collect();
    if !missing.is_empty() {
        return Err(EcsError::incomplete_signature(&format!("SignedHeaders must include {}.", missing.join(", "))));
    }
    let claimed = req.headers.get("x-acs-content-sha256").and_then(|v| v.to_str().ok()).unwrap_or("").trim();
    let actual = sha256_hex(req.body);
    if !claimed.eq_ignore_ascii_case(&actual) {
        return Err(EcsError::signature_mismatch(&format!(
            "The x-acs-content-sha256 header ({claimed}) is not the SHA-256 of the request body ({actual})."
        )));
    }
    let canonical = v3_canonical_request(req, &auth.signed_headers, claimed);
    let (string_to_sign, expected) = v3_signature(secret, &canonical);
    if expected != auth.signature {
        return Err(EcsError::signature_mismatch(&format!(
            "server string to sign is:{string_to_sign} canonical request is:{canonical}"
        )));
    }
    Ok(())
}

/// The V1 string to sign: `METHOD&%2F&` + pct(canonical query of every parameter but `Signature`).
pub(crate) fn v1_string_to_sign(method: &str, params: &[(String, String)]) -> String {
    let canonical = canonical_query(params.iter().filter(|(k, _)| k != "Signature"));
    format!("{method}&{}&{}", encode_component("/"), encode_component(&canonical))
}

/// The V1 signature: base64(HMAC-SHA1(secret + "&", string to sign)).
pub(crate) fn v1_signature(secret: &str, string_to_sign: &str) -> String {
    base64::engine::general_purpose::STANDARD
        .encode(hmac_sha1(format!("{secret}&").as_bytes(), string_to_sign.as_bytes()))
}

/// Verifies a V1 request (`Signature` over query and form parameters).
pub(crate) fn verify_v1(req: &Signed<'_>, signature: &str, secret: &str) -> Result<(), EcsError> {
    let params: Vec<(String, String)> = req.query.iter().chain(req.form).cloned().collect();
    let string_to_sign = v1_string_to_sign(req.method, &params);
    if v1_signature(secret, &string_to_sign) != signature {
        return Err(EcsError::signature_mismatch(&format!("server string to sign is:{string_to_sign}")));
    }
    Ok(())
}

/// Checks a request timestamp against the server clock (±15 minutes).
pub(crate) fn check_time(sent: &str, now: SystemTime) -> Result<(), EcsError> {
    let at = parse_request_time(sent).ok_or_else(EcsError::timestamp_format)?;
    let skew = match now.duration_since(at) {
        Ok(behind) => behind,
        Err(ahead) => ahead.duration(),
    };
    if skew > WINDOW {
        return Err(EcsError::timestamp_expired(sent, &request_time(now)));
    }
    Ok(())
}

/// Nonces seen per AccessKey within the window.
#[derive(Debug, Default)]
pub(crate) struct Nonces {
    seen: HashMap<(String, String), Instant>,
}

impl Nonces {
    /// Records `nonce` for `access_key_id`; false when it was seen within the window.
    pub(crate) fn record(&mut self, access_key_id: &str, nonce: &str, now: Instant) -> bool {
        self.seen.retain(|_, at| now.saturating_duration_since(*at) < WINDOW);
        let key = (access_key_id.to_owned(), nonce.to_owned());
        if self.seen.contains_key(&key) {
            return false;
        }
        self.seen.insert(key, now);
        true
    }

    /// How many nonces are remembered.
    pub(crate) fn len(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn v1_matches_the_published_example() {
        // Alibaba's V1 signature example (DescribeRegions, secret "testsecret").
        let params = pairs(&[
            ("AccessKeyId", "testid"),
            ("Action", "DescribeRegions"),
            ("Format", "XML"),
            ("SignatureMethod", "HMAC-SHA1"),
            ("SignatureNonce", "3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf"),
            ("SignatureVersion", "1.0"),
            ("Timestamp", "2016-02-23T12:46:24Z"),
            ("Version", "2014-05-26"),
        ]);
        let sts = v1_string_to_sign("GET", &params);
        assert_eq!(
            sts,
            "GET&%2F&AccessKeyId%3Dtestid%26Action%3DDescribeRegions%26Format%3DXML%26SignatureMethod%3DHMAC-SHA1%26SignatureNonce%3D3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf%26SignatureVersion%3D1.0%26Timestamp%3D2016-02-23T12%253A46%253A24Z%26Version%3D2014-05-26"
        );
        assert_eq!(v1_signature("testsecret", &sts), "OLeaidS1JvxuMvnyHOwuJ+uX5qY=");
    }

    #[test]
    fn v3_canonical_request_shape() {
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("ecs.example"));
        headers.insert("x-acs-action", HeaderValue::from_static("RunInstances"));
        headers.insert("x-acs-date", HeaderValue::from_static(" 2025-01-01T00:00:00Z "));
        let query = pairs(&[("b", "x y"), ("a", ""), ("Tag.1.Key", "k/1")]);
        let req = Signed { method: "POST", path: "/", query: &query, form: &[], headers: &headers, body: b"" };
        let signed: Vec<String> = vec!["host".into(), "x-acs-action".into(), "x-acs-date".into()];
        let canonical = v3_canonical_request(&req, &signed, &sha256_hex(b""));
        assert_eq!(
            canonical,
            "POST\n/\nTag.1.Key=k%2F1&a=&b=x%20y\nhost:ecs.example\nx-acs-action:RunInstances\nx-acs-date:2025-01-01T00:00:00Z\n\nhost;x-acs-action;x-acs-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let (sts, sig) = v3_signature("secret", &canonical);
        assert!(sts.starts_with("ACS3-HMAC-SHA256\n"));
        assert_eq!(sig.len(), 64);
    }

    #[test]
    fn authorization_parses_and_refuses_other_algorithms() {
        let auth = V3Authorization::parse(
            "ACS3-HMAC-SHA256 Credential=AK,SignedHeaders=x-acs-date;host;Host,Signature=ABCDEF",
        )
        .expect("parses");
        assert_eq!(auth.access_key_id, "AK");
        assert_eq!(auth.signed_headers, vec!["host".to_owned(), "x-acs-date".to_owned()]);
        assert_eq!(auth.signature, "abcdef");
        assert_eq!(
            V3Authorization::parse("ACS3-HMAC-SM3 Credential=AK").map_err(|e| e.code),
            Err("IncompleteSignature".to_owned())
        );
        assert!(V3Authorization::parse("ACS3-HMAC-SHA256 Credential=AK").is_err());
    }

    #[test]
    fn nonces_and_clock_window() {
        let mut nonces = Nonces::default();
        let t0 = Instant::now();
        assert!(nonces.record("ak", "n1", t0));
        assert!(!nonces.record("ak", "n1", t0 + Duration::from_secs(60)));
        assert!(nonces.record("other", "n1", t0), "nonces are per AccessKey");
        assert!(nonces.record("ak", "n1", t0 + WINDOW + Duration::from_secs(1)), "forgotten after the window");
        let now = SystemTime::now();
        assert!(check_time(&request_time(now), now).is_ok());
        let early = request_time(now - Duration::from_secs(16 * 60));
        assert_eq!(check_time(&early, now).map_err(|e| e.code), Err("InvalidTimeStamp.Expired".to_owned()));
        let late = request_time(now + Duration::from_secs(16 * 60));
        assert!(check_time(&late, now).is_err());
        assert_eq!(check_time("yesterday", now).map_err(|e| e.code), Err("InvalidTimeStamp.Format".to_owned()));
    }
}

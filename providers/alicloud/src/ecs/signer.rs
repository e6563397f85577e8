//! ACS3-HMAC-SHA256, the request signature of Alibaba Cloud's current SDKs
//! ("Request syntax and signature method V3").
//!
//! The canonical request is the method, the path (`/`), the sorted,
//! RFC 3986-encoded query, the signed headers (`host`, `content-type` when
//! sent, and every `x-acs-*` header, lower-cased and sorted) as `name:value`
//! lines, their names joined by `;`, and the hex SHA-256 of the body. The
//! string to sign is `ACS3-HMAC-SHA256\n` + hex(SHA-256(canonical request));
//! the signature is hex(HMAC-SHA256(secret, string to sign)). Every attempt
//! gets a fresh `x-acs-signature-nonce`: ECS refuses a nonce it has seen.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// The algorithm name in the `Authorization` header.
pub(crate) const ALGORITHM: &str = "ACS3-HMAC-SHA256";

/// One request to sign.
#[derive(Debug)]
pub(crate) struct Unsigned<'a> {
    /// `POST` or `GET`.
    pub(crate) method: &'a str,
    /// The `host` header (host, and `:port` when not the scheme's default).
    pub(crate) host: &'a str,
    /// The API action (`RunInstances`).
    pub(crate) action: &'a str,
    /// The API version (`2014-05-26`).
    pub(crate) version: &'a str,
    /// The action's parameters, sent in the query string.
    pub(crate) query: &'a BTreeMap<String, String>,
    /// The body: the action's parameters, form-encoded (keeps user data out of URLs).
    pub(crate) body: &'a [u8],
    /// `content-type` of the body, signed when set.
    pub(crate) content_type: Option<&'a str>,
    /// `x-acs-date`, `YYYY-MM-DDTHH:MM:SSZ` (UTC).
    pub(crate) date: &'a str,
    /// `x-acs-signature-nonce`.
    pub(crate) nonce: &'a str,
}

/// The signed request: the headers to send and the encoded query string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signed {
    /// Headers, the `Authorization` header last.
    pub(crate) headers: Vec<(String, String)>,
    /// The canonical (and sent) query string.
    pub(crate) query: String,
}

/// Signs `req` with the access key pair.
pub(crate) fn sign(req: &Unsigned<'_>, access_key_id: &str, access_key_secret: &str) -> Signed {
    let query = canonical_query(req.query);
    let content_hash = hex::encode(Sha256::digest(req.body));
    let mut headers: BTreeMap<&str, String> = BTreeMap::new();
    headers.insert("host", req.host.to_string());
    if let Some(ct) = req.content_type {
        headers.insert("content-type", ct.to_string());
    }
    headers.insert("x-acs-action", req.action.to_string());
    headers.insert("x-acs-content-sha256", content_hash.clone());
    headers.insert("x-acs-date", req.date.to_string());
    headers.insert("x-acs-signature-nonce", req.nonce.to_string());
    headers.insert("x-acs-version", req.version.to_string());
    let signed_names = headers.keys().copied().collect::<Vec<_>>().join(";");
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{}\n", v.trim())).collect();
    let canonical_request = format!("{}\n/\n{query}\n{canonical_headers}\n{signed_names}\n{content_hash}", req.method);
    let string_to_sign = format!("{ALGORITHM}\n{}", hex::encode(Sha256::digest(canonical_request.as_bytes())));
    let signature = hex::encode(hmac_sha256(access_key_secret.as_bytes(), string_to_sign.as_bytes()));
    let mut out: Vec<(String, String)> = headers.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    out.push((
        "authorization".to_string(),
        format!("{ALGORITHM} Credential={access_key_id},SignedHeaders={signed_names},Signature={signature}"),
    ));
    Signed { headers: out, query }
}

/// Parameters sorted by name, names and values percent-encoded (RFC 3986:
/// only `A-Z a-z 0-9 - _ . ~` stay as they are).
pub(crate) fn canonical_query(params: &BTreeMap<String, String>) -> String {
    let mut encoded: Vec<(String, String)> =
        params.iter().map(|(k, v)| (percent_encode(k), percent_encode(v))).collect();
    encoded.sort();
    encoded.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
}

/// RFC 3986 percent-encoding of `s` (UTF-8 bytes).
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// HMAC-SHA256 (RFC 2104) on `sha2`.
pub(crate) fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // RFC 4231 test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(hex::encode(mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        // Test case 6: a key longer than the block.
        let mac = hmac_sha256(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First");
        assert_eq!(hex::encode(mac), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    #[test]
    fn the_query_is_sorted_and_rfc3986_encoded() {
        let params: BTreeMap<String, String> = [
            ("Tag.1.Key", "kubernetes.io/cluster/shoot--a"),
            ("InstanceIds", "[\"i-1\"]"),
            ("Empty", ""),
            ("Name", "a b*c~"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            canonical_query(&params),
            "Empty=&InstanceIds=%5B%22i-1%22%5D&Name=a%20b%2Ac~&Tag.1.Key=kubernetes.io%2Fcluster%2Fshoot--a"
        );
    }

    /// The vector was computed by Alibaba's own signer (`alibabacloud_tea_openapi`
    /// 0.4.6, `Utils.get_authorization`) for this request: a tag key with `/` and a
    /// space exercises the encoding.
    #[test]
    fn the_signature_is_alibabas() {
        let query: BTreeMap<String, String> = [
            ("RegionId", "cn-shanghai"),
            ("ImageId", "win2019_1809_x64_dtc_zh-cn_40G_alibase_20230811.vhd"),
            ("Tag.1.Key", "kubernetes.io/cluster/a b"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let signed = sign(
            &Unsigned {
                method: "POST",
                host: "ecs.cn-shanghai.aliyuncs.com",
                action: "RunInstances",
                version: "2014-05-26",
                query: &query,
                body: b"",
                content_type: None,
                date: "2023-10-26T10:22:32Z",
                nonce: "3156853299f313e23d1673dc12e1703d",
            },
            "YourAccessKeyId",
            "YourAccessKeySecret",
        );
        assert!(
            signed
                .headers
                .last()
                .unwrap()
                .1
                .ends_with(",Signature=3c5c6f2b33bd47829eb1adf56dc4e847ce689346b237dacc2669fdd9bc42a1ea")
        );
    }

    #[test]
    fn the_authorization_header_names_the_signed_headers() {
        let query = BTreeMap::from([("RegionId".to_string(), "cn-shanghai".to_string())]);
        let signed = sign(
            &Unsigned {
                method: "POST",
                host: "ecs.cn-shanghai.aliyuncs.com",
                action: "DescribeInstances",
                version: "2014-05-26",
                query: &query,
                body: b"",
                content_type: None,
                date: "2023-10-26T10:22:32Z",
                nonce: "3156853299f313e23d1673dc12e1703d",
            },
            "YourAccessKeyId",
            "YourAccessKeySecret",
        );
        let auth = &signed.headers.last().unwrap().1;
        assert!(auth.starts_with(
            "ACS3-HMAC-SHA256 Credential=YourAccessKeyId,SignedHeaders=host;x-acs-action;x-acs-content-sha256;x-acs-date;x-acs-signature-nonce;x-acs-version,Signature="
        ));
        assert!(signed.headers.iter().any(|(k, v)| k == "x-acs-content-sha256"
            && v == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    }
}

//! Who is calling: the account and region from the SigV4 `Authorization` header.

use axum::http::HeaderMap;

/// The image owner's seeded account (access key id `AKIDOWNER`).
pub const OWNER_ACCOUNT: &str = "111111111111";
/// The cluster (consumer) account (access key id `AKIDCLUSTER` and every unknown key id).
pub const CLUSTER_ACCOUNT: &str = "222222222222";
/// The account that owns the public Amazon images.
pub const AMAZON_ACCOUNT: &str = "137112412989";

/// The caller of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    /// The 12-digit account id.
    pub(crate) account: String,
    /// The access key id from the credential scope (never the secret).
    pub(crate) access_key_id: String,
    /// The region from the credential scope.
    pub(crate) region: String,
    /// For temporary keys of a role session: the assumed-role ARN and its `AssumedRoleId`
    /// (what STS GetCallerIdentity answers for them).
    pub(crate) assumed_role: Option<AssumedRole>,
}

/// The identity of a role session (`AssumedRoleUser` of AssumeRoleWithWebIdentity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AssumedRole {
    /// `arn:aws:sts::<account>:assumed-role/<role>/<session>`.
    pub(crate) arn: String,
    /// `AROA...:<session>`.
    pub(crate) id: String,
}

/// Maps an access key id to its account.
pub(crate) fn account_of(access_key_id: &str) -> &'static str {
    match access_key_id {
        "AKIDOWNER" => OWNER_ACCOUNT,
        _ => CLUSTER_ACCOUNT,
    }
}

impl Caller {
    /// Reads `Authorization: AWS4-HMAC-SHA256 Credential=AKID/20240101/eu-west-1/ec2/aws4_request, ...`.
    /// The signature is not verified; `None` when the header or its credential scope is absent.
    pub(crate) fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let auth = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
        let scope = auth.split("Credential=").nth(1)?.split([',', ' ']).next()?;
        let mut parts = scope.split('/');
        let access_key_id = parts.next().filter(|k| !k.is_empty())?.to_owned();
        let _date = parts.next();
        let region = parts.next().filter(|r| !r.is_empty()).unwrap_or("us-east-1").to_owned();
        Some(Self { account: account_of(&access_key_id).to_owned(), access_key_id, region, assumed_role: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(axum::http::header::AUTHORIZATION, value.parse().expect("header"));
        map
    }

    #[test]
    fn parses_credential_scope() {
        let caller = Caller::from_headers(&headers(
            "AWS4-HMAC-SHA256 Credential=AKIDOWNER/20240101/eu-west-1/ec2/aws4_request, SignedHeaders=host, Signature=abc",
        ))
        .expect("caller");
        assert_eq!(caller.account, OWNER_ACCOUNT);
        assert_eq!(caller.region, "eu-west-1");
        let other =
            Caller::from_headers(&headers("AWS4-HMAC-SHA256 Credential=AKIDX/20240101/us-east-1/sts/aws4_request"))
                .expect("caller");
        assert_eq!(other.account, CLUSTER_ACCOUNT);
        assert!(Caller::from_headers(&HeaderMap::new()).is_none());
        assert!(Caller::from_headers(&headers("Bearer x")).is_none());
    }
}

//! Who is calling. A bearer token of the form `sa:<email>` (or `user:<email>`)
//! names the caller principal (`serviceAccount:<email>` / `user:<email>`),
//! which image IAM checks use; so does an access token the fake's STS issued
//! (`crate::sts::authenticate` has replaced it by `sa:<email>` or the
//! `principal://...` of a federated identity by then; unknown tokens were
//! refused). Anonymous requests act as the default caller set with
//! `POST /_admin/gce/caller`, or, when none is set, as nobody in particular:
//! they see only what `allUsers` may see.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

/// The principal of one request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Caller {
    /// `serviceAccount:<email>` / `user:<email>`, or `None` for anonymous.
    pub(crate) principal: Option<String>,
}

impl Caller {
    /// Reads the caller from the `Authorization` header, falling back to `default`.
    pub(crate) fn from_headers(headers: &HeaderMap, default: Option<&str>) -> Self {
        let token = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let principal = token
            .and_then(|t| {
                if let Some(email) = t.strip_prefix("sa:") {
                    Some(format!("serviceAccount:{email}"))
                } else if t.starts_with("principal://") {
                    Some(t.to_string())
                } else {
                    t.strip_prefix("user:").map(|email| format!("user:{email}"))
                }
            })
            .filter(|p| p.contains('@') || p.starts_with("principal://"))
            .or_else(|| default.map(str::to_string));
        Self { principal }
    }

    /// The `user` GCE reports on operations: the email, a federated
    /// principal's subject, or `anonymous`.
    pub(crate) fn user(&self) -> &str {
        let principal = self.principal.as_deref();
        if let Some(subject) = principal.and_then(|p| p.strip_prefix("principal://")?.split_once("/subject/")) {
            return subject.1;
        }
        principal.and_then(|p| p.split_once(':').map(|(_, email)| email)).unwrap_or("anonymous")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_forms() {
        let mut headers = HeaderMap::new();
        assert_eq!(Caller::from_headers(&headers, None).principal, None);
        assert_eq!(Caller::from_headers(&headers, Some("user:a@b")).user(), "a@b");
        headers.insert(AUTHORIZATION, "Bearer sa:x@p.iam.gserviceaccount.com".parse().expect("header"));
        assert_eq!(
            Caller::from_headers(&headers, None).principal.as_deref(),
            Some("serviceAccount:x@p.iam.gserviceaccount.com")
        );
        headers.insert(AUTHORIZATION, "Bearer ya29.opaque".parse().expect("header"));
        assert_eq!(Caller::from_headers(&headers, None).principal, None);
        let federated = "principal://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/subject/s";
        headers.insert(AUTHORIZATION, format!("Bearer {federated}").parse().expect("header"));
        let caller = Caller::from_headers(&headers, None);
        assert_eq!(caller.principal.as_deref(), Some(federated));
        assert_eq!(caller.user(), "s");
    }
}

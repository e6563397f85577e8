//! Which secret keys a driver needs, declared by the provider and checked by
//! the server before any provider code runs.

use crate::error::DriverError;
use crate::secret::SecretData;

/// The credential forms a provider accepts; any one of them suffices.
///
/// Each form is a list of settings, each setting a list of aliases
/// (`["providerAccessKeyId", "accessKeyID"]`). AWS, for example, accepts
/// static keys or workload identity (a token file and a role ARN). A secret
/// that completes no form is refused with INVALID_ARGUMENT naming the first
/// missing key of the form it started (the first form when it started none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretKeys {
    forms: Vec<CredentialForm>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct CredentialForm {
    name: &'static str,
    settings: Vec<&'static [&'static str]>,
}

impl CredentialForm {
    /// The first setting none of whose aliases is set.
    fn first_missing(&self, data: &SecretData) -> Option<&'static [&'static str]> {
        self.settings.iter().copied().find(|aliases| !aliases.iter().any(|k| data.has(k)))
    }

    /// How many of the form's settings `data` holds.
    fn present(&self, data: &SecretData) -> usize {
        self.settings.iter().filter(|aliases| aliases.iter().any(|k| data.has(k))).count()
    }

    /// How many of the form's settings `data` lacks.
    fn absent(&self, data: &SecretData) -> usize {
        self.settings.len() - self.present(data)
    }

    fn describe(&self) -> String {
        let keys: Vec<&str> = self.settings.iter().filter_map(|aliases| aliases.first().copied()).collect();
        format!("{} ({})", self.name, keys.join(" and "))
    }
}

impl SecretKeys {
    /// No requirement: every secret passes (the provider checks what it reads).
    pub fn none() -> Self {
        Self::default()
    }

    /// Adds an accepted credential form named `name` (for error messages) that
    /// needs every one of `settings`.
    pub fn or_form(mut self, name: &'static str, settings: &[&'static [&'static str]]) -> Self {
        self.forms.push(CredentialForm { name, settings: settings.to_vec() });
        self
    }

    /// A single form of credentials needing every one of `settings`.
    pub fn all_of(settings: &[&'static [&'static str]]) -> Self {
        Self::none().or_form("credentials", settings)
    }

    /// Checks `data`, the secret sent as request field `field` (`secret`,
    /// `owner_secret`): `Ok` when one form is complete.
    pub fn check(&self, data: &SecretData, field: &str) -> Result<(), DriverError> {
        let mut missing = Vec::with_capacity(self.forms.len());
        for form in &self.forms {
            match form.first_missing(data) {
                None => return Ok(()),
                Some(aliases) => missing.push((form, aliases)),
            }
        }
        // The form the secret is closest to (fewest settings missing, the
        // first on a tie) among those it started; the first form otherwise.
        let started =
            missing.iter().filter(|(form, _)| form.present(data) > 0).min_by_key(|(form, _)| form.absent(data));
        let Some(&(form, aliases)) = started.or(missing.first()) else {
            return Ok(());
        };
        let mut message = format!("is required (accepted keys: {})", aliases.join(", "));
        let others: Vec<String> =
            self.forms.iter().filter(|other| other.name != form.name).map(CredentialForm::describe).collect();
        if !others.is_empty() {
            message.push_str(&format!(" for {}; or give {}", form.name, others.join(", or ")));
        }
        Err(DriverError::invalid_argument(format!("{field}.{}", aliases.first().copied().unwrap_or("?")), message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AKID: &[&str] = &["providerAccessKeyId", "accessKeyID"];
    const SECRET: &[&str] = &["providerSecretAccessKey", "secretAccessKey"];
    const TOKEN_FILE: &[&str] = &["workloadIdentityTokenFile"];
    const ROLE: &[&str] = &["roleARN"];

    fn aws() -> SecretKeys {
        SecretKeys::none().or_form("static keys", &[AKID, SECRET]).or_form("workload identity", &[TOKEN_FILE, ROLE])
    }

    fn secret(pairs: &[(&str, &str)]) -> SecretData {
        pairs.iter().copied().collect()
    }

    #[test]
    fn any_complete_form_passes() {
        assert!(aws().check(&secret(&[("accessKeyID", "a"), ("secretAccessKey", "s")]), "secret").is_ok());
        assert!(aws().check(&secret(&[("workloadIdentityTokenFile", "/t"), ("roleARN", "arn")]), "secret").is_ok());
        assert!(SecretKeys::none().check(&secret(&[]), "secret").is_ok());
    }

    #[test]
    fn the_started_form_names_its_missing_key() {
        let err = aws().check(&secret(&[("workloadIdentityTokenFile", "/t")]), "owner_secret").unwrap_err();
        assert_eq!(err.field(), Some("owner_secret.roleARN"));
        assert!(err.message().contains("static keys (providerAccessKeyId and providerSecretAccessKey)"));
        let err = aws().check(&secret(&[("secretAccessKey", "CANARY")]), "secret").unwrap_err();
        assert_eq!(err.field(), Some("secret.providerAccessKeyId"));
        assert!(!err.message().contains("CANARY"));
    }

    #[test]
    fn forms_sharing_settings_name_the_key_of_the_closest_one() {
        // Azure: both forms need the client, tenant and subscription.
        const CLIENT: &[&str] = &["clientID"];
        const CLIENT_SECRET: &[&str] = &["clientSecret"];
        const TENANT: &[&str] = &["tenantID"];
        const SUBSCRIPTION: &[&str] = &["subscriptionID"];
        let azure = SecretKeys::none()
            .or_form("a client secret", &[CLIENT, CLIENT_SECRET, TENANT, SUBSCRIPTION])
            .or_form("workload identity", &[CLIENT, TOKEN_FILE, TENANT, SUBSCRIPTION]);
        let wi = secret(&[("clientID", "c"), ("workloadIdentityTokenFile", "/t"), ("subscriptionID", "s")]);
        assert_eq!(azure.check(&wi, "secret").unwrap_err().field(), Some("secret.tenantID"));
        let plain = secret(&[("clientID", "c"), ("clientSecret", "x"), ("subscriptionID", "s")]);
        assert_eq!(azure.check(&plain, "secret").unwrap_err().field(), Some("secret.tenantID"));
        let bare = secret(&[("clientID", "c")]);
        assert_eq!(
            azure.check(&bare, "secret").unwrap_err().field(),
            Some("secret.clientSecret"),
            "tie: the first form"
        );
    }

    #[test]
    fn an_empty_secret_names_the_first_form() {
        let err = aws().check(&secret(&[("userData", "x")]), "secret").unwrap_err();
        assert_eq!(err.field(), Some("secret.providerAccessKeyId"));
        assert!(
            err.message().contains("workload identity (workloadIdentityTokenFile and roleARN)"),
            "{}",
            err.message()
        );
        let single = SecretKeys::all_of(&[AKID]).check(&secret(&[]), "secret").unwrap_err();
        assert_eq!(
            single.message(),
            "secret.providerAccessKeyId: is required (accepted keys: providerAccessKeyId, accessKeyID)"
        );
    }
}

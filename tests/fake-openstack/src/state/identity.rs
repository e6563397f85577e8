//! Keystone's side of the state: the seeded users, projects and application credential
//! (static), and the issued tokens with their lifetime (kept across `/_admin/reset`).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use fake_cloud_support::FaultTable;

use crate::{
    APP_CREDENTIAL_ID, APP_CREDENTIAL_NAME, APP_CREDENTIAL_SECRET, DOMAIN_ID, DOMAIN_NAME, OWNER_PASSWORD,
    OWNER_PROJECT_ID, OWNER_PROJECT_NAME, OWNER_USER_ID, OWNER_USERNAME, PASSWORD, PROJECT_ID, PROJECT_NAME, USER_ID,
    USERNAME,
};

/// Default token lifetime.
pub(crate) const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// A seeded user with the one project it has the `member` role on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct User {
    /// Keystone user id.
    pub(crate) id: &'static str,
    /// User name (unique in [`DOMAIN_ID`]).
    pub(crate) name: &'static str,
    /// Password.
    pub(crate) password: &'static str,
    /// The project it may scope to.
    pub(crate) project_id: &'static str,
}

/// A seeded project.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Project {
    /// Keystone project id.
    pub(crate) id: &'static str,
    /// Project name (unique in [`DOMAIN_ID`]).
    pub(crate) name: &'static str,
}

/// The seeded users.
pub(crate) const USERS: [User; 2] = [
    User { id: USER_ID, name: USERNAME, password: PASSWORD, project_id: PROJECT_ID },
    User { id: OWNER_USER_ID, name: OWNER_USERNAME, password: OWNER_PASSWORD, project_id: OWNER_PROJECT_ID },
];

/// The seeded projects.
pub(crate) const PROJECTS: [Project; 2] =
    [Project { id: PROJECT_ID, name: PROJECT_NAME }, Project { id: OWNER_PROJECT_ID, name: OWNER_PROJECT_NAME }];

/// The seeded application credential: `(id, name, secret, user id, project id)`.
pub(crate) const APP_CREDENTIAL: (&str, &str, &str, &str, &str) =
    (APP_CREDENTIAL_ID, APP_CREDENTIAL_NAME, APP_CREDENTIAL_SECRET, USER_ID, PROJECT_ID);

/// Whether a domain reference (`{"id"}` or `{"name"}`) names the one domain.
pub(crate) fn is_domain(id: Option<&str>, name: Option<&str>) -> bool {
    match (id, name) {
        (Some(id), _) => id == DOMAIN_ID,
        (None, Some(name)) => name == DOMAIN_NAME,
        (None, None) => false,
    }
}

/// A user by id.
pub(crate) fn user_by_id(id: &str) -> Option<User> {
    USERS.iter().copied().find(|u| u.id == id)
}

/// A user by name in the one domain.
pub(crate) fn user_by_name(name: &str) -> Option<User> {
    USERS.iter().copied().find(|u| u.name == name)
}

/// A project by id.
pub(crate) fn project_by_id(id: &str) -> Option<Project> {
    PROJECTS.iter().copied().find(|p| p.id == id)
}

/// A project by name in the one domain.
pub(crate) fn project_by_name(name: &str) -> Option<Project> {
    PROJECTS.iter().copied().find(|p| p.name == name)
}

/// One issued token.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    /// The user.
    pub(crate) user: User,
    /// The scoped project.
    pub(crate) project: Project,
    /// Authentication methods used.
    pub(crate) methods: Vec<String>,
    /// When issued.
    pub(crate) issued_at: SystemTime,
    /// When it stops being valid.
    pub(crate) expires_at: SystemTime,
    /// The audit id.
    pub(crate) audit_id: String,
}

/// Tokens, their lifetime, refusal and issue counters, and `tokens.create` faults.
#[derive(Debug)]
pub(crate) struct Auth {
    /// Valid (or expired but not yet pruned) tokens by id.
    pub(crate) tokens: HashMap<String, Token>,
    /// Lifetime of tokens issued from now on.
    pub(crate) lifetime: Duration,
    /// Tokens issued so far.
    pub(crate) issued: u64,
    /// Service requests refused with 401 before the call gate.
    pub(crate) unauthorized: u64,
    /// Faults posted for the exact operation `tokens.create`.
    pub(crate) faults: FaultTable,
}

impl Default for Auth {
    fn default() -> Self {
        Self {
            tokens: HashMap::new(),
            lifetime: DEFAULT_TOKEN_LIFETIME,
            issued: 0,
            unauthorized: 0,
            faults: FaultTable::default(),
        }
    }
}

impl Auth {
    /// The token `id` if it exists and has not expired at `now`.
    pub(crate) fn valid(&self, id: &str, now: SystemTime) -> Option<&Token> {
        self.tokens.get(id).filter(|t| t.expires_at > now)
    }

    /// Drops expired tokens.
    pub(crate) fn prune(&mut self, now: SystemTime) {
        self.tokens.retain(|_, t| t.expires_at > now);
    }
}

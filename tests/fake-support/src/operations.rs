//! Operation classes and the selectors that faults and latency rules match on.

use serde::{Deserialize, Serialize};

/// The cloud-neutral class of a cloud API operation (see `docs/fake-admin-api.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpClass {
    /// Creates an instance (`RunInstances`, `instances.insert`).
    Create,
    /// Reads state (describe/get/list).
    Read,
    /// Changes an existing resource (attributes, tags, IAM policies).
    Write,
    /// Deletes an instance (`TerminateInstances`, `instances.delete`).
    Delete,
}

impl OpClass {
    /// Parses a class word (`create`, `read`, `write`, `delete`).
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "create" => Some(Self::Create),
            "read" => Some(Self::Read),
            "write" => Some(Self::Write),
            "delete" => Some(Self::Delete),
            _ => None,
        }
    }
}

/// What an admin rule (fault or latency) applies to: every operation, a class, or one exact name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpSelector {
    /// `"*"`: every operation.
    All,
    /// A class word such as `"create"`.
    Class(OpClass),
    /// An exact cloud operation name such as `"RunInstances"`.
    Exact(String),
}

impl OpSelector {
    /// Parses the `"operation"` field of an admin request.
    pub fn parse(text: &str) -> Self {
        if text == "*" {
            return Self::All;
        }
        match OpClass::parse(text) {
            Some(class) => Self::Class(class),
            None => Self::Exact(text.to_owned()),
        }
    }

    /// Whether a call of `operation` (whose class is `class`, if it has one) matches.
    pub fn matches(&self, operation: &str, class: Option<OpClass>) -> bool {
        match self {
            Self::All => true,
            Self::Class(wanted) => class == Some(*wanted),
            Self::Exact(name) => name == operation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_parses_and_matches() {
        assert_eq!(OpSelector::parse("*"), OpSelector::All);
        assert_eq!(OpSelector::parse("create"), OpSelector::Class(OpClass::Create));
        let exact = OpSelector::parse("RunInstances");
        assert!(exact.matches("RunInstances", Some(OpClass::Create)));
        assert!(!exact.matches("DescribeInstances", Some(OpClass::Read)));
        let read = OpSelector::parse("read");
        assert!(read.matches("DescribeInstances", Some(OpClass::Read)));
        assert!(!read.matches("RunInstances", Some(OpClass::Create)));
        assert!(!read.matches("Unknown", None));
        assert!(OpSelector::All.matches("Unknown", None));
    }
}

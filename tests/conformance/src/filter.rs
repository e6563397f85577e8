//! `--run` / `--skip` selection of scenarios by regular expression.

use regex::Regex;

/// Selects scenarios by name: those matching `run` (all when unset) and not matching `skip`.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    run: Option<Regex>,
    skip: Option<Regex>,
}

impl Filter {
    /// Builds a filter from the two optional patterns; an invalid pattern is an error.
    pub fn new(run: Option<&str>, skip: Option<&str>) -> Result<Self, regex::Error> {
        Ok(Self { run: run.map(Regex::new).transpose()?, skip: skip.map(Regex::new).transpose()? })
    }

    /// Whether the scenario `name` is selected.
    pub fn selects(&self, name: &str) -> bool {
        self.run.as_ref().is_none_or(|r| r.is_match(name)) && !self.skipped(name)
    }

    /// Whether `name` matches `--skip` (the leak check honours only this one).
    pub fn skipped(&self, name: &str) -> bool {
        self.skip.as_ref().is_some_and(|r| r.is_match(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_and_skip_combine() {
        let f = Filter::new(Some("^lifecycle|^create/"), Some("concurrent")).unwrap();
        assert!(f.selects("lifecycle/full"));
        assert!(f.selects("create/idempotent-repeated"));
        assert!(!f.selects("create/idempotent-concurrent"));
        assert!(!f.selects("identity/probe"));
        assert!(f.skipped("create/idempotent-concurrent"));
    }

    #[test]
    fn empty_filter_selects_everything() {
        let f = Filter::new(None, None).unwrap();
        assert!(f.selects("anything"));
        assert!(!f.skipped("anything"));
    }

    #[test]
    fn invalid_pattern_is_an_error() {
        assert!(Filter::new(Some("("), None).is_err());
    }
}

//! The one way to follow a cloud's page tokens: bounded, and safe against a
//! cloud (or a fake) that hands the same token back.
//!
//! Every paged read of every provider walks its pages with [`PageTokens`]: it
//! stops with an error after [`MAX_PAGES`] pages (or the caller's own cap) and
//! when a token comes back that was already followed, instead of looping until
//! the RPC's deadline while holding a rate-limit budget.

use std::collections::HashSet;
use std::time::Duration;

use crate::{DriverError, ErrorKind};

/// Most pages one paged read follows unless its caller sets another cap. At
/// the clouds' usual page sizes (50 to 1,000) that is 50,000 to 1,000,000
/// items, far beyond one cluster's VMs.
pub const MAX_PAGES: usize = 1000;

/// The tokens of one paged read so far.
#[derive(Debug)]
pub struct PageTokens {
    what: &'static str,
    cap: usize,
    pages: usize,
    seen: HashSet<String>,
}

impl PageTokens {
    /// A paged read of `what` (the cloud call, e.g. `ec2.DescribeInstances`), at most [`MAX_PAGES`] pages.
    pub fn new(what: &'static str) -> Self {
        Self::with_cap(what, MAX_PAGES)
    }

    /// A paged read of at most `cap` pages.
    pub fn with_cap(what: &'static str, cap: usize) -> Self {
        Self { what, cap: cap.max(1), pages: 0, seen: HashSet::new() }
    }

    /// Pages read so far.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// Records one page read whose answer carried `next` (blank = last page)
    /// and returns the token to send for the next page, `None` when done.
    /// UNAVAILABLE when the cloud repeats a token it already gave (the read
    /// would never end) or the read exceeds its cap.
    pub fn next(&mut self, next: Option<&str>) -> Result<Option<String>, DriverError> {
        self.pages += 1;
        let Some(token) = next.filter(|t| !t.trim().is_empty()) else { return Ok(None) };
        if !self.seen.insert(token.to_string()) {
            return Err(DriverError::new(
                ErrorKind::Unavailable,
                crate::reasons::PAGE_TOKEN_REPEATED,
                format!(
                    "{} returned a page token it had already returned (page {}): the read was stopped",
                    self.what, self.pages
                ),
            )
            .with_retry_after(Duration::from_secs(5)));
        }
        if self.pages >= self.cap {
            return Err(DriverError::new(
                ErrorKind::Unavailable,
                crate::reasons::TOO_MANY_PAGES,
                format!("{} had more than {} pages: the read was stopped", self.what, self.cap),
            )
            .with_retry_after(Duration::from_secs(5)));
        }
        Ok(Some(token.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_new_tokens_and_stops_at_the_last_page() {
        let mut p = PageTokens::new("x.list");
        assert_eq!(p.next(Some("a")).expect("a").as_deref(), Some("a"));
        assert_eq!(p.next(Some("b")).expect("b").as_deref(), Some("b"));
        assert_eq!(p.next(Some("")).expect("end"), None);
        assert_eq!(p.pages(), 3);
        assert_eq!(PageTokens::new("x").next(None).expect("end"), None);
    }

    #[test]
    fn a_repeated_token_or_too_many_pages_is_unavailable() {
        let mut p = PageTokens::new("x.list");
        p.next(Some("a")).expect("a");
        let err = p.next(Some("a")).expect_err("repeated");
        assert_eq!((err.kind(), err.reason()), (ErrorKind::Unavailable, "PAGE_TOKEN_REPEATED"));

        let mut p = PageTokens::with_cap("x.list", 3);
        p.next(Some("1")).expect("1");
        p.next(Some("2")).expect("2");
        let err = p.next(Some("3")).expect_err("capped");
        assert_eq!(err.reason(), "TOO_MANY_PAGES");
    }
}

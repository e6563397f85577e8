//! Resource ids: generating them and telling malformed ones apart.

/// A fresh id such as `i-0a1b2c3d4e5f60718` (17 hex digits, like current EC2 ids).
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}-0{:016x}", rand::random::<u64>())
}

/// Whether `id` is `prefix-` followed by 8 or 17 lowercase hex digits.
pub(crate) fn well_formed(prefix: &str, id: &str) -> bool {
    id.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('-')).is_some_and(|hex| {
        matches!(hex.len(), 8 | 17) && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A 12-digit AWS account id.
pub(crate) fn is_account_id(text: &str) -> bool {
    text.len() == 12 && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_are_well_formed() {
        let id = new_id("i");
        assert!(well_formed("i", &id), "{id}");
        assert!(well_formed("i", "i-1234abcd"));
        assert!(!well_formed("i", "i-123"));
        assert!(!well_formed("i", "eni-1234abcd"));
        assert!(!well_formed("i", "i-1234ABCD"));
        assert!(is_account_id("111111111111"));
        assert!(!is_account_id("11111111111a"));
    }
}

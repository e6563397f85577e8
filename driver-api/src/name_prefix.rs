//! The longest common prefix of machine names: coalesced reads that select
//! their machines by a name filter factor it out (GCP's `name eq
//! "PREFIX(?:a|b)"`) or list by it (OpenStack's `name=^PREFIX`).

/// Byte length of the longest common prefix of `a` and `b` (a character
/// boundary of both).
pub fn common_prefix_len(a: &str, b: &str) -> usize {
    a.char_indices().zip(b.chars()).find(|((_, x), y)| x != y).map_or(a.len().min(b.len()), |((i, _), _)| i)
}

/// The longest prefix (whole characters) every one of `names` starts with;
/// empty for no names.
pub fn common_prefix<'a>(names: impl IntoIterator<Item = &'a str>) -> &'a str {
    let mut names = names.into_iter();
    let Some(first) = names.next() else { return "" };
    let len = names.fold(first.len(), |len, name| common_prefix_len(&first[..len], name));
    &first[..len]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_prefixes_are_whole_characters() {
        assert_eq!(
            common_prefix(["shoot--p--s-w-z1-a", "shoot--p--s-w-z1-b", "shoot--p--s-w-z2-c"]),
            "shoot--p--s-w-z"
        );
        assert_eq!(common_prefix(["abc", "abd", "ab"]), "ab");
        assert_eq!(common_prefix(["ab", "abc"]), "ab");
        assert_eq!(common_prefix(["x", "y"]), "");
        assert_eq!(common_prefix(["mä-1", "mä-2", "mö"]), "m");
        assert_eq!(common_prefix(["only"]), "only");
        assert_eq!(common_prefix([]), "");
        assert_eq!(common_prefix_len("mä", "mö"), 1);
    }
}

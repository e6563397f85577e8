//! Which cloud instances carried each soak machine's name, from samples of the fake's
//! inventory taken during the run and at its end: a machine created once has exactly one
//! instance id. Deleted instances stay in every fake's inventory for at least 10 minutes
//! (`live: false`), so sampling every second misses none.

use std::collections::{BTreeMap, BTreeSet};

use crate::fake_admin::Inventory;

/// Instance ids seen per machine name (names with the run's prefix only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    prefix: String,
    seen: BTreeMap<String, BTreeSet<String>>,
}

impl Ledger {
    /// A ledger of instances whose name starts with `prefix`.
    pub fn new(prefix: &str) -> Self {
        Self { prefix: prefix.to_string(), seen: BTreeMap::new() }
    }

    /// Adds every instance (live or not) of an inventory sample.
    pub fn observe(&mut self, inventory: &Inventory) {
        for i in inventory.instances.iter().filter(|i| i.name.starts_with(&self.prefix)) {
            self.seen.entry(i.name.clone()).or_default().insert(i.id.clone());
        }
    }

    /// Machines with more than one instance: `name (id, id, ...)`.
    pub fn duplicates(&self) -> Vec<String> {
        self.seen
            .iter()
            .filter(|(_, ids)| ids.len() > 1)
            .map(|(name, ids)| format!("{name} ({})", ids.iter().cloned().collect::<Vec<_>>().join(", ")))
            .collect()
    }

    /// Instances made for machines, in all.
    pub fn instances(&self) -> usize {
        self.seen.values().map(BTreeSet::len).sum()
    }

    /// Of `names`, those no instance was ever seen for.
    pub fn never_seen<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        names.into_iter().filter(|n| !self.seen.contains_key(*n)).map(str::to_string).collect()
    }

    /// Names seen that are not among `names` (instances of no soak machine).
    pub fn strangers(&self, names: &BTreeSet<String>) -> Vec<String> {
        self.seen.keys().filter(|n| !names.contains(*n)).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::fake_admin::Instance;

    use super::*;

    fn inventory(items: &[(&str, &str, bool)]) -> Inventory {
        Inventory {
            instances: items
                .iter()
                .map(|(id, name, live)| Instance {
                    id: id.to_string(),
                    name: name.to_string(),
                    state: String::new(),
                    live: *live,
                    tags: Default::default(),
                    extra: Default::default(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn counts_ids_per_name_across_samples() {
        let mut l = Ledger::new("conf-soak-r1-");
        l.observe(&inventory(&[("i-1", "conf-soak-r1-0000", true), ("i-9", "other", true)]));
        l.observe(&inventory(&[("i-1", "conf-soak-r1-0000", false), ("i-2", "conf-soak-r1-0001", true)]));
        assert!(l.duplicates().is_empty());
        l.observe(&inventory(&[("i-3", "conf-soak-r1-0001", true)]));
        assert_eq!(l.duplicates(), vec!["conf-soak-r1-0001 (i-2, i-3)".to_string()]);
        assert_eq!(l.instances(), 3);
        assert_eq!(l.never_seen(["conf-soak-r1-0000", "conf-soak-r1-0002"]), vec!["conf-soak-r1-0002".to_string()]);
        let names: BTreeSet<String> = ["conf-soak-r1-0000".to_string()].into();
        assert_eq!(l.strangers(&names), vec!["conf-soak-r1-0001".to_string()]);
    }
}

//! The resource tracker: every machine a scenario may have created, deleted at its end.

use std::sync::{Arc, Mutex, PoisonError};

use machine_driver_proto::v1::Machine;

/// Machines a scenario created or tried to create. Shared by the scenario and the runner,
/// which deletes them after the scenario whatever its outcome.
#[derive(Debug, Clone, Default)]
pub struct Tracker(Arc<Mutex<Vec<Machine>>>);

impl Tracker {
    /// Records a machine before its first CreateMachine (a lost response still leaves a VM).
    pub fn record(&self, machine: &Machine) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(machine.clone());
    }

    /// Remembers the provider id the driver returned for the machine with `uid` and `name`.
    pub fn set_provider_id(&self, name: &str, uid: &str, provider_id: &str) {
        let mut machines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for m in machines.iter_mut().filter(|m| m.name == name && m.uid == uid) {
            m.provider_id = provider_id.to_string();
        }
    }

    /// The recorded machines, each once (by name and uid).
    pub fn machines(&self) -> Vec<Machine> {
        let machines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<Machine> = Vec::new();
        for m in machines.iter() {
            match out.iter_mut().find(|o| o.name == m.name && o.uid == m.uid) {
                Some(o) if o.provider_id.is_empty() => o.provider_id = m.provider_id.clone(),
                Some(_) => {}
                None => out.push(m.clone()),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(name: &str, uid: &str) -> Machine {
        Machine { name: name.into(), uid: uid.into(), ..Default::default() }
    }

    #[test]
    fn records_once_and_keeps_provider_ids() {
        let t = Tracker::default();
        t.record(&machine("a", "1"));
        t.clone().record(&machine("a", "1"));
        t.record(&machine("b", "2"));
        t.set_provider_id("a", "1", "fake:///a");
        let ms = t.machines();
        assert_eq!(ms.len(), 2);
        assert_eq!(ms[0].provider_id, "fake:///a");
        assert_eq!(ms[1].provider_id, "");
    }
}

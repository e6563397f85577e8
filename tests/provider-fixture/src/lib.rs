//! The one test fixture every provider's tests share (dev-only).
//!
//! A [`Fixture`] is a fake cloud started by the provider's own start function,
//! the example machine class and secret read from the provider's `examples/`
//! directory, the fake's typed [`AdminClient`], and drivers built the way the
//! provider's binary builds them: [`Provider::connect`] with [`CloudOptions`]
//! pointing at the fake. Each provider's `tests/support/mod.rs` wraps it in its
//! own `FakeCloud` (a newtype that dereferences to the fixture) and adds only
//! what its cloud needs beyond this: raw cloud requests of the tests' own,
//! owner secrets, cloud-specific inventory filters.
//!
//! This crate depends on driver types (`machine-driver-api`) and on the fakes'
//! shared admin machinery (`fake-cloud-support`); the fakes themselves never
//! depend on it, so a fake still imports no driver code.

#![allow(clippy::unwrap_used)] // a fixture that cannot start fails the test, which is what a test wants

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

pub use fake_cloud_support::{AdminClient, CallCounts, FakeHandle, Inventory, InventoryInstance};
use machine_driver_api::{
    CallContext, CloudOptions, CreateMachine, ListMachines, Machine, MachineClass, MachineRef, Provider, SecretData,
};
use serde_json::Value;

/// The address a fixture's fake binds: loopback, a free port.
pub const FREE_PORT: &str = "127.0.0.1:0";

/// A provider's `examples/` directory: the machine class and secret its
/// README and conformance suite use.
#[derive(Debug, Clone)]
pub struct Examples {
    /// The directory the files were read from.
    pub dir: PathBuf,
    /// `machine-class.json` as a class named `class` of provider `provider`.
    pub class: MachineClass,
    /// `secret.json` (a flat JSON object of strings).
    pub secret: SecretData,
}

impl Examples {
    /// Reads `machine-class.json` and `secret.json` from `dir`; the class is
    /// named `class` and carries `provider` (the MCM provider name of the
    /// cloud). Panics when a file is missing or not JSON.
    pub fn load(provider: &str, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        let spec = read(&dir, "machine-class.json");
        serde_json::from_slice::<Value>(&spec)
            .unwrap_or_else(|e| panic!("{}/machine-class.json is not JSON: {e}", dir.display()));
        let secret: BTreeMap<String, String> = serde_json::from_slice(&read(&dir, "secret.json"))
            .unwrap_or_else(|e| panic!("{}/secret.json is not a JSON object of strings: {e}", dir.display()));
        let class =
            MachineClass { name: "class".into(), provider: provider.into(), provider_spec: spec, node_template: None };
        Self { dir, class, secret: secret.into_iter().collect() }
    }

    /// Another file of the directory as JSON (`conformance.json`, ...).
    pub fn json(&self, file: &str) -> Value {
        serde_json::from_slice(&read(&self.dir, file))
            .unwrap_or_else(|e| panic!("{}/{file} is not JSON: {e}", self.dir.display()))
    }
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{}/{file}: {e}", dir.display()))
}

/// A running fake with a provider's example class and secret, and drivers of
/// provider `P` on it. Stops the fake when dropped.
pub struct Fixture<P> {
    /// The running fake.
    pub fake: FakeHandle,
    /// The fake's admin API, through the shared typed client.
    pub admin: AdminClient,
    /// The example class (`examples/machine-class.json`).
    pub class: MachineClass,
    /// The example secret (`examples/secret.json`).
    pub secret: SecretData,
    /// The examples the class and secret came from.
    pub examples: Examples,
    provider: PhantomData<fn() -> P>,
}

impl<P: Provider> Fixture<P> {
    /// Starts a fake with `start` on a free loopback port and loads the
    /// examples of `provider` from `examples` (usually
    /// `concat!(env!("CARGO_MANIFEST_DIR"), "/examples")`). Panics when the
    /// fake does not start.
    pub async fn start<F, Fut>(provider: &str, examples: impl Into<PathBuf>, start: F) -> Self
    where
        F: FnOnce(SocketAddr) -> Fut,
        Fut: Future<Output = io::Result<FakeHandle>>,
    {
        let fake = start(FREE_PORT.parse().unwrap()).await.unwrap_or_else(|e| panic!("the fake did not start: {e}"));
        Self::on(fake, Examples::load(provider, examples))
    }

    /// A fixture on a fake already running, with `examples`.
    pub fn on(fake: FakeHandle, examples: Examples) -> Self {
        let admin = AdminClient::for_cloud_url(&fake.url()).unwrap_or_else(|e| panic!("admin client: {e}"));
        Self {
            fake,
            admin,
            class: examples.class.clone(),
            secret: examples.secret.clone(),
            examples,
            provider: PhantomData,
        }
    }

    /// The shared cloud flags of a driver on this fake: its URL as the
    /// endpoint, a client-side limit of `rate_limit`/s (0 = off) and `burst`.
    pub fn options(&self, rate_limit: f64, burst: u32) -> CloudOptions {
        CloudOptions { endpoint: Some(self.fake.url()), rate_limit, burst }
    }

    /// A driver on this fake built as the binary builds it: the options
    /// checked, then [`Provider::connect`]. Panics when connect refuses them.
    pub async fn connect(&self, rate_limit: f64, burst: u32) -> P {
        let options = self.options(rate_limit, burst).checked().unwrap_or_else(|e| panic!("cloud options: {e}"));
        P::connect(options).await.unwrap_or_else(|e| panic!("{}: connect: {e}", P::BINARY))
    }

    /// [`Fixture::connect`] without a client-side rate limit, for callers that
    /// are not async. `Provider::connect` builds no client and calls no cloud,
    /// so its future completes when first polled; panics if it does not.
    pub fn driver(&self) -> P {
        let mut connecting = pin!(self.connect(0.0, 0));
        match connecting.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(driver) => driver,
            Poll::Pending => panic!("{}: Provider::connect waited; use Fixture::connect", P::BINARY),
        }
    }
}

impl<P> Fixture<P> {
    /// `POST /_admin<path>`; fails the test unless it succeeds.
    pub async fn admin(&self, path: &str, body: Value) {
        self.admin.post(path, body).await.unwrap_or_else(|e| panic!("admin {path}: {e}"));
    }

    /// Cloud API calls since the last reset, by operation and class.
    pub async fn calls(&self) -> CallCounts {
        self.admin.calls().await.unwrap_or_else(|e| panic!("admin calls: {e}"))
    }

    /// Cloud API calls by operation since the last reset; resets the counters.
    pub async fn take_calls(&self) -> BTreeMap<String, u64> {
        let calls = self.calls().await;
        self.admin.reset_calls().await.unwrap_or_else(|e| panic!("admin reset calls: {e}"));
        calls.calls
    }

    /// The fake's inventory: instances, and dependents and images where the cloud has them.
    pub async fn inventory(&self) -> Inventory {
        self.admin.inventory().await.unwrap_or_else(|e| panic!("admin inventory: {e}"))
    }

    /// Every instance the fake holds, live or not.
    pub async fn instances(&self) -> Vec<InventoryInstance> {
        self.admin.instances().await.unwrap_or_else(|e| panic!("admin instances: {e}"))
    }

    /// Ids of the live instances named `name`.
    pub async fn live_named(&self, name: &str) -> Vec<String> {
        let live = self.admin.live_named(name).await.unwrap_or_else(|e| panic!("admin live {name}: {e}"));
        live.into_iter().map(|i| i.id).collect()
    }

    /// A machine named `name` with uid `uid-<name>`.
    pub fn machine(&self, name: &str) -> Machine {
        Machine { name: name.into(), uid: format!("uid-{name}"), ..Default::default() }
    }

    /// The request addressing machine `name` with the example class and secret.
    pub fn machine_ref(&self, name: &str) -> MachineRef {
        MachineRef { machine: self.machine(name), class: self.class.clone(), secret: self.secret.clone() }
    }

    /// CreateMachine of machine `name` with the example class and secret, without user data.
    pub fn create_request(&self, name: &str) -> CreateMachine {
        CreateMachine {
            machine: self.machine(name),
            class: self.class.clone(),
            secret: self.secret.clone(),
            user_data: Default::default(),
        }
    }

    /// ListMachines of the example class.
    pub fn list_request(&self) -> ListMachines {
        ListMachines { class: self.class.clone(), secret: self.secret.clone() }
    }

    /// The example class with its providerSpec changed by `patch`.
    pub fn class_with(&self, patch: impl FnOnce(&mut Value)) -> MachineClass {
        patched_class(&self.class, patch)
    }
}

/// `class` with its providerSpec (JSON) changed by `patch`. Panics when the spec is not JSON.
pub fn patched_class(class: &MachineClass, patch: impl FnOnce(&mut Value)) -> MachineClass {
    let mut spec: Value = serde_json::from_slice(&class.provider_spec).unwrap();
    patch(&mut spec);
    MachineClass { provider_spec: serde_json::to_vec(&spec).unwrap(), ..class.clone() }
}

/// Declares a provider's `FakeCloud`: a local newtype over [`Fixture`] of
/// the provider's driver that dereferences to it, so the provider's support
/// module and test files can add inherent methods of their cloud.
///
/// ```ignore
/// machine_driver_provider_fixture::fake_cloud! {
///     /// A running fake of the cloud with the example class and secret.
///     pub struct FakeCloud(CloudDriver);
/// }
/// ```
#[macro_export]
macro_rules! fake_cloud {
    ($(#[$meta:meta])* $vis:vis struct $name:ident($driver:ty);) => {
        $(#[$meta])*
        $vis struct $name(pub $crate::Fixture<$driver>);

        impl ::std::ops::Deref for $name {
            type Target = $crate::Fixture<$driver>;
            fn deref(&self) -> &Self::Target {
                &self.0
            }
        }

        impl ::std::ops::DerefMut for $name {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.0
            }
        }
    };
}

/// A context of `secs` seconds for `rpc`.
pub fn ctx(rpc: &'static str, secs: u64) -> CallContext {
    CallContext::with_timeout(rpc, Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_are_read_from_the_directory_and_patched_as_json() {
        let dir = std::env::temp_dir().join(format!("provider-fixture-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("machine-class.json"), br#"{"zone":"a","tags":{"k":"v"}}"#).unwrap();
        std::fs::write(dir.join("secret.json"), br#"{"userData":"x","token":"t"}"#).unwrap();
        std::fs::write(dir.join("conformance.json"), br#"{"classes":[]}"#).unwrap();
        let examples = Examples::load("Cloud", &dir);
        assert_eq!((examples.class.name.as_str(), examples.class.provider.as_str()), ("class", "Cloud"));
        assert_eq!(examples.secret.get("token"), Some(&b"t"[..]));
        assert_eq!(examples.json("conformance.json")["classes"], serde_json::json!([]));
        let patched = patched_class(&examples.class, |spec| spec["zone"] = "b".into());
        let spec: Value = serde_json::from_slice(&patched.provider_spec).unwrap();
        assert_eq!((spec["zone"].as_str(), spec["tags"]["k"].as_str()), (Some("b"), Some("v")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! The span a coalesced batch runs in. Its own test binary: tracing caches
//! per-callsite interest process-wide, so a test that installs a subscriber
//! races with tests on other threads that hit the same callsites without one.

use std::sync::{Arc, Mutex};

use machine_driver_api::{BatchFn, Coalescer};
use tracing::{Instrument, Span};
use tracing_subscriber::registry::{LookupSpan, Registry};

#[tokio::test]
async fn batches_run_in_a_span_under_the_callers_span() {
    let _guard = tracing::subscriber::set_default(Registry::default());
    let seen = Arc::new(Mutex::new(Vec::<(String, Option<String>)>::new()));
    let s = seen.clone();
    let fetch: BatchFn<u32, u32> = Arc::new(move |keys: Vec<u32>, _ctx| {
        let current = Span::current();
        let names = tracing::dispatcher::get_default(|d| {
            let registry = d.downcast_ref::<Registry>()?;
            let span = registry.span(&current.id()?)?;
            Some((span.name().to_string(), span.parent().map(|p| p.name().to_string())))
        });
        s.lock().unwrap().extend(names);
        Box::pin(async move { Ok(keys.into_iter().map(|k| (k, k)).collect()) })
    });
    let c = Coalescer::new("test read", fetch, 10, 1);
    assert_eq!(c.get(1).instrument(tracing::info_span!("rpc")).await.unwrap(), Some(1));
    assert_eq!(*seen.lock().unwrap(), vec![("coalesced_read".to_string(), Some("rpc".to_string()))]);
}

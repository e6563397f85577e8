//! A canary secret sent in a request never appears in captured logs or in
//! error messages. Runs in its own test binary: it installs the global subscriber.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use machine_driver_proto::v1 as pb;
use support::*;

const CANARY: &str = "CANARY-7f3e9a-DO-NOT-LOG";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn canary_secret_never_logged_nor_returned() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt().with_max_level(tracing::Level::TRACE).with_writer(move || writer.clone()).json().init();

    let mut srv = start("redact", |_| {}).await;
    let mut c = client(&srv.socket).await;
    let secret = |extra: &str| {
        Some(pb::SecretData {
            data: [
                ("accessKeyID".to_string(), format!("{CANARY}-akid").into_bytes()),
                ("secretAccessKey".to_string(), format!("{CANARY}-sk").into_bytes()),
                ("userData".to_string(), format!("#cloud-config\n# {CANARY} {extra}").into_bytes()),
            ]
            .into_iter()
            .collect(),
        })
    };
    let mut errors = Vec::new();
    for name in ["ok", "err-internal", "err-invalid", "err-throttle"] {
        let mut req = create(name);
        req.secret = secret(name);
        if let Err(e) = c.create_machine(req).await {
            errors.push(format!("{e:?}"));
        }
    }
    // A user-data size failure must not echo the content either.
    let mut req = create("big");
    req.secret = secret(&"x".repeat(2000));
    errors.push(format!("{:?}", c.create_machine(req).await.expect_err("too big")));
    srv.stop();
    let _ = (&mut srv.done).await;

    let logs = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf8");
    assert!(logs.contains("rpc failed"), "logs were captured: {logs}");
    assert!(!logs.contains(CANARY), "canary leaked into logs:\n{logs}");
    assert_eq!(errors.len(), 4);
    for e in errors {
        assert!(!e.contains(CANARY), "canary leaked into an error: {e}");
    }
}

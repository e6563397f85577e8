//! Restarting the driver under test from a scenario: only possible when the suite spawned
//! the driver itself on a fake cloud running on its own (`--spawn` with `--spawn-fake`),
//! because an embedded fake would lose its inventory with the driver.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::connection::Connection;
use crate::spawn::{SpawnedDriver, StopMode};

/// Why a scenario that restarts the driver is skipped when no [`Restarter`] is available.
pub const NO_RESTART: &str = "needs a driver the suite can restart: --spawn with --spawn-fake \
     (with --endpoint the suite does not own the driver; an embedded fake dies with it)";

/// A spawned driver shared by the suite's owner (which stops it at the end) and the
/// scenarios (which restart it). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Restarter {
    driver: Arc<Mutex<SpawnedDriver>>,
    current: Arc<Mutex<Connection>>,
    grace: Duration,
    startup: Duration,
}

impl Restarter {
    /// A restarter of `driver`, whose current connection is `conn`; `None` when the driver's
    /// cloud would not survive a restart (embedded fake).
    pub async fn new(
        driver: Arc<Mutex<SpawnedDriver>>,
        conn: Connection,
        grace: Duration,
        startup: Duration,
    ) -> Option<Self> {
        if !driver.lock().await.backend().survives_driver_restart() {
            return None;
        }
        Some(Self { driver, current: Arc::new(Mutex::new(conn)), grace, startup })
    }

    /// Stops the driver (`how`), starts it again with the same arguments and socket, waits
    /// for a ready Probe and returns a new connection (also kept as [`Self::connection`]).
    pub async fn restart(&self, how: StopMode) -> Result<Connection, String> {
        let mut driver = self.driver.lock().await;
        driver.restart(how, self.grace, self.startup).await.map_err(|f| {
            format!(
                "restarting the driver after {}: {}\n--- driver log (tail) ---\n{}",
                how.signal(),
                f.reason,
                f.log_tail
            )
        })?;
        let conn = Connection::connect(&driver.endpoint()).await?;
        *self.current.lock().await = conn.clone();
        Ok(conn)
    }

    /// The connection to the driver's latest run.
    pub async fn connection(&self) -> Connection {
        self.current.lock().await.clone()
    }
}

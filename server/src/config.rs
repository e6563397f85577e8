//! The server's command-line flags (each with an environment fallback), parsed
//! and checked before any socket is bound.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

/// Flags every driver binary shares. Flatten into the binary's own `Parser`.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// gRPC endpoint: `unix:///abs/path.sock` (or a bare absolute path), or
    /// `tcp://127.0.0.1:PORT` for debugging only.
    #[arg(long, env = "MACHINE_DRIVER_ENDPOINT", default_value = "unix:///run/machine-driver/driver.sock")]
    pub endpoint: String,

    /// File mode of the Unix socket, octal. Access control is by file permissions.
    #[arg(long, env = "MACHINE_DRIVER_SOCKET_MODE", default_value = "0660", value_parser = parse_mode)]
    pub socket_mode: u32,

    /// Optional HTTP listener for Prometheus `/metrics` and `/healthz`, e.g. `127.0.0.1:9100`.
    #[arg(long, env = "MACHINE_DRIVER_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Log format.
    #[arg(long, env = "MACHINE_DRIVER_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter in `RUST_LOG` syntax.
    #[arg(long, env = "MACHINE_DRIVER_LOG", default_value = "info")]
    pub log: String,

    /// OTLP/gRPC endpoint for traces (e.g. `http://127.0.0.1:4317`); no export when unset.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,

    /// Which spans go to the OTLP endpoint, in `RUST_LOG` syntax; separate from
    /// `--log` so that traces carry every cloud call (debug-level `cloud_call`
    /// and `coalesced_read` spans) while the logs stay at `info`.
    #[arg(long, env = "MACHINE_DRIVER_TRACE_FILTER", default_value = "info,machine_driver_api=debug")]
    pub trace_filter: String,

    /// Deadline applied to a call whose caller sends no `grpc-timeout` (the machine-controller sends none).
    #[arg(long, env = "MACHINE_DRIVER_DEFAULT_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub default_timeout: Duration,

    /// Most RPCs served at once; further calls wait for a slot. A call takes
    /// its slot only once its request has arrived in full; health checks and
    /// the Identity service take none (they answer while every slot is taken).
    #[arg(long, env = "MACHINE_DRIVER_MAX_CONCURRENT_CALLS", default_value_t = 1024)]
    pub max_concurrent_calls: usize,

    /// How long a request may take to arrive in full once its headers have:
    /// a stream whose request is not complete by then is answered
    /// DEADLINE_EXCEEDED and reset. Until it is complete it holds no call slot.
    #[arg(long, env = "MACHINE_DRIVER_REQUEST_BODY_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub request_body_timeout: Duration,

    /// Most request bytes held at once by calls that are arriving, waiting for
    /// a slot or running (`256MiB`, `1GiB`, or bytes); a request waits for room
    /// before it is read further. At least one largest request (4 MiB).
    #[arg(long, env = "MACHINE_DRIVER_MAX_BUFFERED_REQUEST_BYTES", default_value = "256MiB", value_parser = parse_size)]
    pub max_buffered_request_bytes: usize,

    /// Most client connections open at once; a connection beyond it is closed
    /// as soon as it is accepted (and counted in `machine_driver_connections_refused_total`).
    #[arg(long, env = "MACHINE_DRIVER_MAX_CONNECTIONS", default_value_t = 64)]
    pub max_connections: usize,

    // 400, well below --max-concurrent-calls so that no one connection takes
    // every call slot, and twice the 200 ids the AWS and GCP drivers read per
    // cloud call: 10,000 concurrent polls on one connection arrive in waves of
    // this size, 2 cloud calls each. With 512 (the earlier value) a wave took
    // 3 (52-59 calls in all) and 256 took 81 calls (two calls per 256), where
    // the bench's target is 60; 1,024 took the driver's peak RSS to 72.6 MiB.
    /// Most HTTP/2 streams (calls) one connection may have open at once; a
    /// client beyond it queues its calls on its side.
    #[arg(long, env = "MACHINE_DRIVER_MAX_STREAMS_PER_CONNECTION", default_value_t = 400)]
    pub max_streams_per_connection: u32,

    /// Interval of the HTTP/2 keepalive PINGs the server sends on a
    /// connection that has sent nothing for that long (`0` turns them off).
    #[arg(long, env = "MACHINE_DRIVER_HTTP2_KEEPALIVE_INTERVAL", default_value = "30s", value_parser = parse_duration)]
    pub http2_keepalive_interval: Duration,

    /// How long the client has to answer a keepalive PING before its connection is closed.
    #[arg(long, env = "MACHINE_DRIVER_HTTP2_KEEPALIVE_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub http2_keepalive_timeout: Duration,

    /// How long in-flight calls may take to finish after SIGTERM/SIGINT.
    #[arg(long, env = "MACHINE_DRIVER_SHUTDOWN_GRACE", default_value = "20s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// Images that ShareImage may share, comma-separated exact references; empty refuses all.
    #[arg(long, env = "MACHINE_DRIVER_SHARE_IMAGE_ALLOW_LIST", value_delimiter = ',')]
    pub share_image_allow_list: Vec<String>,

    /// Operator-wide registry mirror/CA configuration file (YAML or JSON, see bootstrap/README.md),
    /// used for machine classes that carry none; checked at start.
    #[arg(long, env = "MACHINE_DRIVER_REGISTRY_CONFIG")]
    pub registry_config: Option<PathBuf>,

    /// Refuse machine classes whose providerSpec has keys this driver does not
    /// know (INVALID_ARGUMENT naming the key). Off by default: like the Go
    /// providers, unknown keys are ignored, logged once per class and counted
    /// (`machine_driver_provider_spec_unknown_fields_total`), so that a newer
    /// Gardener extension does not break machines.
    #[arg(long, env = "MACHINE_DRIVER_STRICT_PROVIDER_SPEC")]
    pub strict_provider_spec: bool,

    /// Cloud access settings handed to the provider.
    #[command(flatten)]
    pub cloud: CloudArgs,
}

/// Cloud access flags shared by every provider binary.
#[derive(Debug, Clone, Args)]
pub struct CloudArgs {
    /// Cloud API endpoint override (private endpoints, fakes). AWS also honours `AWS_ENDPOINT_URL`.
    #[arg(long, env = "MACHINE_DRIVER_CLOUD_ENDPOINT")]
    pub cloud_endpoint: Option<String>,

    /// Client-side limit of cloud API requests per second, per account/project and region (0 = off).
    #[arg(long, env = "MACHINE_DRIVER_CLOUD_RATE_LIMIT", default_value_t = 20.0)]
    pub cloud_rate_limit: f64,

    /// Burst allowed above the client-side rate.
    #[arg(long, env = "MACHINE_DRIVER_CLOUD_BURST", default_value_t = 40)]
    pub cloud_burst: u32,

    /// Start the embedded fake cloud in-process and use it (demos and tests; needs the
    /// `embedded-fake` cargo feature). Logs loudly that no real cloud is used.
    #[arg(long, env = "MACHINE_DRIVER_EMBEDDED_FAKE")]
    pub embedded_fake: bool,

    /// Listen address of the embedded fake cloud (its admin API is under `/_admin`).
    #[arg(long, env = "MACHINE_DRIVER_EMBEDDED_FAKE_LISTEN", default_value = "127.0.0.1:0")]
    pub embedded_fake_listen: SocketAddr,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where the gRPC server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Unix socket at this path.
    Unix(PathBuf),
    /// A TCP address (debugging).
    Tcp(SocketAddr),
}

impl Endpoint {
    /// Parses `unix:///path`, a bare absolute path, or `tcp://host:port`.
    pub fn parse(s: &str) -> Result<Self, String> {
        if let Some(path) = s.strip_prefix("unix://") {
            return Self::unix(path, s);
        }
        if let Some(addr) = s.strip_prefix("tcp://") {
            return addr.parse().map(Endpoint::Tcp).map_err(|_| format!("endpoint {s:?}: expected tcp://IP:PORT"));
        }
        if s.starts_with('/') {
            return Self::unix(s, s);
        }
        Err(format!("endpoint {s:?}: expected unix:///absolute/path.sock or tcp://IP:PORT"))
    }

    fn unix(path: &str, original: &str) -> Result<Self, String> {
        if !path.starts_with('/') {
            return Err(format!("endpoint {original:?}: the socket path must be absolute (unix:///path)"));
        }
        if path.ends_with('/') {
            return Err(format!("endpoint {original:?}: names a directory, not a socket file"));
        }
        Ok(Endpoint::Unix(PathBuf::from(path)))
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "unix://{}", p.display()),
            Endpoint::Tcp(a) => write!(f, "tcp://{a}"),
        }
    }
}

fn parse_mode(s: &str) -> Result<u32, String> {
    let mode = u32::from_str_radix(s.trim_start_matches("0o"), 8).map_err(|_| format!("{s:?} is not an octal mode"))?;
    if mode > 0o777 {
        return Err(format!("{s:?}: mode must be at most 0777"));
    }
    Ok(mode)
}

/// Parses `500ms`, `30s`, `5m`, `1h` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("{s:?}: expected a duration like 30s"))?;
    Ok(match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    })
}

/// Parses a size: bytes, or a number with `KiB`, `MiB` or `GiB`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: usize = num.parse().map_err(|_| format!("{s:?}: expected a size like 256MiB"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(format!("{s:?}: unknown unit {other:?} (use KiB, MiB or GiB)")),
    };
    n.checked_mul(scale).ok_or_else(|| format!("{s:?}: too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(Endpoint::parse("unix:///tmp/a.sock"), Ok(Endpoint::Unix("/tmp/a.sock".into())));
        assert_eq!(Endpoint::parse("/tmp/a.sock"), Ok(Endpoint::Unix("/tmp/a.sock".into())));
        assert_eq!(Endpoint::parse("tcp://127.0.0.1:9000"), Ok(Endpoint::Tcp("127.0.0.1:9000".parse().unwrap())));
        assert!(Endpoint::parse("unix://relative.sock").is_err());
        assert!(Endpoint::parse("unix:///tmp/").is_err());
        assert!(Endpoint::parse("http://x").is_err());
    }

    #[test]
    fn modes_and_durations() {
        assert_eq!(parse_mode("0660"), Ok(0o660));
        assert!(parse_mode("0999").is_err());
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("2 weeks").is_err());
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1 GiB"), Ok(1 << 30));
        assert!(parse_size("1MB").is_err());
        assert!(parse_size("99999999999999999999GiB").is_err());
    }
}

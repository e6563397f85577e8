//! Small helpers shared by the child processes the suite starts (driver, fake cloud):
//! free ports, signals, log tails, HTTP readiness polls.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound, then released for the child).
pub(crate) fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Sends SIGTERM to `pid` through kill(1): the crate forbids unsafe code, so no libc::kill.
pub(crate) fn send_sigterm(pid: u32) -> Result<(), String> {
    let sent = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
    if sent.is_ok_and(|s| s.success()) { Ok(()) } else { Err(format!("could not send SIGTERM to pid {pid}")) }
}

/// The last `lines` lines of a log file (empty when it cannot be read).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    last_lines(&text, lines)
}

/// The last `lines` lines of `text`.
pub(crate) fn last_lines(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Polls `GET url` until it answers a 2xx status, for at most `within`.
pub(crate) async fn wait_http_ok(url: &str, within: Duration) -> Result<(), String> {
    let http =
        reqwest::Client::builder().timeout(Duration::from_secs(2)).build().map_err(|e| format!("HTTP client: {e}"))?;
    let started = Instant::now();
    let mut last = String::from("not tried");
    while started.elapsed() < within {
        match http.get(url).send().await {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => last = format!("HTTP {}", r.status()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("{url} did not answer within {within:?}: {last}"))
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    #[test]
    fn last_lines_keeps_the_end() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(last_lines("a\nb", 5), "a\nb");
        assert_eq!(last_lines("", 3), "");
    }

    #[test]
    fn free_ports_are_bindable() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        TcpListener::bind(("127.0.0.1", port)).unwrap();
    }

    /// Serves one HTTP request per connection with `status`, forever.
    async fn serve(status: &'static str) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = [0u8; 1024];
                let _ = sock.read(&mut buf).await;
                let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}");
                let _ = sock.write_all(answer.as_bytes()).await;
            }
        });
        port
    }

    #[tokio::test]
    async fn http_poll_succeeds_on_2xx() {
        let port = serve("200 OK").await;
        wait_http_ok(&format!("http://127.0.0.1:{port}/_admin/calls"), Duration::from_secs(5)).await.unwrap();
    }

    #[tokio::test]
    async fn http_poll_gives_up_on_errors_and_silence() {
        let port = serve("503 Service Unavailable").await;
        let err = wait_http_ok(&format!("http://127.0.0.1:{port}/x"), Duration::from_millis(400)).await.unwrap_err();
        assert!(err.contains("503"), "{err}");
        let closed = free_port().unwrap();
        assert!(wait_http_ok(&format!("http://127.0.0.1:{closed}/x"), Duration::from_millis(300)).await.is_err());
    }
}

//! `ezmq dashboard` with no URL: one command serves a dashboard filled
//! with demo data on an embedded server (what the README's command shows).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use ezmq_test_support::KillOnDrop;

/// `GET path` over HTTP/1.0: the status line and the body.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to the dashboard");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let status = response.lines().next().unwrap_or_default().to_owned();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn the_demo_dashboard_shows_its_topics() {
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_ezmq"))
            .args(["dashboard", "--listen", "127.0.0.1:0"])
            .env_remove("EZMQ_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start ezmq dashboard"),
    );
    let stdout = child.0.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("its first line");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("an address in {line:?}"))
        .to_owned();
    assert!(line.contains("demo data on an embedded server"), "{line}");
    let mut body = String::new();
    let shown = (0..50).any(|_| {
        let (status, page) = get(&addr, "/");
        body = page;
        if status.contains("200")
            && body.contains(r#"<a href="/topics/orders">orders</a></td><td>5</td>"#)
            && body.contains(r#"<a href="/topics/payments">payments</a>"#)
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
        false
    });
    assert!(
        shown,
        "orders (5 waiting) and payments on the overview:\n{body}"
    );
    let (status, page) = get(&addr, "/topics/payments");
    assert!(status.contains("200"), "{status}");
    assert!(
        page.contains("card declined"),
        "the demo's dead letters:\n{page}"
    );
}

//! Headless Chromium for the console tests: Debian's `chromium` driven over WebDriver by its
//! `chromedriver` (fantoccini). Both are installed by `scripts/setup.sh`; a missing one fails
//! the test loudly, naming the package.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// Where the screenshots go: `target/console-screenshots/` of the workspace.
pub(crate) fn screenshot_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/console-screenshots"
    ))
}

/// A chromedriver process and a headless Chromium session on it.
pub(crate) struct Browser {
    pub client: Client,
    driver: Child,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn require(bin: &str, package: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(bin))
                .find(|f| f.exists())
        })
        .unwrap_or_else(|| {
            panic!(
                "`{bin}` not found: the console tests need headless Chromium \
                 (`apt-get install {package}`; scripts/setup.sh installs it)"
            )
        })
}

impl Browser {
    /// Starts chromedriver and a headless Chromium window of 1280 × 900 CSS px.
    pub(crate) async fn start() -> Self {
        Self::start_with(serde_json::json!({})).await
    }

    /// Starts chromedriver and a headless Chromium whose viewport is `width` CSS px wide (a
    /// phone: Chromium's device emulation, since a desktop window cannot be that narrow).
    pub(crate) async fn start_narrow(width: u32) -> Self {
        Self::start_with(serde_json::json!({
            "mobileEmulation": { "deviceMetrics": { "width": width, "height": 800, "pixelRatio": 1 } }
        }))
        .await
    }

    async fn start_with(extra: serde_json::Value) -> Self {
        let chromium = require("chromium", "chromium");
        let driver_bin = require("chromedriver", "chromium-driver");
        let port = free_port();
        let driver = Command::new(driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let mut options = serde_json::json!({
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,900"]
        });
        if let (Some(o), Some(e)) = (options.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        let caps: serde_json::Map<String, serde_json::Value> = serde_json::from_value(
            serde_json::json!({ "browserName": "chrome", "goog:chromeOptions": options }),
        )
        .expect("capabilities");
        let url = format!("http://127.0.0.1:{port}");
        let mut last = None;
        for _ in 0..100 {
            let builder =
                ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                    .capabilities(caps.clone())
                    .connect(&url)
                    .await;
            match builder {
                Ok(client) => return Self { client, driver },
                Err(e) => last = Some(e.to_string()),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no WebDriver session on chromedriver at {url}: {last:?}");
    }

    /// Opens `http://{addr}{path}`.
    pub(crate) async fn open(&self, addr: SocketAddr, path: &str) {
        self.client
            .goto(&format!("http://{addr}{path}"))
            .await
            .unwrap_or_else(|e| panic!("opening {path}: {e}"));
    }

    /// The `attr` attribute of the first element matching `css`, if any.
    pub(crate) async fn attr(&self, css: &str, attr: &str) -> Option<String> {
        self.read(
            "const e = document.querySelector(arguments[0]); \
             return e ? e.getAttribute(arguments[1]) : null",
            css,
            attr,
        )
        .await
    }

    /// The `attr` attribute of every element matching `css` (that has it), in document order.
    pub(crate) async fn attrs(&self, css: &str, attr: &str) -> Vec<String> {
        self.read(
            "return Array.from(document.querySelectorAll(arguments[0])) \
               .map(e => e.getAttribute(arguments[1])).filter(v => v !== null)",
            css,
            attr,
        )
        .await
        .unwrap_or_default()
    }

    /// Runs `script` with `css` and `attr` as its arguments: one script reads one snapshot of
    /// the document. (Element handles read one by one go stale when a page replaces the part
    /// they are in, as the console's job page does on every refresh, and a list read that way
    /// silently loses its last items.)
    async fn read<T: serde::de::DeserializeOwned>(
        &self,
        script: &str,
        css: &str,
        attr: &str,
    ) -> Option<T> {
        let v = self
            .client
            .execute(script, vec![css.into(), attr.into()])
            .await
            .unwrap_or_else(|e| panic!("reading {attr} of {css}: {e}"));
        serde_json::from_value(v).ok()
    }

    /// The page's text (`document.body.innerText`).
    pub(crate) async fn text(&self) -> String {
        self.js("return document.body.innerText")
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Runs `script` in the page and returns its value.
    pub(crate) async fn js(&self, script: &str) -> serde_json::Value {
        self.client
            .execute(script, Vec::new())
            .await
            .unwrap_or_else(|e| panic!("script {script:?}: {e}"))
    }

    /// Writes a PNG of the viewport's page to [`screenshot_dir`]`/{name}.png`.
    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        // The whole page, not just the viewport: the window as tall as the body's content
        // (not the document's scroll height, which is at least the current window's).
        let w = self
            .js("return window.outerWidth")
            .await
            .as_u64()
            .unwrap_or(1280);
        let h = self
            .js(
                "return Math.ceil(document.body.getBoundingClientRect().height) + 16 \
                 + window.outerHeight - window.innerHeight",
            )
            .await
            .as_u64()
            .unwrap_or(900)
            .clamp(300, 6000);
        let _ = self
            .client
            .set_window_size(
                u32::try_from(w).unwrap_or(1280),
                u32::try_from(h).unwrap_or(900),
            )
            .await;
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("screenshot written");
        path
    }

    /// Ends the session and chromedriver.
    pub(crate) async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill().await;
    }
}

/// `GET http://{addr}{path}` over HTTP/1.0: (status, lower-cased header block, body).
pub(crate) async fn get_with_headers(addr: SocketAddr, path: &str) -> (u16, String, Vec<u8>) {
    exchange(
        addr,
        &format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n"),
    )
    .await
}

/// `GET http://{addr}{path}` over HTTP/1.0: (status, body).
pub(crate) async fn get(addr: SocketAddr, path: &str) -> (u16, Vec<u8>) {
    let (status, _, body) = get_with_headers(addr, path).await;
    (status, body)
}

/// A raw HTTP/1.0 request: (status, body).
pub(crate) async fn request(addr: SocketAddr, raw: &str) -> (u16, Vec<u8>) {
    let (status, _, body) = exchange(addr, raw).await;
    (status, body)
}

/// Sends `raw`, reads the answer to the end: (status, lower-cased header block, body).
async fn exchange(addr: SocketAddr, raw: &str) -> (u16, String, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(raw.as_bytes()).await.expect("request");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.expect("response");
    let split = (buf.windows(4))
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&buf[..split]).to_ascii_lowercase();
    let status = (head.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (status, head, buf[split + 4..].to_vec())
}

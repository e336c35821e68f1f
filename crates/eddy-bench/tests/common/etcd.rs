//! A real etcd (Debian's `etcd-server`, installed by `scripts/install-deps.sh`) for the
//! high-availability tests: one member on free loopback ports, its data in a temporary
//! directory, killed when dropped.
#![allow(dead_code)]

use super::process::signal;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Etcd {
    child: Child,
    dir: PathBuf,
    /// `etcd://127.0.0.1:PORT`, with a cluster id of the test's own.
    pub url: String,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Etcd {
    pub fn start(name: &str) -> Etcd {
        let dir = std::env::temp_dir().join(format!("eddy-etcd-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (client, peer) = (free_port(), free_port());
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = Command::new("etcd")
            .args(["--name", "eddy-test", "--data-dir"])
            .arg(&dir)
            .args(["--listen-client-urls", &client_url, "--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url, "--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("eddy-test={peer_url}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd runs (Debian's etcd-server: bash scripts/install-deps.sh installs it)");
        let etcd = Etcd { child, dir, url: format!("etcd://127.0.0.1:{client}/{name}") };
        let deadline = Instant::now() + Duration::from_secs(30);
        let services = eddy_rpc::ha::HaServices::parse(&etcd.url).unwrap();
        while services.leader().is_err() {
            assert!(Instant::now() < deadline, "etcd did not answer within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        etcd
    }
}

impl Etcd {
    /// Freezes etcd (SIGSTOP): it answers nothing, and its connections stay open.
    pub fn freeze(&self) {
        signal(self.child.id(), "-STOP");
    }

    /// Lets a frozen etcd go on (SIGCONT).
    pub fn thaw(&self) {
        signal(self.child.id(), "-CONT");
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

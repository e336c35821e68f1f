//! A TCP forwarder in front of a broker: a test cuts it to make the brokers unreachable
//! and restores it, and the broker advertises the proxy's address, so that every
//! connection a client makes after the bootstrap also goes through it.

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Forwards loopback connections from its port to a target port. `cut` closes every
/// connection and refuses new ones (the brokers "went away"); `restore` accepts again.
pub struct Proxy {
    pub port: u16,
    up: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(port: u16, target: u16) -> Result<Self, String> {
        let listener =
            TcpListener::bind(("127.0.0.1", port)).map_err(|e| format!("proxy cannot bind 127.0.0.1:{port}: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let up = Arc::new(AtomicBool::new(true));
        let stop = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let (up2, stop2, conns2) = (up.clone(), stop.clone(), connections.clone());
        std::thread::spawn(move || {
            let target: SocketAddr = ([127, 0, 0, 1], target).into();
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        if !up2.load(Ordering::Relaxed) {
                            let _ = client.shutdown(Shutdown::Both);
                            continue;
                        }
                        let _ = client.set_nonblocking(false);
                        let Ok(server) = TcpStream::connect(target) else {
                            continue;
                        };
                        let pipes =
                            [(client.try_clone(), server.try_clone()), (server.try_clone(), client.try_clone())];
                        conns2.lock().unwrap().extend([client, server]);
                        for pipe in pipes {
                            if let (Ok(mut from), Ok(mut to)) = pipe {
                                std::thread::spawn(move || {
                                    let _ = std::io::copy(&mut from, &mut to);
                                    let _ = to.shutdown(Shutdown::Both);
                                });
                            }
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(Self { port, up, connections, stop })
    }

    /// Closes every connection and refuses new ones.
    pub fn cut(&self) {
        self.up.store(false, Ordering::Relaxed);
        for connection in self.connections.lock().unwrap().drain(..) {
            let _ = connection.shutdown(Shutdown::Both);
        }
    }

    /// Accepts connections again.
    pub fn restore(&self) {
        self.up.store(true, Ordering::Relaxed);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.cut();
    }
}

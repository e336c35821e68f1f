//! A TCP forwarder a test partitions, as a network that drops packets: while partitioned it
//! passes nothing either way and closes nothing (the processes on both sides run on, and
//! only their heartbeats can tell); healed, it forwards again, what it held first.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct Partitionable {
    pub address: String,
    partitioned: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

/// Waits while `partitioned` is set, unless `stop` is.
fn hold(partitioned: &AtomicBool, stop: &AtomicBool) {
    while partitioned.load(Ordering::SeqCst) && !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Copies `from` to `to` a chunk at a time, each chunk held while partitioned.
fn forward(mut from: TcpStream, mut to: TcpStream, partitioned: Arc<AtomicBool>, stop: Arc<AtomicBool>) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = from.read(&mut buffer);
        hold(&partitioned, &stop);
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

impl Partitionable {
    /// Forwards connections from a free loopback port to `target` (`HOST:PORT`).
    pub fn start(target: &str) -> Partitionable {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let partitioned = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (target, held, stopped) = (target.to_string(), partitioned.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let (target, held, stopped) = (target.clone(), held.clone(), stopped.clone());
                std::thread::spawn(move || {
                    // A connection made while partitioned reaches nothing until healed.
                    hold(&held, &stopped);
                    let Ok(server) = TcpStream::connect(&target) else { return };
                    let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else { return };
                    let (held2, stopped2) = (held.clone(), stopped.clone());
                    std::thread::spawn(move || forward(client2, server2, held2, stopped2));
                    forward(server, client, held, stopped);
                });
            }
        });
        Partitionable { address, partitioned, stop }
    }

    pub fn partition(&self) {
        self.partitioned.store(true, Ordering::SeqCst);
    }

    pub fn heal(&self) {
        self.partitioned.store(false, Ordering::SeqCst);
    }
}

impl Drop for Partitionable {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which sees `stop`.
        let _ = TcpStream::connect(&self.address);
    }
}

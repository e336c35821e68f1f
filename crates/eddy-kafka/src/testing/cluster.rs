//! Apache Kafka brokers started by a test: each node is broker and controller at once
//! (KRaft's combined mode), with its own loopback ports and log directory in a scratch
//! folder. A node is formatted once (`kafka-storage format`) and can be SIGKILLed and
//! started again on the same log directory, as an operator's broker restarts.
//!
//! The JVMs outlive nothing: a watchdog process per cluster kills them and removes the
//! folder when the test process ends, however it ends, so that a broker shared by a
//! test binary (a static, never dropped) or left by a killed test does not linger.

use std::fmt::Write as _;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a cluster may take to start (three JVMs on a loaded 2-core machine take
/// about 10 s; a broker restarted after SIGKILL recovers its logs first).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The folder with Apache Kafka's jars: `EDDY_KAFKA_LIBS`, else
/// `~/.cache/eddy/apache-kafka/libs`, where `scripts/install-deps.sh` copies them.
pub fn kafka_libs() -> Result<PathBuf, String> {
    let libs = match std::env::var_os("EDDY_KAFKA_LIBS") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").ok_or("HOME is not set, and neither is EDDY_KAFKA_LIBS")?;
            Path::new(&home).join(".cache/eddy/apache-kafka/libs")
        }
    };
    let has_broker = std::fs::read_dir(&libs)
        .map(|entries| entries.flatten().any(|e| e.file_name().to_string_lossy().starts_with("kafka_2.13-")))
        .unwrap_or(false);
    if !has_broker {
        return Err(format!(
            "Apache Kafka's jars are not in {} (run scripts/install-deps.sh, or set EDDY_KAFKA_LIBS)",
            libs.display()
        ));
    }
    Ok(libs)
}

/// A free loopback port (bound then released; good enough for tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("no free loopback port")
}

/// Running Apache Kafka brokers; killed, and their folder removed, on drop.
pub struct KafkaCluster {
    /// The bootstrap servers, `host:port,…`, as clients are given them (a proxy's port
    /// when the cluster was started behind one).
    pub brokers: String,
    nodes: Vec<Node>,
    dir: PathBuf,
    watchdog: Child,
}

struct Node {
    id: usize,
    /// The client port it listens on.
    port: u16,
    dir: PathBuf,
    process: Option<Child>,
}

impl KafkaCluster {
    /// One broker, for tests that do not kill it.
    pub fn single() -> Result<Self, String> {
        Self::start(1, &[])
    }

    /// One broker for every test of this test binary that asks, started by the first:
    /// for tests that neither kill nor configure it, and name their own topics. It lives
    /// as long as the process.
    pub fn shared() -> &'static KafkaCluster {
        static SHARED: OnceLock<KafkaCluster> = OnceLock::new();
        SHARED.get_or_init(|| Self::single().unwrap_or_else(|e| panic!("cannot start the shared Kafka broker: {e}")))
    }

    /// `nodes` brokers forming one cluster, every topic replicated to all of them by
    /// default (`default.replication.factor`, and the internal topics') with
    /// `min.insync.replicas` 2 where there are several; `config` adds or overrides broker
    /// settings (`server.properties` lines).
    pub fn start(nodes: usize, config: &[(&str, &str)]) -> Result<Self, String> {
        let ports: Vec<u16> = (0..nodes).map(|_| free_port()).collect();
        Self::start_advertising(&ports, &ports, config)
    }

    /// One broker behind a [`Proxy`](super::Proxy): it advertises the proxy's address, so
    /// clients only ever reach it through the proxy. The proxy is up when this returns.
    pub fn single_behind_proxy() -> Result<(Self, super::Proxy), String> {
        let (port, proxy_port) = (free_port(), free_port());
        let proxy = super::Proxy::start(proxy_port, port)?;
        let cluster = Self::start_advertising(&[port], &[proxy_port], &[])?;
        Ok((cluster, proxy))
    }

    fn start_advertising(ports: &[u16], advertised: &[u16], config: &[(&str, &str)]) -> Result<Self, String> {
        let libs = kafka_libs()?;
        let dir = std::env::temp_dir().join(format!("eddy-apache-kafka-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let watchdog = watchdog(&dir)?;
        let controller_ports: Vec<u16> = ports.iter().map(|_| free_port()).collect();
        let voters: Vec<String> =
            controller_ports.iter().enumerate().map(|(i, port)| format!("{}@127.0.0.1:{port}", i + 1)).collect();
        let cluster_id = random_cluster_id();
        let replication = ports.len();
        let min_isr = replication.min(2);
        let mut nodes = Vec::new();
        let mut formats = Vec::new();
        for (i, (&port, &advertised)) in ports.iter().zip(advertised).enumerate() {
            let id = i + 1;
            let node_dir = dir.join(format!("node-{id}"));
            std::fs::create_dir_all(&node_dir).map_err(|e| format!("cannot create {}: {e}", node_dir.display()))?;
            let mut properties = String::new();
            let settings = [
                ("process.roles", "broker,controller".to_string()),
                ("node.id", id.to_string()),
                ("controller.quorum.voters", voters.join(",")),
                ("listeners", format!("PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{}", controller_ports[i])),
                ("advertised.listeners", format!("PLAINTEXT://127.0.0.1:{advertised}")),
                ("controller.listener.names", "CONTROLLER".to_string()),
                ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".to_string()),
                ("inter.broker.listener.name", "PLAINTEXT".to_string()),
                ("log.dirs", node_dir.join("data").display().to_string()),
                ("default.replication.factor", replication.to_string()),
                ("min.insync.replicas", min_isr.to_string()),
                ("offsets.topic.replication.factor", replication.to_string()),
                ("transaction.state.log.replication.factor", replication.to_string()),
                ("transaction.state.log.min.isr", min_isr.to_string()),
                ("share.coordinator.state.topic.replication.factor", replication.to_string()),
                ("share.coordinator.state.topic.min.isr", min_isr.to_string()),
                // Fewer partitions of the internal topics than the 50 of production: they
                // are created on first use, while a test waits.
                ("offsets.topic.num.partitions", "4".to_string()),
                ("transaction.state.log.num.partitions", "4".to_string()),
                ("group.initial.rebalance.delay.ms", "0".to_string()),
            ];
            for (key, value) in settings.iter().map(|(k, v)| (*k, v.as_str())).chain(config.iter().copied()) {
                let _ = writeln!(properties, "{key}={value}");
            }
            write(&node_dir.join("server.properties"), &properties)?;
            write(
                &node_dir.join("log4j2.properties"),
                &format!(
                    "status = error\nappender.file.type = File\nappender.file.name = file\n\
                     appender.file.fileName = {}\nappender.file.layout.type = PatternLayout\n\
                     appender.file.layout.pattern = [%d] %p %m (%c)%n\n\
                     rootLogger.level = info\nrootLogger.appenderRef.file.ref = file\n",
                    node_dir.join("server.log").display()
                ),
            )?;
            formats.push(format_storage(&libs, &node_dir, &cluster_id)?);
            nodes.push(Node { id, port, dir: node_dir, process: None });
        }
        for (node, format) in nodes.iter().zip(formats) {
            let output = format.wait_with_output().map_err(|e| format!("formatting node {}: {e}", node.id))?;
            if !output.status.success() {
                return Err(format!(
                    "formatting the log directory of Kafka node {} failed ({}): {} {}",
                    node.id,
                    output.status,
                    String::from_utf8_lossy(&output.stdout).trim(),
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
            }
        }
        let brokers = advertised.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
        let mut cluster = Self { brokers, nodes, dir, watchdog };
        for node in &mut cluster.nodes {
            node.launch(&libs)?;
        }
        cluster.wait_until_serving(cluster.nodes.len())?;
        Ok(cluster)
    }

    /// The client port of node `index` (0-based).
    pub fn port(&self, index: usize) -> u16 {
        self.nodes[index].port
    }

    /// Kills node `index` (0-based) with SIGKILL, as a crash would; its log directory stays.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut process) = self.nodes[index].process.take() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }

    /// Starts node `index` again on its log directory and waits until it says it started
    /// (the cluster's metadata may still list it from before the kill) and the cluster
    /// serves metadata with all of its brokers.
    pub fn restart(&mut self, index: usize) -> Result<(), String> {
        self.kill(index);
        let starts_before = self.nodes[index].starts_logged();
        self.nodes[index].launch(&kafka_libs()?)?;
        let deadline = Instant::now() + START_TIMEOUT;
        while self.nodes[index].starts_logged() <= starts_before {
            self.nodes[index].check_alive()?;
            if Instant::now() > deadline {
                return Err(format!(
                    "Kafka node {} did not start again within {START_TIMEOUT:?}; its log ends:\n{}",
                    self.nodes[index].id,
                    self.log_tail(index, 30)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.wait_until_serving(self.nodes.len())
    }

    /// The last `lines` lines of node `index`'s server.log, for a failed test's message.
    pub fn log_tail(&self, index: usize, lines: usize) -> String {
        let log = std::fs::read_to_string(self.nodes[index].dir.join("server.log")).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Waits until every node listens and a client sees `count` brokers in the metadata.
    fn wait_until_serving(&mut self, count: usize) -> Result<(), String> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let deadline = Instant::now() + START_TIMEOUT;
        let started = Instant::now();
        for index in 0..self.nodes.len() {
            while TcpStream::connect(("127.0.0.1", self.nodes[index].port)).is_err() {
                self.nodes[index].check_alive()?;
                if Instant::now() > deadline {
                    return Err(format!(
                        "Kafka node {} did not listen on 127.0.0.1:{} within {START_TIMEOUT:?}; its log ends:\n{}",
                        self.nodes[index].id,
                        self.nodes[index].port,
                        self.log_tail(index, 30)
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let consumer: BaseConsumer = crate::KafkaProperties::default()
            .client_config(&self.brokers, &[])
            .create()
            .map_err(|e| format!("creating a client of {}: {e}", self.brokers))?;
        loop {
            match consumer.fetch_metadata(None, Duration::from_secs(5)) {
                Ok(metadata) if metadata.brokers().len() >= count => break,
                Ok(_) | Err(_) if Instant::now() > deadline => {
                    return Err(format!(
                        "the Kafka cluster at {} did not serve {count} brokers within {START_TIMEOUT:?}",
                        self.brokers
                    ))
                }
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        tracing::info!(brokers = %self.brokers, seconds = started.elapsed().as_secs_f64(), "Kafka cluster serving");
        Ok(())
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        for index in 0..self.nodes.len() {
            self.kill(index);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
    }
}

impl Node {
    fn launch(&mut self, libs: &Path) -> Result<(), String> {
        let out = std::fs::File::create(self.dir.join("server.out")).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let process = java(libs)
            .args(["-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true"])
            .arg(format!("-Dkafka.logs.dir={}", self.dir.display()))
            .arg(format!("-Dlog4j2.configurationFile={}", self.dir.join("log4j2.properties").display()))
            .arg("kafka.Kafka")
            .arg(self.dir.join("server.properties"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start java for Kafka node {}: {e}", self.id))?;
        self.process = Some(process);
        Ok(())
    }

    /// How often its server.log says the server started (the log is appended to across
    /// restarts).
    fn starts_logged(&self) -> usize {
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        log.matches("Kafka Server started").count()
    }

    fn check_alive(&mut self) -> Result<(), String> {
        if let Some(process) = &mut self.process {
            if let Ok(Some(status)) = process.try_wait() {
                let out = std::fs::read_to_string(self.dir.join("server.out")).unwrap_or_default();
                return Err(format!("Kafka node {} exited at start ({status}): {}", self.id, out.trim()));
            }
        }
        Ok(())
    }
}

/// `java` with Kafka's jars on the class path.
pub(super) fn java(libs: &Path) -> Command {
    let mut command = Command::new("java");
    command.arg("-cp").arg(format!("{}/*", libs.display()));
    command
}

/// Starts `kafka-storage format` for the node in `node_dir`.
fn format_storage(libs: &Path, node_dir: &Path, cluster_id: &str) -> Result<Child, String> {
    java(libs)
        .args(["-XX:TieredStopAtLevel=1", "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c"])
        .arg(node_dir.join("server.properties"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run java to format a Kafka log directory: {e}"))
}

/// A process that, once the test process is gone, kills the cluster's JVMs (their
/// command lines name files under `dir/node-`) and removes `dir`. In a process group of
/// its own, so that a signal to the test's group (Ctrl-C, a runner's timeout) leaves it
/// to clean up.
fn watchdog(dir: &Path) -> Result<Child, String> {
    use std::os::unix::process::CommandExt;
    const SCRIPT: &str =
        r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done; pkill -9 -f -- "$2/node-"; rm -rf -- "$2""#;
    Command::new("sh")
        .args(["-c", SCRIPT, "eddy-kafka-watchdog", &std::process::id().to_string()])
        .arg(dir)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the Kafka watchdog: {e}"))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A KRaft cluster id: 16 random bytes in URL-safe base64 without padding, never starting
/// with `-` (`kafka-storage format -t -…` would take it for an option and fail, once in 64
/// starts: seen in a stress run).
fn random_cluster_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut bytes = Vec::with_capacity(16);
    for half in 0..2u64 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(half);
        hasher.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
        );
        bytes.extend_from_slice(&hasher.finish().to_le_bytes());
    }
    // The first character is the first byte's top six bits: below 32, a letter.
    bytes[0] &= 0x7f;
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut id = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            id.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    id
}

#[cfg(test)]
mod tests {
    #[test]
    fn cluster_ids_are_22_characters_and_never_start_with_a_dash() {
        for _ in 0..2000 {
            let id = super::random_cluster_id();
            assert_eq!(id.len(), 22, "{id}");
            assert!(id.starts_with(|c: char| c.is_ascii_alphabetic()), "{id}");
        }
    }
}

//! Processes of the tests: `eddy-bench` runs with their logs captured, and a cluster of
//! a JobManager and TaskManagers started as real processes on loopback.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BENCH: &str = env!("CARGO_BIN_EXE_eddy-bench");
pub const SECRET: &str = "the-cluster-secret-of-these-tests";

/// Sends `signal` (`-STOP`, `-CONT`) to process `pid`.
pub fn signal(pid: u32, signal: &str) {
    let sent = Command::new("kill").args([signal, &pid.to_string()]).status().expect("kill runs");
    assert!(sent.success(), "kill {signal} {pid}");
}

/// A process whose standard error lines are kept, for waiting on what it logs.
pub struct Proc {
    pub child: Child,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    pub fn start(args: &[&str]) -> Proc {
        let mut child = Command::new(BENCH)
            .args(args)
            // The Kafka sink's transactions at debug: the Kafka tests wait for its first commit.
            .env("EDDY_LOG", "info,eddy_kafka=debug")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("eddy-bench starts");
        let log = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stderr.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stdout.take().unwrap()),
        ] {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    log.lock().unwrap().push(line);
                }
            });
        }
        Proc { child, log }
    }

    /// Pauses the process (SIGSTOP): it holds its sockets and leases but does nothing.
    pub fn pause(&self) {
        signal(self.child.id(), "-STOP");
    }

    /// Lets a paused process go on (SIGCONT).
    pub fn resume(&self) {
        signal(self.child.id(), "-CONT");
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn count(&self, pattern: &str) -> usize {
        self.lines().iter().filter(|l| l.contains(pattern)).count()
    }

    /// Waits until `count` lines contain `pattern`; panics with the log after `timeout`.
    pub fn wait_for(&self, pattern: &str, count: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.count(pattern) < count {
            assert!(
                Instant::now() < deadline,
                "no {count}× '{pattern}' within {timeout:?}:\n{}",
                self.lines().join("\n")
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the process to end; its exit code and log.
    pub fn finish(mut self, timeout: Duration) -> (i32, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(50)); // the log readers catch up
                return (status.code().unwrap_or(-1), self.lines().join("\n"));
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("still running after {timeout:?}:\n{}", self.lines().join("\n"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A JobManager and TaskManagers, all killed when dropped.
pub struct Cluster {
    pub dir: PathBuf,
    pub secret: PathBuf,
    /// Flags every process of the cluster takes (TLS).
    pub common: Vec<String>,
    /// Flags the JobManager and TaskManagers take (heartbeats).
    pub servers: Vec<String>,
    pub address: String,
    pub jobmanager: Proc,
    pub task_managers: Vec<Proc>,
    /// High availability: the etcd address every process takes (`--ha`), and the
    /// JobManagers standing by.
    pub ha: Option<String>,
    pub standby: Vec<Proc>,
}

impl Cluster {
    pub fn start(name: &str, slots: &[u32]) -> Cluster {
        Cluster::start_with(name, slots, &[], &[])
    }

    pub fn start_with(name: &str, slots: &[u32], common: &[&str], servers: &[&str]) -> Cluster {
        let common: Vec<String> = common.iter().map(|s| s.to_string()).collect();
        let servers: Vec<String> = servers.iter().map(|s| s.to_string()).collect();
        let (dir, secret) = cluster_dir(name);
        let mut args = vec!["jobmanager", "--bind", "127.0.0.1:0", "--secret-file", secret.to_str().unwrap()];
        args.extend(common.iter().chain(&servers).map(String::as_str));
        let jobmanager = Proc::start(&args);
        jobmanager.wait_for("jobmanager listening on ", 1, Duration::from_secs(20));
        let address = jobmanager
            .lines()
            .iter()
            .find_map(|l| l.strip_prefix("jobmanager listening on ").map(String::from))
            .unwrap();
        let mut cluster = Cluster {
            dir,
            secret,
            common,
            servers,
            address,
            jobmanager,
            task_managers: Vec::new(),
            ha: None,
            standby: Vec::new(),
        };
        for &n in slots {
            cluster.add_task_manager(n);
        }
        cluster
    }

    /// `jobmanagers` JobManagers on etcd at `ha` (the first leads, the others stand by)
    /// and TaskManagers of `slots`, every process finding the leader through etcd.
    pub fn start_ha(name: &str, ha: &str, jobmanagers: usize, slots: &[u32], servers: &[&str]) -> Cluster {
        let servers: Vec<String> = servers.iter().map(|s| s.to_string()).collect();
        let (dir, secret) = cluster_dir(name);
        let start = || {
            let mut args =
                vec!["jobmanager", "--bind", "127.0.0.1:0", "--ha", ha, "--secret-file", secret.to_str().unwrap()];
            args.extend(servers.iter().map(String::as_str));
            Proc::start(&args)
        };
        let jobmanager = start();
        jobmanager.wait_for("this JobManager leads", 1, Duration::from_secs(30));
        let address = jobmanager
            .lines()
            .iter()
            .find_map(|l| l.strip_prefix("jobmanager listening on ").map(String::from))
            .unwrap();
        let standby: Vec<Proc> = (1..jobmanagers).map(|_| start()).collect();
        for jm in &standby {
            jm.wait_for("standing by", 1, Duration::from_secs(30));
        }
        let mut cluster = Cluster {
            dir,
            secret,
            common: Vec::new(),
            servers,
            address,
            jobmanager,
            task_managers: Vec::new(),
            ha: Some(ha.to_string()),
            standby,
        };
        for &n in slots {
            cluster.add_task_manager(n);
        }
        cluster
    }

    pub fn add_task_manager(&mut self, slots: u32) {
        let joined = self.jobmanager.count("TaskManager joined");
        let slots = slots.to_string();
        let (flag, address) = match &self.ha {
            Some(ha) => ("--ha", ha.as_str()),
            None => ("--jobmanager", self.address.as_str()),
        };
        let mut args =
            vec!["taskmanager", flag, address, "--slots", &slots, "--secret-file", self.secret.to_str().unwrap()];
        args.extend(self.common.iter().chain(&self.servers).map(String::as_str));
        let tm = Proc::start(&args);
        self.task_managers.push(tm);
        self.jobmanager.wait_for("TaskManager joined", joined + 1, Duration::from_secs(20));
    }

    /// The arguments that submit a job to this cluster.
    pub fn submit_args(&self) -> Vec<String> {
        let (flag, address) = match &self.ha {
            Some(ha) => ("--ha", ha.clone()),
            None => ("--jobmanager", self.address.clone()),
        };
        let mut args = vec![flag.into(), address, "--secret-file".into(), self.secret.display().to_string()];
        args.extend(self.common.iter().cloned());
        args
    }

    pub fn submit(&self, args: &[&str]) -> Proc {
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.extend(self.submit_args());
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        Proc::start(&all)
    }

    /// Runs a control command (`status 1`, `savepoint 1 DIR`, ...) against this cluster:
    /// its exit code and output.
    pub fn control(&self, words: &[&str]) -> (i32, String) {
        self.submit(words).finish(Duration::from_secs(60))
    }

    /// The TaskManager process with the JobManager's id `id` (from its "joined" line).
    pub fn task_manager_by_id(&mut self, id: u32) -> &mut Proc {
        let pid = self
            .jobmanager
            .lines()
            .iter()
            .find(|l| l.contains("TaskManager joined") && l.contains(&format!("task_manager={id} ")))
            .and_then(|l| l.split("pid=").nth(1)?.split_whitespace().next()?.parse::<u32>().ok())
            .expect("the JobManager logged the TaskManager");
        self.task_managers.iter_mut().find(|p| p.child.id() == pid).expect("a TaskManager of this cluster")
    }

    /// The TaskManager ids of the newest slot allocation.
    pub fn allocated(&self) -> Vec<u32> {
        let lines = self.jobmanager.lines();
        let line = lines.iter().rev().find(|l| l.contains("slots allocated")).expect("an allocation");
        let list = line.split("task_managers=[").nth(1).unwrap().split(']').next().unwrap();
        list.split("), (")
            .map(|pair| pair.trim_matches(|c| c == '(' || c == ')').split(',').next().unwrap().trim().parse().unwrap())
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.task_managers.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// W1 at parallelism 2 over 1000 keys, `events` of them, into the exactly-once file sink
/// at `dir/out`, rate-capped at `rate` a second with a checkpoint every 100 ms into
/// `dir/checkpoints` and restarts 100 ms apart: the arguments to submit it with, and what
/// the failure-free local run printed, which wrote its output to `dir/reference`.
pub fn w1_exactly_once(dir: &std::path::Path, events: &str, rate: &str) -> (Vec<String>, String) {
    let reference = dir.join("reference");
    let base = ["api-count", "--events", events, "--keys", "1000", "--parallelism", "2"];
    let mut local = base.to_vec();
    local.extend(["--output", reference.to_str().unwrap()]);
    let printed = run_local(&local);
    let (checkpoints, out) = (dir.join("checkpoints"), dir.join("out"));
    let mut args: Vec<String> = base.iter().map(|s| s.to_string()).collect();
    for arg in [
        "--rate",
        rate,
        "--checkpoint-ms",
        "100",
        "--checkpoint-dir",
        checkpoints.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--restart-delay-ms",
        "100",
    ] {
        args.push(arg.to_string());
    }
    (args, printed)
}

/// A fresh directory for a test's cluster, with the cluster's secret in it.
fn cluster_dir(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("eddy-cluster-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    (dir, secret)
}

pub fn run_local(args: &[&str]) -> String {
    let out = Command::new(BENCH).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The last `name=value` in `output`.
pub fn field<'a>(output: &'a str, name: &str) -> &'a str {
    output
        .split_whitespace()
        .rev()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name}= in {output}"))
}

//! [`Env`]: Flink's `StreamExecutionEnvironment`. Holds the job being built and runs it.

use crate::function::SourceFunction;
use crate::operator::source::SourceOp;
use crate::source::{CollectionSource, SequenceSource, SocketTextSource, TextFileSource};
use crate::stream::DataStream;
use crate::Data;
use eddy_checkpoint::restart::RestartStrategy;
use eddy_checkpoint::{CheckpointConfig, CheckpointingMode};
use eddy_runtime::coordination::CoordinatorProvider;
use eddy_runtime::graph::{
    Autoscaling, JobConfig, JobServices, OperatorFactory, OutputPort, Partitioning, RestoreFrom, RestoreMode,
    SavepointRequest, SchedulerMode, StorageChoice, StreamEdge, StreamGraph, StreamNode, TypedPort,
};

use eddy_jobmaster::{ClusterTarget, JobResult, LocalExecutor};
use eddy_runtime::JobError;
use eddy_types::{MaxParallelism, NodeId, DEFAULT_MAX_PARALLELISM};
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

/// A node while the job is being built; parallelism and partitioning are settled at
/// [`Env::stream_graph`], when every setter has been called.
pub(crate) struct NodeDraft {
    pub(crate) name: String,
    pub(crate) uid: Option<String>,
    pub(crate) parallelism: Option<u32>,
    /// Sources that cannot run in parallel.
    pub(crate) non_parallel: bool,
    pub(crate) keyed: bool,
    pub(crate) factory: OperatorFactory,
    pub(crate) outputs: Vec<OutputPort>,
    pub(crate) chainable: bool,
    /// A source's coordinator (its split enumerator).
    pub(crate) coordinator: Option<CoordinatorProvider>,
    /// What it must hold alone on a cluster ([`crate::function::Sink::exclusive_resources`]).
    pub(crate) exclusive_resources: Vec<String>,
}

pub(crate) struct EdgeDraft {
    pub(crate) from: NodeId,
    pub(crate) from_port: usize,
    pub(crate) to: NodeId,
    pub(crate) to_input: usize,
    /// `None`: forward when the parallelism matches, rebalance otherwise (Flink's default).
    pub(crate) partitioning: Option<Partitioning>,
}

pub(crate) struct EnvInner {
    pub(crate) parallelism: u32,
    pub(crate) max_parallelism: u32,
    pub(crate) config: JobConfig,
    pub(crate) services: JobServices,
    pub(crate) nodes: Vec<NodeDraft>,
    pub(crate) edges: Vec<EdgeDraft>,
    /// Problems found while the graph was built, reported by [`Env::stream_graph`].
    pub(crate) problems: Vec<String>,
    /// Where the job's REST API, dashboard and `/metrics` are served, and the server once
    /// started (one per environment, serving its latest job).
    pub(crate) rest_bind: Option<String>,
    pub(crate) rest_server: Option<crate::web::WebServer>,
}

/// How long a job's process waits, once its job ended, for the outcome of a savepoint or
/// stop asked through its REST API to be read.
const REST_LINGER: std::time::Duration = std::time::Duration::from_secs(5);

/// The entry point of a job (Flink's `StreamExecutionEnvironment`): create sources, build
/// the graph with [`DataStream`] operations, then [`Env::execute`].
///
/// ```
/// use eddy_api::Env;
/// let env = Env::new();
/// env.set_parallelism(2);
/// let evens = eddy_api::sink::CollectSink::new();
/// env.from_sequence(1, 10).filter(|n| n % 2 == 0).add_sink(evens.clone());
/// env.execute("evens").unwrap();
/// let mut got = evens.take();
/// got.sort();
/// assert_eq!(got, vec![2, 4, 6, 8, 10]);
/// ```
#[derive(Clone)]
pub struct Env {
    pub(crate) inner: Rc<RefCell<EnvInner>>,
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    /// An environment for the embedded local runtime; default parallelism = CPU cores.
    pub fn new() -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
        Self {
            inner: Rc::new(RefCell::new(EnvInner {
                parallelism: cores,
                max_parallelism: DEFAULT_MAX_PARALLELISM,
                config: JobConfig::default(),
                services: JobServices {
                    #[cfg(feature = "object-store")]
                    storage_opener: std::sync::Arc::new(eddy_checkpoint_object::ObjectStorageOpener),
                    #[cfg(feature = "web")]
                    metrics_server: Some(std::sync::Arc::new(crate::web::TaskExecutorMetrics)),
                    ..JobServices::default()
                },
                nodes: Vec::new(),
                edges: Vec::new(),
                problems: Vec::new(),
                rest_bind: None,
                rest_server: None,
            })),
        }
    }

    /// Default parallelism of operators that do not set their own.
    pub fn set_parallelism(&self, parallelism: u32) -> &Self {
        self.inner.borrow_mut().parallelism = parallelism;
        self
    }

    pub fn parallelism(&self) -> u32 {
        self.inner.borrow().parallelism
    }

    /// The number of key groups (1..=32768, default 128): the highest parallelism keyed
    /// state can ever be rescaled to. Fixed for the life of the job's state.
    pub fn set_max_parallelism(&self, max_parallelism: u32) -> &Self {
        self.inner.borrow_mut().max_parallelism = max_parallelism;
        self
    }

    /// Where keyed state lives while the job runs: [`eddy_state::HeapStateBackend`] (the
    /// default) or RocksDB (`eddy_state_rocksdb::RocksDbStateBackend`, feature `rocksdb`).
    pub fn set_state_backend(&self, backend: impl eddy_state::KeyedBackendFactory + 'static) -> &Self {
        self.inner.borrow_mut().services.state_backend = std::sync::Arc::new(backend);
        self
    }

    /// Takes a checkpoint every `interval_ms` (Flink's `enableCheckpointing`).
    pub fn enable_checkpointing(&self, interval_ms: u64) -> &Self {
        self.inner.borrow_mut().config.checkpoint.interval_ms = interval_ms;
        self
    }

    /// EXACTLY_ONCE (default: barriers are aligned) or AT_LEAST_ONCE.
    pub fn set_checkpointing_mode(&self, mode: CheckpointingMode) -> &Self {
        self.inner.borrow_mut().config.checkpoint.mode = mode;
        self
    }

    /// Unaligned checkpoints (Flink's `enableUnalignedCheckpoints`): a checkpoint's barrier
    /// overtakes the records queued before it, and those records go into the checkpoint,
    /// to be processed again on restore before any new input (at another parallelism too).
    /// Under backpressure checkpoints then take about as long as writing the state, not
    /// as long as draining the queues. Exactly-once checkpoints only: savepoints and
    /// AT_LEAST_ONCE checkpoints stay aligned.
    pub fn enable_unaligned_checkpoints(&self) -> &Self {
        self.inner.borrow_mut().config.checkpoint.unaligned = true;
        self
    }

    /// With unaligned checkpoints, Flink's `aligned-checkpoint-timeout`: each task starts
    /// a checkpoint aligned and turns it unaligned once its alignment took `timeout`, so
    /// that only checkpoints held back by backpressure store in-flight records.
    pub fn set_aligned_checkpoint_timeout(&self, timeout: std::time::Duration) -> &Self {
        self.inner.borrow_mut().config.checkpoint.aligned_checkpoint_timeout_ms = timeout.as_millis() as u64;
        self
    }

    /// All checkpoint settings at once (timeouts, pauses, retention…).
    pub fn set_checkpoint_config(&self, config: CheckpointConfig) -> &Self {
        self.inner.borrow_mut().config.checkpoint = config;
        self
    }

    pub fn checkpoint_config(&self) -> CheckpointConfig {
        self.inner.borrow().config.checkpoint.clone()
    }

    /// Keeps checkpoints in a directory (filesystem checkpoint storage) instead of the
    /// JobManager's memory; `s3://bucket/prefix` for an S3-compatible object store.
    pub fn set_checkpoint_dir(&self, dir: impl Into<PathBuf>) -> &Self {
        self.inner.borrow_mut().config.storage = StorageChoice::Directory(dir.into());
        self
    }

    pub fn set_restart_strategy(&self, strategy: RestartStrategy) -> &Self {
        self.inner.borrow_mut().config.restart = Some(strategy);
        self
    }

    /// Starts from a checkpoint or savepoint directory.
    pub fn restore_from(&self, path: impl Into<PathBuf>) -> &Self {
        self.inner.borrow_mut().config.restore = Some(RestoreFrom::Path(path.into()));
        self
    }

    /// Starts from the newest complete checkpoint in a checkpoint directory.
    pub fn restore_latest_from(&self, dir: impl Into<PathBuf>) -> &Self {
        self.inner.borrow_mut().config.restore = Some(RestoreFrom::LatestIn(dir.into()));
        self
    }

    /// Starts from the newest complete checkpoint of this job in its checkpoint directory
    /// ([`Env::set_checkpoint_dir`]), or fresh, saying so, while there is none yet: the
    /// same program starts and resumes the job (`--restore latest`).
    pub fn restore_latest(&self) -> &Self {
        self.inner.borrow_mut().config.restore = Some(RestoreFrom::LatestOrFresh);
        self
    }

    /// Whether the job takes over the checkpoint it is restored from
    /// ([`RestoreMode::Claim`]) or leaves it alone (`NoClaim`, the default).
    pub fn set_restore_mode(&self, mode: RestoreMode) -> &Self {
        self.inner.borrow_mut().config.restore_mode = mode;
        self
    }

    /// How a cluster job's parallelism is chosen: as set ([`SchedulerMode::Default`]), or
    /// every slot of the cluster, growing and shrinking with it
    /// ([`SchedulerMode::Reactive`], Flink's reactive mode). A local job runs as set.
    pub fn set_scheduler_mode(&self, mode: SchedulerMode) -> &Self {
        self.inner.borrow_mut().config.scheduler_mode = mode;
        self
    }

    /// The job's parallelism follows its load, between bounds (Flink's autoscaler): from
    /// its operators' measured busy time, rescaled when a window of samples agrees, with a
    /// cool-down after each rescale. Needs checkpoints (a rescale restores one); locally
    /// and on a cluster.
    pub fn set_autoscaling(&self, autoscaling: Autoscaling) -> &Self {
        self.inner.borrow_mut().config.autoscaling = Some(autoscaling);
        self
    }

    /// The seed the run derives its ids and file names from (by default drawn when the job
    /// starts, and logged): a run with the seed of another names things the same way.
    pub fn set_seed(&self, seed: u64) -> &Self {
        self.inner.borrow_mut().config.seed = Some(seed);
        self
    }

    /// Runs the job under deterministic simulation: every task on one thread in an order a
    /// scheduler seeded with `seed` picks, on a simulated clock, with `faults` seeded faults
    /// (task failures, storage write and read errors, files cut short). The same seed
    /// takes the same steps and leaves the same [`JobResult::trace`](eddy_jobmaster::JobResult).
    /// The heap state backend only.
    pub fn simulate(&self, seed: u64, faults: u32) -> &Self {
        self.inner.borrow_mut().config.simulation = Some(eddy_runtime::graph::Simulation { seed, faults });
        self
    }

    /// Start even when the restored state has operators this job lacks (their state is dropped).
    pub fn set_allow_non_restored_state(&self, allow: bool) -> &Self {
        self.inner.borrow_mut().config.allow_non_restored_state = allow;
        self
    }

    /// Takes a savepoint into `dir` after `after_ms` of running, then stops the job
    /// (Flink's stop-with-savepoint); [`JobResult::savepoint`] says where it went.
    pub fn stop_with_savepoint_after(&self, dir: impl Into<PathBuf>, after_ms: u64) -> &Self {
        self.inner.borrow_mut().config.savepoint = Some(SavepointRequest { dir: dir.into(), after_ms, stop: true });
        self
    }

    /// Takes a savepoint into `dir` after `after_ms` of running and keeps going (a
    /// savepoint on demand); [`JobResult::savepoint`] says where it went.
    pub fn trigger_savepoint_after(&self, dir: impl Into<PathBuf>, after_ms: u64) -> &Self {
        self.inner.borrow_mut().config.savepoint = Some(SavepointRequest { dir: dir.into(), after_ms, stop: false });
        self
    }

    pub(crate) fn add_node(&self, node: NodeDraft, inputs: Vec<EdgeDraft>) -> NodeId {
        let mut inner = self.inner.borrow_mut();
        let id = NodeId(inner.nodes.len() as u32);
        inner.nodes.push(node);
        for mut edge in inputs {
            edge.to = id;
            inner.edges.push(edge);
        }
        id
    }

    pub(crate) fn add_source_node<T: Data, S: SourceFunction<T>>(
        &self,
        name: &str,
        function: S,
        non_parallel: bool,
    ) -> DataStream<T> {
        let timestamps = function.timestamps();
        let coordinator = function.coordinator();
        let node = NodeDraft {
            name: name.to_string(),
            uid: None,
            parallelism: non_parallel.then_some(1),
            non_parallel,
            keyed: false,
            factory: OperatorFactory::Source(SourceOp::<T, S>::factory(function)),
            outputs: vec![OutputPort { tag: None, port_type: Arc::new(TypedPort::<T>::new()) }],
            chainable: true,
            coordinator,
            exclusive_resources: Vec::new(),
        };
        let id = self.add_node(node, Vec::new());
        let stream = DataStream::from_port(self.clone(), id, 0);
        match timestamps {
            Some(timestamps) => DataStream { timestamps: Some(timestamps), ..stream },
            None => stream,
        }
    }

    /// A parallel source of the numbers `from..=to`, split into contiguous ranges across
    /// its subtasks (Flink's `fromSequence`); replayable: each subtask keeps its remaining
    /// range in operator state.
    pub fn from_sequence(&self, from: u64, to: u64) -> DataStream<u64> {
        self.add_source_node("Sequence Source", SequenceSource::new(from, to), false)
    }

    /// A non-parallel source of the given elements, in order.
    pub fn from_collection<T: Data + Sync>(&self, elements: Vec<T>) -> DataStream<T> {
        self.add_source_node("Collection Source", CollectionSource::new(elements), false).set_non_parallel()
    }

    /// The lines of a text file, or of every file in a directory (files are spread over
    /// the source's subtasks). A missing path fails the job when it starts, naming it.
    pub fn read_text_file(&self, path: impl Into<PathBuf>) -> DataStream<String> {
        let path = path.into();
        let name = format!("Text File Source {}", path.display());
        self.add_source_node(&name, TextFileSource::new(path), false)
    }

    /// Lines read from a TCP socket until it closes (non-parallel).
    pub fn socket_text_stream(&self, host: &str, port: u16) -> DataStream<String> {
        let name = format!("Socket Stream {host}:{port}");
        self.add_source_node(&name, SocketTextSource::new(host, port), true)
    }

    /// A user source running with parallelism 1 (Flink's `addSource`).
    pub fn add_source<T: Data, S: SourceFunction<T>>(&self, source: S) -> DataStream<T> {
        self.add_source_node("Custom Source", source, true)
    }

    /// A user source running in parallel; each subtask must read its own share.
    pub fn add_parallel_source<T: Data, S: SourceFunction<T>>(&self, source: S) -> DataStream<T> {
        self.add_source_node("Custom Parallel Source", source, false)
    }

    /// The job graph as it would run, with defaults settled and the graph checked.
    pub fn stream_graph(&self, job_name: &str) -> Result<StreamGraph, JobError> {
        let inner = self.inner.borrow();
        let invalid = |message: String| JobError::InvalidJob { job: job_name.to_string(), message };
        if let Some(problem) = inner.problems.first() {
            return Err(invalid(problem.clone()));
        }
        let max_parallelism = MaxParallelism::new(inner.max_parallelism).map_err(|e| invalid(eddy_types::chain(&e)))?;
        if inner.parallelism == 0 {
            return Err(invalid("the default parallelism must be at least 1".into()));
        }
        let mut nodes = Vec::with_capacity(inner.nodes.len());
        for (index, draft) in inner.nodes.iter().enumerate() {
            let parallelism = draft.parallelism.unwrap_or(inner.parallelism);
            if draft.non_parallel && parallelism != 1 {
                return Err(invalid(format!(
                    "source '{}' is not parallel; its parallelism must be 1, not {parallelism}",
                    draft.name
                )));
            }
            nodes.push(StreamNode {
                id: NodeId(index as u32),
                name: draft.name.clone(),
                uid: draft.uid.clone(),
                parallelism,
                follows_default: draft.parallelism.is_none() && !draft.non_parallel,
                keyed: draft.keyed,
                factory: draft.factory.clone(),
                outputs: draft.outputs.clone(),
                chainable: draft.chainable,
                coordinator: draft.coordinator.clone(),
                exclusive_resources: draft.exclusive_resources.clone(),
            });
        }
        let edges = inner
            .edges
            .iter()
            .map(|e| {
                let same = nodes[e.from.0 as usize].parallelism == nodes[e.to.0 as usize].parallelism;
                StreamEdge {
                    from: e.from,
                    from_port: e.from_port,
                    to: e.to,
                    to_input: e.to_input,
                    partitioning: e.partitioning.clone().unwrap_or(if same {
                        Partitioning::Forward
                    } else {
                        Partitioning::Rebalance
                    }),
                }
            })
            .collect();
        let graph = StreamGraph {
            job_name: job_name.to_string(),
            max_parallelism,
            config: inner.config.clone(),
            services: inner.services.clone(),
            nodes,
            edges,
        };
        eddy_runtime::graph::validate(&graph)?;
        Ok(graph)
    }

    /// The plan: chains, their parallelism and how they connect.
    pub fn explain(&self, job_name: &str) -> Result<String, JobError> {
        Ok(self.stream_graph(job_name)?.describe())
    }

    /// Runs the job on the embedded local runtime until every source is exhausted, or
    /// until the first failure, which the error names (operator and subtask).
    ///
    /// After [`Env::set_cluster`] the program submits the job to that cluster instead and
    /// coordinates it from here (its JobMaster); every TaskManager runs this same program
    /// with the same arguments to rebuild the graph (application mode). In such a run,
    /// `execute` returns once this process's subtasks ended, with
    /// [`JobResult::task_executor`] set: the job's own result is its JobMaster's. The
    /// program's arguments are never read here ([`eddy_jobmaster::ExecutionMode`]).
    pub fn execute(&self, job_name: &str) -> Result<JobResult, JobError> {
        let graph = self.stream_graph(job_name)?;
        if !eddy_rpc::launch::launched() {
            self.start_rest_server(job_name)?;
        }
        let result = LocalExecutor::new().execute(graph);
        if let Some(server) = &self.inner.borrow().rest_server {
            // A savepoint or stop asked through REST: its caller learns where it went.
            server.linger(REST_LINGER);
        }
        result
    }

    /// Serves the job's REST API, dashboard and `/metrics` at `address` (`HOST:PORT`, port
    /// 0 for any free one) while it runs, as Flink's MiniCluster serves its web UI. On a
    /// loopback address only: a job running here has no cluster secret to ask for (a
    /// cluster's JobManager serves its jobs with credentials).
    pub fn set_rest_bind(&self, address: &str) -> &Self {
        self.inner.borrow_mut().rest_bind = Some(address.to_string());
        self
    }

    /// Where the REST API is served, once a job started it (`http://HOST:PORT`).
    pub fn rest_url(&self) -> Option<String> {
        self.inner.borrow().rest_server.as_ref().map(crate::web::WebServer::url)
    }

    fn start_rest_server(&self, job_name: &str) -> Result<(), JobError> {
        let mut inner = self.inner.borrow_mut();
        let Some(bind) = inner.rest_bind.clone() else { return Ok(()) };
        if inner.rest_server.is_some() {
            return Ok(());
        }
        if inner.services.cluster.is_some() {
            let message = "--rest-bind serves a job that runs here; a job submitted to a cluster is served by its \
                JobManager (its --rest-bind)"
                .to_string();
            return Err(JobError::InvalidJob { job: job_name.to_string(), message });
        }
        let server = crate::web::serve_local_job(&bind, inner.services.board.clone())
            .map_err(|message| JobError::InvalidJob { job: job_name.to_string(), message })?;
        eprintln!("eddy: REST API, dashboard and /metrics of '{job_name}' at {}", server.url());
        inner.rest_server = Some(server);
        Ok(())
    }

    /// How often partial batches (and network buffers) are sent while input keeps coming
    /// (Flink's `setBufferTimeout`; 100 ms by default); 0 sends every record at once. A
    /// task with nothing more waiting sends what it has at once, whatever the timeout.
    pub fn set_buffer_timeout(&self, timeout_ms: u64) -> &Self {
        self.inner.borrow_mut().config.buffer_timeout_ms = timeout_ms;
        self
    }

    /// Buffer debloating (Flink's `taskmanager.network.memory.buffer-debloat.enabled` and
    /// `.target`): the records queued between subtasks follow a target time (Flink's
    /// default is 1 s) instead of a fixed count, measured per channel, so that under
    /// backpressure a checkpoint barrier waits behind about `target` of records instead of
    /// whole queues of full batches, and aligned checkpoints keep completing. A zero
    /// target sends single records. Without effect under simulation (its queues are
    /// unbounded) and with a buffer timeout of 0 (every batch is one record already).
    pub fn enable_buffer_debloating(&self, target: std::time::Duration) -> &Self {
        self.inner.borrow_mut().config.buffer_debloat = Some(eddy_runtime::debloat::BufferDebloat::new(target));
        self
    }

    /// Submits the job to a cluster on `execute` (the JobManager, the cluster's
    /// credentials, the arguments task executors run this program with). `eddy`'s
    /// `cluster::SubmitArgs` builds one from the usual flags.
    pub fn set_cluster(&self, target: ClusterTarget) -> &Self {
        self.inner.borrow_mut().services.cluster = Some(target);
        self
    }
}

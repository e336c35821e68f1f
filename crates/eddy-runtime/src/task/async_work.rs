//! Where the asynchronous part of tasks' snapshots runs, off the task threads: worker
//! threads of the attempt, or, under simulation, a queue the scheduler takes from one job
//! per turn.

use crossbeam_channel::{unbounded, Sender};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// One piece of asynchronous work (writing a task's part of a checkpoint).
pub type AsyncJob = Box<dyn FnOnce() + Send>;

/// Takes asynchronous work from tasks.
pub trait AsyncWork: Send + Sync {
    fn submit(&self, job: AsyncJob);
}

/// Worker threads for one attempt; they finish the work submitted before [`stop`].
///
/// [`stop`]: AsyncWorkers::stop
pub struct AsyncWorkers {
    sender: Option<Sender<AsyncJob>>,
    threads: Vec<JoinHandle<()>>,
}

struct WorkerQueue(Sender<AsyncJob>);

impl AsyncWork for WorkerQueue {
    fn submit(&self, job: AsyncJob) {
        // Only fails once the attempt stopped its workers: nobody waits for the result.
        let _ = self.0.send(job);
    }
}

impl AsyncWorkers {
    /// Starts `threads` workers (at least one).
    pub fn start(threads: usize) -> std::io::Result<Self> {
        let (sender, receiver) = unbounded::<AsyncJob>();
        let mut workers = Vec::new();
        for n in 0..threads.max(1) {
            let receiver = receiver.clone();
            let spawned = std::thread::Builder::new().name(format!("async snapshots {n}")).spawn(move || {
                for job in receiver {
                    job();
                }
            });
            match spawned {
                Ok(handle) => workers.push(handle),
                Err(e) if workers.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        Ok(Self { sender: Some(sender), threads: workers })
    }

    /// A handle tasks submit through.
    pub fn queue(&self) -> Arc<dyn AsyncWork> {
        Arc::new(WorkerQueue(self.sender.clone().expect("running until stopped")))
    }

    /// Lets the workers finish what was submitted, then joins them.
    pub fn stop(mut self) {
        self.sender.take();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Work queued for a scheduler to run one job at a time, on its own thread.
#[derive(Default)]
pub struct QueuedWork {
    queue: Mutex<VecDeque<AsyncJob>>,
}

impl QueuedWork {
    /// Runs the oldest queued job; false when there was none.
    pub fn run_next(&self) -> bool {
        let job = self.queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
        match job {
            Some(job) => {
                job();
                true
            }
            None => false,
        }
    }

    /// Drops what was queued and not run (the attempt ended).
    pub fn clear(&self) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl AsyncWork for QueuedWork {
    fn submit(&self, job: AsyncJob) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).push_back(job);
    }
}

//! What all operators share: their info, operator state, side outputs, the keyed backend
//! when they are keyed, and turning function errors into task errors that name them.

use crate::function::{FunctionError, RichFunction, RuntimeContext, SideOutputs};
use eddy_runtime::task::OperatorInfo;
use eddy_runtime::{Output, PortOutput, TaskError};
use eddy_state::keyed::{install_backend, take_backend};
use eddy_state::{HeapKeyedStateBackend, OperatorStateStore};

pub(crate) struct OperatorCore {
    pub(crate) info: OperatorInfo,
    pub(crate) keyed: bool,
    pub(crate) operator_state: OperatorStateStore,
    pub(crate) side: SideOutputs,
}

impl OperatorCore {
    /// Splits the ports handed over by the runtime into the main output (port 0) and the
    /// side outputs (by tag).
    pub(crate) fn new(
        info: OperatorInfo,
        keyed: bool,
        ports: Vec<Box<dyn PortOutput>>,
    ) -> (Self, Option<Box<dyn PortOutput>>) {
        let mut main = None;
        let mut side = Vec::new();
        for (port, tag) in ports.into_iter().zip(info.output_tags.iter()) {
            match tag {
                None => main = Some(port),
                Some(tag) => side.push((tag.clone(), port)),
            }
        }
        let core = Self { info, keyed, operator_state: OperatorStateStore::new(), side: SideOutputs::new(side) };
        (core, main)
    }

    pub(crate) fn error(&self, error: FunctionError) -> TaskError {
        TaskError::Operator { operator: self.info.name.clone(), message: error.to_string() }
    }

    /// Records a per-record failure; the task loop picks it up after the batch.
    #[inline]
    pub(crate) fn fail(&self, error: FunctionError) {
        self.info.shared.fail(self.info.index, error.to_string());
    }

    /// Opens side outputs, installs the keyed backend, then runs the function's
    /// `initialize_state` and `open`.
    pub(crate) fn open(&mut self, function: &mut dyn RichFunction) -> Result<(), TaskError> {
        for port in self.side.ports() {
            port.open()?;
        }
        if self.keyed {
            let backend = HeapKeyedStateBackend::new(self.info.key_group_range, self.info.max_parallelism);
            install_backend(Box::new(backend)).map_err(|e| TaskError::Internal(e.to_string()))?;
        }
        let previous = self.info.shared.enter(self.info.index);
        let mut ctx = RuntimeContext::new(&self.info, self.keyed, &mut self.operator_state);
        let result = function.initialize_state(&mut ctx).and_then(|()| function.open(&mut ctx));
        self.info.shared.leave(previous);
        result.map_err(|e| self.error(e))
    }

    pub(crate) fn flush(&mut self) -> Result<(), TaskError> {
        self.side.ports().try_for_each(|p| p.flush())
    }

    /// Runs the function's `close`, then ends the side outputs.
    pub(crate) fn end_input(&mut self, function: &mut dyn RichFunction) -> Result<(), TaskError> {
        let previous = self.info.shared.enter(self.info.index);
        let result = function.close();
        self.info.shared.leave(previous);
        result.map_err(|e| self.error(e))?;
        self.side.ports().try_for_each(|p| p.end_input())
    }

    pub(crate) fn close(&mut self) {
        self.side.ports().for_each(|p| p.close());
        if self.keyed {
            take_backend();
        }
    }

    /// The whole lifecycle with the operator's main output, shared by every operator shape:
    /// open downstream first, then this operator.
    pub(crate) fn open_with<O>(
        &mut self,
        main: &mut dyn Output<O>,
        function: &mut dyn RichFunction,
    ) -> Result<(), TaskError> {
        main.open()?;
        self.open(function)
    }

    pub(crate) fn flush_with<O>(&mut self, main: &mut dyn Output<O>) -> Result<(), TaskError> {
        main.flush()?;
        self.flush()
    }

    /// Closes the function, then ends the side outputs and the main output.
    pub(crate) fn end_input_with<O>(
        &mut self,
        main: &mut dyn Output<O>,
        function: &mut dyn RichFunction,
    ) -> Result<(), TaskError> {
        self.end_input(function)?;
        main.end_input()
    }

    pub(crate) fn close_with<O>(&mut self, main: &mut dyn Output<O>) {
        main.close();
        self.close();
    }
}

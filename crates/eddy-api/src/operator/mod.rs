//! The operators that run user functions: one generic operator per shape (source,
//! one input, two inputs), each parameterised by a small *logic* that says what a record
//! does. What every operator does alike (open with state, name failures, close) lives in
//! [`core::OperatorCore`].

pub(crate) mod core;
pub(crate) mod logic;
pub(crate) mod one_input;
pub(crate) mod source;
pub(crate) mod timers;
pub(crate) mod timestamps;
pub(crate) mod two_input;

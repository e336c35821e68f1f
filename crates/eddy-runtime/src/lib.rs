//! eddy-runtime

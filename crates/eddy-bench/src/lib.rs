//! eddy-bench

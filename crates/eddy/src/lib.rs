//! eddy

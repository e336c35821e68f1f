//! eddy-api

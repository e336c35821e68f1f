//! eddy-checkpoint

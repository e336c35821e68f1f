pub mod datetime;
pub mod decimal;

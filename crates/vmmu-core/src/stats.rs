//! Statistics and the result schema `vmmu.result/1`.

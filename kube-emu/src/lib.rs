//! An in-memory Kubernetes API server emulator for tests and the embedded dev cluster. (Skeleton; issue #5.)

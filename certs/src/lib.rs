//! PEM loading, rustls server configuration, hot reload and self-signed bootstrap. (Skeleton; issue #2.)
